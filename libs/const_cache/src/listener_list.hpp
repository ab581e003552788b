// The eviction subscribers of one constant_tensor_cache (private).
//
// The list is copy-on-write: notify() copies the current vector's pointer
// under a short lock and calls the listeners without it, so a callback may
// subscribe or unsubscribe. Each listener has its own recursive mutex, held
// while its callback runs and taken by its unsubscription, which is how
// reset() guarantees that the callback is not running elsewhere and will not
// run again (recursive, so a callback may reset its own subscription).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "primcache/base/thread_annotations.hpp"
#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "primcache/const_cache/eviction_subscription.hpp"

namespace primcache::const_cache_internal {

class listener {
 public:
  explicit listener(constant_tensor_cache::eviction_callback callback)
      : callback_(std::move(callback)) {}

  void call(const constant_key& key, const constant_buffer* buffer,
            eviction_reason reason) noexcept {
    std::lock_guard<std::recursive_mutex> guard(running_);
    if (active_) callback_(key, buffer, reason);
  }
  // Returns once no other thread runs the callback; it never runs again.
  void deactivate() noexcept {
    std::lock_guard<std::recursive_mutex> guard(running_);
    active_ = false;
  }

 private:
  const constant_tensor_cache::eviction_callback callback_;
  std::recursive_mutex running_;
  bool active_ = true;  // guarded by running_
};

class listener_list : public std::enable_shared_from_this<listener_list> {
 public:
  using snapshot = std::shared_ptr<const std::vector<std::shared_ptr<listener>>>;

  eviction_subscription add(constant_tensor_cache::eviction_callback callback);
  void remove(const std::shared_ptr<listener>& l) noexcept;
  void notify(const constant_key& key, const constant_buffer* buffer,
              eviction_reason reason) noexcept;

 private:
  mutex mutex_;
  snapshot listeners_ PRIMCACHE_GUARDED_BY(mutex_);
};

}  // namespace primcache::const_cache_internal
