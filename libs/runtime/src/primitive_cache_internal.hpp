// The global primitive cache and verbose output, shared by primitive.cpp and
// primitive_cache.cpp.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "primcache/cache/concurrent_cache.hpp"
#include "primcache/control/metric.hpp"
#include "primcache/control/setting.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/backend/op_desc.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"

namespace primcache::runtime_internal {

using primitive_cache_type = concurrent_cache<key, std::shared_ptr<const backend::primitive_impl>>;
using primitive_desc_cache_type =
    concurrent_cache<key, std::shared_ptr<const backend::primitive_desc_impl>>;

// Created on first use with PRIMCACHE_PRIMITIVE_CACHE_CAPACITY; never
// destroyed (cached impls hold JIT code, and the JIT outlives them).
primitive_cache_type& global_primitive_cache();
// Accepted primitive descriptors by the op as described; same capacity as
// the primitive cache (set_primitive_cache_capacity sets both).
primitive_desc_cache_type& primitive_desc_cache();

// The runtime's series in primcache::control, registered once (each as 0
// from the start) and never destroyed; recording is a relaxed atomic add.
struct runtime_metrics {
  // primcache_primitive_create_seconds{engine, source}: source="compile"
  // for every creation that compiled; source="persistent" for those the
  // persistent cache served; source="memory" for creations the primitive cache
  // served (hits, and waits on a concurrent compile), timed on one creation
  // in kMemorySampleEvery per thread: two clock reads on every hit would add
  // a tenth to the hit path. Counts come from the cache's requests_total.
  metric_histogram create_seconds[2];  // engine cpu, gpu
  metric_histogram memory_seconds[2];  // engine cpu, gpu
  // source="persistent": creations the persistent cache served (a read and
  // a load, no compilation).
  metric_histogram persistent_seconds[2];  // engine cpu, gpu
  static constexpr unsigned kMemorySampleEvery = 64;
  // primcache_primitive_executions_total{kind}, by primitive_kind - 1.
  metric_counter executions[4];
  const metric_histogram& create(engine_kind engine) const noexcept {
    return create_seconds[engine == engine_kind::gpu ? 1 : 0];
  }
  const metric_histogram& from_memory(engine_kind engine) const noexcept {
    return memory_seconds[engine == engine_kind::gpu ? 1 : 0];
  }
  const metric_histogram& from_persistent(engine_kind engine) const noexcept {
    return persistent_seconds[engine == engine_kind::gpu ? 1 : 0];
  }
  const metric_counter& executed(backend::primitive_kind kind) const noexcept {
    return executions[static_cast<int>(kind) - 1];
  }
  // The setting "num_threads": the default pool's size, changed live by an
  // operator (set_num_threads keeps it current).
  setting_registration num_threads;
};
const runtime_metrics& metrics();

// PRIMCACHE_VERBOSE, read once: 0 off, 1 creations, 2 also executions.
int verbose_level();
void verbose_print(std::string_view line);

}  // namespace primcache::runtime_internal
