// primcache/cache/cache_options.hpp — how a concurrent_cache is configured.
//
// Capacity counts entries unless a weigher is given; then it counts the
// weigher's unit (bytes, by convention) and the cache reports unit() bytes.
// The hooks are optional:
//   weigher     (key, value) -> weight of a created value. Called once per
//               creation, outside the cache's locks. A weight of 0 counts
//               as 1, so that the capacity also bounds the entry count. An
//               in-flight entry weighs 0 until its value exists, and is
//               never evicted to make room (that would free nothing).
//   on_evict    (key, value or nullptr, reason), called outside the cache's
//               locks for every entry that leaves the cache by eviction,
//               erase or clear — not for failed creations, refusals or the
//               cache's destruction. value is null when the entry left while
//               its creation was still in flight. It may run on any thread
//               that calls into the cache and must not throw (a throw
//               terminates the process).
//   is_failure  value -> true when a creator reported failure through its
//               return value (say, a null handle or an error status). Such a
//               value is handed to the creator's caller and every waiter but
//               is not kept, and counts as a failure.
//
//   primcache::cache_options<std::string, blob_ptr> o;
//   o.capacity = 64 << 20;  // 64 MiB
//   o.weigher = [](const std::string&, const blob_ptr& b) { return b->size(); };
//   o.on_evict = [](const std::string& k, const blob_ptr*, primcache::eviction_reason r) {
//     log("evicted", k, primcache::to_string(r));
//   };
//
// Thread-safety: a value type, copied into the cache at construction.
// Exceptions: to_string never throws.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

#include "primcache/base/export.hpp"
#include "primcache/cache/cache_policy.hpp"

namespace primcache {

enum class eviction_reason : unsigned char {
  capacity,  // made room, or the capacity shrank
  erased,    // erase(key)
  cleared,   // clear() or clear_and_set_capacity()
};

enum class cache_unit : unsigned char { entries, bytes };

// "capacity", "erased", "cleared"; "unknown" outside the enum.
PRIMCACHE_API std::string_view to_string(eviction_reason reason) noexcept;
// "entries", "bytes"; "unknown" outside the enum.
PRIMCACHE_API std::string_view to_string(cache_unit unit) noexcept;

template <typename Key, typename Value>
struct cache_options {
  std::size_t capacity = 1024;  // entries, or weight when a weigher is set
  cache_policy policy = cache_policy::lru;
  std::function<std::size_t(const Key&, const Value&)> weigher;
  std::function<void(const Key&, const Value*, eviction_reason)> on_evict;
  std::function<bool(const Value&)> is_failure;
};

}  // namespace primcache
