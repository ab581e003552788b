// primcache/persist/registration.hpp — shows a blob store in control (as
// cache `persistent` by default), so the metrics and the console list it and
// an operator can change its capacity or flush it.
//
//   std::unique_ptr<primcache::blob_store> store = primcache::directory_store::open(o);
//   primcache::blob_store_registration reg = primcache::register_blob_store(*store);
//   // control().list_caches() now has "persistent": capacity and size in MB,
//   // weight_bytes the exact bytes, and extra stats writes, corrupt_entries,
//   // errors, refusals, bytes_read, bytes_written, read_only, and the remote
//   // tier's remote_hits, remote_errors, timeouts, breaker_state (0 closed,
//   // 1 open, 2 half-open), breaker_opens, breaker_rejections, dropped_writes;
//   // for a sharded Redis tier (blob_store::shards()) also `shards` and, per
//   // shard i (list order, from 0), shard<i>_hits, _misses, _writes, _bytes,
//   // _remote_errors, _timeouts, _breaker_state, _breaker_opens,
//   // _breaker_rejections.
//
// Capacity and size are in MB (capacity_unit::megabytes); size is rounded up,
// so a store holding a few bytes does not read as empty. Stats: hits, misses,
// evictions as control's counters, failures = I/O errors.
//
// Lifetime: the registration borrows the store; destroy the registration
// (or reset() it) before the store. Thread-safety: as cache_registration.
// Exceptions: register_blob_store throws what control's register_cache
// throws (already_exists when the name is taken).
#pragma once

#include <memory>
#include <string_view>

#include "primcache/base/export.hpp"
#include "primcache/control/cache_registration.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/persist/blob_store.hpp"

namespace primcache {

namespace persist_internal {
class control_view;
}  // namespace persist_internal

class PRIMCACHE_API blob_store_registration {
 public:
  blob_store_registration() noexcept;
  blob_store_registration(blob_store_registration&&) noexcept;
  blob_store_registration& operator=(blob_store_registration&&) noexcept;
  ~blob_store_registration();

  // Unregisters (waiting for calls in flight, see cache_registration).
  void reset() noexcept;
  explicit operator bool() const noexcept { return static_cast<bool>(view_); }

 private:
  friend PRIMCACHE_API blob_store_registration register_blob_store(blob_store&, std::string_view,
                                                                   control_registry&);
  std::unique_ptr<persist_internal::control_view> view_;
  cache_registration registration_;  // destroyed before view_
};

PRIMCACHE_API blob_store_registration register_blob_store(blob_store& store,
                                                          std::string_view name = "persistent",
                                                          control_registry& registry = control());

}  // namespace primcache
