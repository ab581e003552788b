// primcache/control/cache_counters.hpp — the counters control reports for a
// registered cache, and their conversion from the cache's own statistics.
//
// control includes no cache header. A registered cache's stats() may return
// any type with at least the fields hits, misses and evictions (anything
// convertible to std::uint64_t, std::atomic included). The optional fields
// waits, refusals and failures are read when present and are 0 otherwise; the
// creation time is read from creation_ns_total (nanoseconds, an integer) or
// from creation_time (any std::chrono::duration), whichever is present.
//
//   struct my_stats { std::uint64_t hits, misses, evictions, failures; };
//   primcache::cache_counters c = primcache::to_cache_counters(my_stats{5, 2, 1, 0});
//   // c.hits == 5, c.waits == 0
//
// Thread-safety: values and pure functions. Exceptions: none of its own.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <type_traits>

namespace primcache {

// Plain integers, so metrics and the admin server can print them without
// knowing the cache's types.
struct cache_counters {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t waits = 0;              // lookups that waited for another thread's creation
  std::uint64_t evictions = 0;          // entries removed to respect the capacity
  std::uint64_t refusals = 0;           // created values the policy did not keep
  std::uint64_t failures = 0;           // creations that failed
  std::uint64_t creation_ns_total = 0;  // time spent creating values, in nanoseconds

  friend bool operator==(const cache_counters&, const cache_counters&) = default;
};

// A statistics type control can read: the required fields, each convertible
// to std::uint64_t.
template <typename S>
concept cache_stats_like = requires(const std::remove_cvref_t<S>& s) {
                             { s.hits } -> std::convertible_to<std::uint64_t>;
                             { s.misses } -> std::convertible_to<std::uint64_t>;
                             { s.evictions } -> std::convertible_to<std::uint64_t>;
                           };

template <cache_stats_like S>
cache_counters to_cache_counters(const S& s) {
  cache_counters out;
  out.hits = static_cast<std::uint64_t>(s.hits);
  out.misses = static_cast<std::uint64_t>(s.misses);
  out.evictions = static_cast<std::uint64_t>(s.evictions);
  if constexpr (requires {
                  { s.waits } -> std::convertible_to<std::uint64_t>;
                }) {
    out.waits = static_cast<std::uint64_t>(s.waits);
  }
  if constexpr (requires {
                  { s.refusals } -> std::convertible_to<std::uint64_t>;
                }) {
    out.refusals = static_cast<std::uint64_t>(s.refusals);
  }
  if constexpr (requires {
                  { s.failures } -> std::convertible_to<std::uint64_t>;
                }) {
    out.failures = static_cast<std::uint64_t>(s.failures);
  }
  if constexpr (requires {
                  { s.creation_ns_total } -> std::convertible_to<std::uint64_t>;
                }) {
    out.creation_ns_total = static_cast<std::uint64_t>(s.creation_ns_total);
  } else if constexpr (requires {
                         std::chrono::duration_cast<std::chrono::nanoseconds>(s.creation_time);
                       }) {
    out.creation_ns_total = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(s.creation_time).count());
  }
  return out;
}

}  // namespace primcache
