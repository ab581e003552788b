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
// and, optionally (existing registrations without them keep compiling):
//
//   weight()           bytes the cache holds, convertible to std::uint64_t
//                      (reported as weight_bytes; caches without it, or
//                      whose weighed() is false at registration because
//                      they count entries, report none)
//   extra_stats()      a range of pairs (name, value): .first convertible to
//                      std::string_view, .second to std::uint64_t, e.g. a
//                      std::vector<std::pair<std::string, std::uint64_t>> or
//                      a std::map; names follow names.hpp (others are left
//                      out of the listing)
//   preview_capacity(n) what set_capacity(n) would drop now, without doing
//                      it: something convertible to capacity_preview (below).
//                      Lets a console say before a change how many entries
//                      and bytes go; caches whose rules are "evict down to
//                      the new capacity" may leave it out (control then says
//                      it does not know, and readers estimate)
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
#include <ranges>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// A range of (name, value) pairs, as extra_stats() returns.
template <typename R>
concept extra_stats_range =
    std::ranges::input_range<R> && requires(std::ranges::range_reference_t<R> e) {
                                     { e.first } -> std::convertible_to<std::string_view>;
                                     { e.second } -> std::convertible_to<std::uint64_t>;
                                   };

// The optional members.
template <typename C>
concept weighed_cache = requires(C& c) {
                          { c.weight() } -> std::convertible_to<std::uint64_t>;
                        };
template <typename C>
concept cache_with_extra_stats = requires(C& c) {
                                   { c.extra_stats() } -> extra_stats_range;
                                 };

// What a capacity change would drop from a cache's current contents, as the
// cache itself tells (preview_capacity). The cache may change meanwhile: it
// is what the change would do now.
struct capacity_preview {
  bool flushes = false;       // the change empties the cache (all its entries go)
  std::uint64_t entries = 0;  // entries that would go (in-flight ones included)
  std::uint64_t bytes = 0;    // bytes that would go (0 for caches not weighed)
  friend bool operator==(const capacity_preview&, const capacity_preview&) = default;
};

template <typename C>
concept cache_with_preview = requires(C& c, std::uint64_t n) {
                               { c.preview_capacity(n) } -> std::convertible_to<capacity_preview>;
                             };

// Per-cache extra statistics, as control reports them.
using extra_stat_list = std::vector<std::pair<std::string, std::uint64_t>>;

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
  // Optional members: nullptr when the cache lacks them.
  std::uint64_t (*weight)(void*) = nullptr;
  extra_stat_list (*extra_stats)(void*) = nullptr;
  capacity_preview (*preview_capacity)(void*, std::uint64_t) = nullptr;
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
  bool reports_weight = weighed_cache<C>;
  // A cache that can run either way (weighed or counting entries) says
  // which with weighed(); one counting entries has no weight in bytes.
  if constexpr (requires {
                  { c.weighed() } -> std::convertible_to<bool>;
                }) {
    reports_weight = reports_weight && static_cast<bool>(c.weighed());
  }
  if constexpr (weighed_cache<C>) {
    if (reports_weight) {
      ops.weight = [](void* p) -> std::uint64_t {
        return static_cast<std::uint64_t>(static_cast<C*>(p)->weight());
      };
    }
  }
  if constexpr (cache_with_extra_stats<C>) {
    ops.extra_stats = [](void* p) -> extra_stat_list {
      extra_stat_list out;
      for (auto&& e : static_cast<C*>(p)->extra_stats()) {
        out.emplace_back(std::string(std::string_view(e.first)),
                         static_cast<std::uint64_t>(e.second));
      }
      return out;
    };
  }
  if constexpr (cache_with_preview<C>) {
    ops.preview_capacity = [](void* p, std::uint64_t n) -> capacity_preview {
      return static_cast<C*>(p)->preview_capacity(n);
    };
  }
  return ops;
}

}  // namespace control_internal
}  // namespace primcache
