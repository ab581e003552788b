// The eviction subscribers of one constant_tensor_cache (private).
//
// The list is copy-on-write: notify() copies the current vector's pointer
// under a short lock and calls the listeners without it, so a callback may
// subscribe or unsubscribe. No lock is held while a callback runs: each
// listener counts the calls in progress in a call_gate (base/call_gate.hpp),
// so callbacks of different subscriptions on different threads never wait for
// each other (a callback may remove tensors, whose notifications visit every
// listener again), and a slow callback holds up no other thread. Unsubscribing
// closes the gate and waits until no call is in progress on another
// thread; the calls in progress on its own thread (a callback resetting its
// own subscription) are not waited for: that wait could never end.
//
// deferred_notifications lets a thread that holds a lock of the cache (its
// configuration mutex, during a capacity change or a flush) collect the
// notifications it causes and deliver them once it has let the lock go, so
// that callbacks never run under it.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "primcache/base/call_gate.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "primcache/const_cache/eviction_subscription.hpp"

namespace primcache::const_cache_internal {

class listener {
 public:
  explicit listener(constant_tensor_cache::eviction_callback callback)
      : callback_(std::move(callback)) {}
  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;

  // Runs the callback, with no lock held, unless deactivate() has begun.
  void call(const constant_key& key, const constant_buffer* buffer,
            eviction_reason reason) noexcept {
    gate_.call([&] { callback_(key, buffer, reason); });
  }

  // Stops new calls, then returns once no other thread is inside one; the
  // callback never runs again. Calls this thread itself is making are not
  // waited for.
  void deactivate() noexcept { gate_.close(); }

  // In a fork child: the calls in progress are the forking thread's own;
  // the other threads' calls ended with their threads.
  void reset_in_child() noexcept { gate_.reset_in_child(); }

 private:
  const constant_tensor_cache::eviction_callback callback_;
  call_gate gate_;
};

class deferred_notifications;

class listener_list : public std::enable_shared_from_this<listener_list> {
 public:
  using snapshot = std::shared_ptr<const std::vector<std::shared_ptr<listener>>>;

  // On the fork handlers' list for its lifetime (fork_handlers.hpp).
  listener_list();
  ~listener_list();
  listener_list(const listener_list&) = delete;
  listener_list& operator=(const listener_list&) = delete;

  eviction_subscription add(constant_tensor_cache::eviction_callback callback);
  void remove(const std::shared_ptr<listener>& l) noexcept;
  // Calls every listener now.
  void notify(const constant_key& key, const constant_buffer* buffer,
              eviction_reason reason) noexcept;
  // The backing caches' eviction listener: notify(), or, while this thread
  // has a deferred_notifications of this list, a copy of the notification
  // kept for it (the buffer held until it is delivered).
  void evicted(const constant_key& key, const constant_tensor_cache::buffer_ptr* buffer,
               eviction_reason reason) noexcept;

  // fork(): the lock is held across the fork (nothing is waited for under
  // it), so the child copies no list in the middle of a change. In the
  // child, reset_in_child() (lock held) forgets the calls other threads had
  // in progress in the listed callbacks. A listener no longer listed has
  // none: it was deactivated, waiting for them, before it left the list.
  void lock_for_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { mutex_.lock(); }
  void unlock_after_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { mutex_.unlock(); }
  void reset_in_child() noexcept PRIMCACHE_REQUIRES(mutex_) {
    if (listeners_) {
      for (const auto& l : *listeners_) l->reset_in_child();
    }
  }

 private:
  mutex mutex_;
  snapshot listeners_ PRIMCACHE_GUARDED_BY(mutex_);
};

// For its scope, the notifications of `list` caused on this thread are
// collected instead of delivered; its destructor delivers them, in the order
// they came, with this thread's collection ended first (notifications that
// the callbacks cause are delivered at once). Declared before a lock guard,
// it is destroyed after it: the callbacks run once the lock is released.
// Should a copy fail for lack of memory, what was collected and that
// notification are delivered at once, under the caller's lock.
class deferred_notifications {
 public:
  explicit deferred_notifications(listener_list& list) noexcept;
  ~deferred_notifications();
  deferred_notifications(const deferred_notifications&) = delete;
  deferred_notifications& operator=(const deferred_notifications&) = delete;

 private:
  friend class listener_list;
  struct pending {
    constant_key key;
    constant_tensor_cache::buffer_ptr buffer;
    eviction_reason reason;
  };
  // Delivers and forgets what was collected so far.
  void deliver() noexcept;

  listener_list& list_;
  deferred_notifications* const outer_;
  std::vector<pending> pending_;
};

}  // namespace primcache::const_cache_internal
