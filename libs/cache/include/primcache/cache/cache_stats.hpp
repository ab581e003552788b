// primcache/cache/cache_stats.hpp — what a cache reports about itself.
//
// cache_stats are monotonic counters since construction. The cache keeps
// them as relaxed atomics spread so that hitting threads never write a
// shared cache line (hits and waits live in per-thread-slot lines); stats()
// sums them at the moment it is called. Each counter is exact once the
// calls it counts have returned; counters read together are not a snapshot
// of one instant.
//
// cache_occupancy is a consistent snapshot (read under the cache's lock), so
// occupancy().size <= occupancy().capacity holds for an entries cache, and
// occupancy().weight <= occupancy().capacity for a bytes cache.
//
//   primcache::cache_stats s = cache.stats();
//   double ratio = double(s.hits) / double(s.hits + s.misses + s.waits);
//
// Thread-safety: plain values.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace primcache {

struct cache_stats {
  std::uint64_t hits = 0;                     // found ready
  std::uint64_t misses = 0;                   // creator runs
  std::uint64_t waits = 0;                    // waited for another caller's creator
  std::uint64_t evictions = 0;                // entries removed for capacity (not erase or clear)
  std::uint64_t refusals = 0;                 // created values not kept: no_evict full, capacity 0
  std::uint64_t failures = 0;                 // creators that threw or returned a failure value
  std::chrono::nanoseconds creation_time{0};  // total time spent in creators
};

struct cache_occupancy {
  std::size_t size = 0;      // entries, in-flight ones included
  std::size_t weight = 0;    // sum of created entries' weights (1 each without a weigher,
                             // at least 1 each with one)
  std::size_t capacity = 0;  // in the cache's unit
};

}  // namespace primcache
