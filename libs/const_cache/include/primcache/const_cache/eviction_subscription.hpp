// primcache/const_cache/eviction_subscription.hpp — the RAII handle of an
// eviction callback registered with a constant_tensor_cache.
//
// A backend that keeps a cached buffer's handle for itself (to skip the
// lookup on every execution) subscribes to evictions and drops its handle
// when told; the handle it holds stays valid meanwhile (shared ownership).
//
//   primcache::eviction_subscription sub = cache.on_eviction(
//       [&](const primcache::constant_key& k, const primcache::constant_buffer*,
//           primcache::eviction_reason) { my_handles.forget(k); });
//   // ... sub.reset() or its destruction stops the calls
//
// When reset() or the destructor returns, the callback is not running on any
// other thread and will never be called again, so whatever it refers to may
// be destroyed. No lock is held while the callback runs (each subscription
// counts its calls in progress), so it may run on several threads at once
// and be re-entered on one; reset() waits for the calls on other threads
// only, so the callback itself may reset its own subscription, and must not
// reset another whose callback is waiting for it.
//
// Thread-safety: one subscription is one owner's object; different
// subscriptions may be used from different threads. Exceptions: none (moves,
// reset and the destructor are noexcept).
#pragma once

#include <memory>
#include <utility>

#include "primcache/base/export.hpp"

namespace primcache {

namespace const_cache_internal {
class listener;
class listener_list;
}  // namespace const_cache_internal

class PRIMCACHE_API eviction_subscription {
 public:
  // Subscribes to nothing.
  eviction_subscription() noexcept = default;
  eviction_subscription(eviction_subscription&& other) noexcept = default;
  eviction_subscription& operator=(eviction_subscription&& other) noexcept;
  eviction_subscription(const eviction_subscription&) = delete;
  eviction_subscription& operator=(const eviction_subscription&) = delete;
  ~eviction_subscription();

  // Unsubscribes now (see above); afterwards the subscription is empty.
  void reset() noexcept;
  explicit operator bool() const noexcept { return listener_ != nullptr; }

 private:
  friend class const_cache_internal::listener_list;
  eviction_subscription(std::shared_ptr<const_cache_internal::listener_list> list,
                        std::shared_ptr<const_cache_internal::listener> listener) noexcept
      : list_(std::move(list)), listener_(std::move(listener)) {}

  std::shared_ptr<const_cache_internal::listener_list> list_;
  std::shared_ptr<const_cache_internal::listener> listener_;
};

}  // namespace primcache
