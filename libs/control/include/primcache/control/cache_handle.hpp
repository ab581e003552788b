// primcache/control/cache_handle.hpp — reading and turning one registered
// cache by name, as metrics and the admin server do.
//
// A cache_handle is what control_registry::find_cache returns: the cache's
// name and unit, and its capacity, size, stats, set_capacity and flush. Each
// call reaches the cache only while it is registered; once its registration
// is gone every call throws error(not_found), and no call is still running in
// the cache when the unregistration returns (see cache_registration.hpp).
//
//   primcache::cache_handle h = primcache::control().find_cache("primitive");
//   h.set_capacity(2048);
//   primcache::cache_info now = h.info();   // capacity, size and stats together
//
// Thread-safety: handles may be copied and used from any thread at once; the
// calls go to the cache concurrently (its members must be thread-safe).
// Exceptions: error(not_found) once unregistered; whatever the cache throws.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "primcache/base/export.hpp"
#include "primcache/control/cache_counters.hpp"
#include "primcache/control/capacity_unit.hpp"
#include "primcache/control/controllable_cache.hpp"

namespace primcache {

class control_registry;
class cache_registration;

namespace control_internal {
class cache_entry;
}  // namespace control_internal

// One registered cache at one moment (list_caches, cache_handle::info).
struct cache_info {
  std::string name;
  capacity_unit unit = capacity_unit::entries;
  std::uint64_t capacity = 0;
  std::uint64_t size = 0;
  cache_counters stats;
  // Bytes held, for caches with weight(); empty for caches not weighed.
  std::optional<std::uint64_t> weight_bytes;
  // The cache's extra_stats(), names checked (names.hpp), ordered by name;
  // empty for caches without it.
  extra_stat_list extra;
};

class PRIMCACHE_API cache_handle {
 public:
  // The name and unit stay readable after unregistration.
  const std::string& name() const noexcept;
  capacity_unit unit() const noexcept;

  std::uint64_t capacity() const;
  std::uint64_t size() const;
  cache_counters stats() const;
  // The optional members: empty / {} when the cache lacks them.
  std::optional<std::uint64_t> weight() const;
  extra_stat_list extra_stats() const;
  // capacity, size, stats, weight and extras read in one visit; not an atomic snapshot of the
  // cache, which keeps counting meanwhile.
  cache_info info() const;

  void set_capacity(std::uint64_t capacity) const;
  // What set_capacity(capacity) would drop now, as the cache tells
  // (controllable_cache.hpp's optional preview_capacity); empty when the
  // cache has no preview. Changes nothing. Whatever the cache throws for a
  // value it would refuse passes through.
  std::optional<capacity_preview> preview_capacity(std::uint64_t capacity) const;
  // Calls the cache's clear().
  void flush() const;

 private:
  friend class control_registry;
  friend class cache_registration;
  explicit cache_handle(std::shared_ptr<control_internal::cache_entry> entry) noexcept;

  std::shared_ptr<control_internal::cache_entry> entry_;
};

}  // namespace primcache
