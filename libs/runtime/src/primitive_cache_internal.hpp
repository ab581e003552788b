// The global primitive cache and verbose output, shared by primitive.cpp and
// primitive_cache.cpp.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "primcache/cache/concurrent_cache.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"

namespace primcache::runtime_internal {

using primitive_cache_type = concurrent_cache<key, std::shared_ptr<const primitive_impl>>;
using primitive_desc_cache_type = concurrent_cache<key, std::shared_ptr<const primitive_desc_impl>>;

// Created on first use with PRIMCACHE_PRIMITIVE_CACHE_CAPACITY; never
// destroyed (cached impls hold JIT code, and the JIT outlives them).
primitive_cache_type& global_primitive_cache();
// Accepted primitive descriptors by the op as described; same capacity as
// the primitive cache (set_primitive_cache_capacity sets both).
primitive_desc_cache_type& primitive_desc_cache();

// PRIMCACHE_VERBOSE, read once: 0 off, 1 creations, 2 also executions.
int verbose_level();
void verbose_print(std::string_view line);

}  // namespace primcache::runtime_internal
