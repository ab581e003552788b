// primcache/control/controllable_cache.hpp — what an object must offer to be
// registered as a cache, and how control calls it without knowing its type.
//
// Any object with these members satisfies controllable_cache; control and the
// cache library never include each other:
//
//   capacity()         current capacity, convertible to std::uint64_t
//                      (unlimited_capacity when there is no limit)
//   set_capacity(n)    n is a std::uint64_t; may evict at once, may throw
//                      (primcache::error) to refuse a value
//   size()             current size in the same unit, convertible to uint64
//   stats()            a cache_stats_like value (see cache_counters.hpp)
//   clear()            drops every entry (the admin "flush")
//
//   struct toy_cache {
//     std::uint64_t capacity() const;
//     void set_capacity(std::uint64_t n);
//     std::uint64_t size() const;
//     primcache::cache_counters stats() const;
//     void clear();
//   };
//   static_assert(primcache::controllable_cache<toy_cache>);
//
// Thread-safety: the registry may call these members from any thread,
// concurrently with each other and with the cache's own users, so they must
// be thread-safe (a concurrent cache's are). Exceptions: whatever the
// object's members throw reaches the registry's caller unchanged.
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>

#include "primcache/control/cache_counters.hpp"

namespace primcache {

template <typename C>
concept controllable_cache = requires(C& c, std::uint64_t n) {
                               { c.capacity() } -> std::convertible_to<std::uint64_t>;
                               c.set_capacity(n);
                               { c.size() } -> std::convertible_to<std::uint64_t>;
                               { c.stats() } -> cache_stats_like;
                               c.clear();
                             };

namespace control_internal {

// The type-erased view the registry keeps of a registered object: a borrowed
// pointer and one function per member. Plain function pointers rather than a
// virtual base, so nothing of the adapter's type crosses the library boundary.
struct cache_ops {
  void* object = nullptr;
  std::uint64_t (*capacity)(void*) = nullptr;
  void (*set_capacity)(void*, std::uint64_t) = nullptr;
  std::uint64_t (*size)(void*) = nullptr;
  cache_counters (*stats)(void*) = nullptr;
  void (*clear)(void*) = nullptr;
};

template <controllable_cache C>
cache_ops make_cache_ops(C& c) {
  cache_ops ops;
  ops.object = static_cast<void*>(std::addressof(c));
  ops.capacity = [](void* p) -> std::uint64_t {
    return static_cast<std::uint64_t>(static_cast<C*>(p)->capacity());
  };
  ops.set_capacity = [](void* p, std::uint64_t n) { (void)static_cast<C*>(p)->set_capacity(n); };
  ops.size = [](void* p) -> std::uint64_t {
    return static_cast<std::uint64_t>(static_cast<C*>(p)->size());
  };
  ops.stats = [](void* p) -> cache_counters {
    return to_cache_counters(static_cast<C*>(p)->stats());
  };
  ops.clear = [](void* p) { (void)static_cast<C*>(p)->clear(); };
  return ops;
}

}  // namespace control_internal
}  // namespace primcache
