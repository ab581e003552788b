// primcache/runtime/primitive_cache.hpp — the global primitive cache.
//
// Every primitive is created through one process-wide cache of compiled
// primitive implementations (LRU). Its capacity, in entries, starts at
// PRIMCACHE_PRIMITIVE_CACHE_CAPACITY (default 1024; malformed values are
// reported and ignored) and the API wins over it. Capacity 0 clears the
// cache and disables it; shrinking evicts least recently used entries at
// once. Primitives already created keep their implementation when it is
// evicted. The cache is registered with primcache::control as "primitive".
//
//   primcache::set_primitive_cache_capacity(0);     // clear and disable
//   int n = primcache::get_primitive_cache_size();
//
// Thread-safety: all functions may be called from any thread.
// Exceptions: set_primitive_cache_capacity throws primcache::error
// (invalid_arguments) for a negative capacity.
#pragma once

#include "primcache/base/export.hpp"
#include "primcache/runtime/primitive.hpp"

namespace primcache {

PRIMCACHE_API void set_primitive_cache_capacity(int capacity);
PRIMCACHE_API int get_primitive_cache_capacity();
PRIMCACHE_API int get_primitive_cache_size();
// Whether the implementation for this descriptor's key is in the cache.
PRIMCACHE_API bool primitive_cache_contains(const primitive_desc& pd);

}  // namespace primcache
