// fork() and the constant tensor caches (private): every set, cache and
// listener list is on a process-wide list, and pthread_atfork handlers hold
// their locks across a fork and reset, in the child, what the parent's other
// threads left behind.
//
// A child has only the forking thread. The handlers hold, across the fork,
// each set's map lock, each cache's capacity lock and each listener list's
// lock, so the child copies no map, capacity change or list in the middle
// of a change. In the child they forget the calls other threads had in
// progress in eviction callbacks (each listener's call_gate keeps only the
// forking thread's own), and remake a set's settings lock that a thread the
// child does not have held (it is not held across the fork: kind settings
// run callbacks under it, which may take long or fork themselves).
//
// Lock order, which the prepare handlers follow: the sets' list lock, every
// set's map lock; then the caches' list lock, every cache's capacity lock,
// every listener list's lock. Nothing is waited for under a listener list's
// lock. Under a set's map lock, a new device's cache is made (it joins the
// caches' list, and the cache library's), takes its capacity lock and
// control's map lock (registering it); under a capacity lock, the backing
// caches' writers' locks (the cache library's). So the prepare handlers run
// in that order, before control's and the cache library's (prepare handlers
// run in the reverse order of registration): the caches' handlers are
// registered with the first cache or set, after the cache library's (it
// registers its own with its first cache, docs/cache.md, and one is made
// first); the sets' with the first set, after the caches' and after
// control's (control registers its own with its first registry, and a set
// is made with one).
//
// Callbacks run with none of these locks held, but for one exception: when
// a notification cannot be kept for lack of memory, it is heard at once
// under the capacity lock (deferred_notifications, listener_list.hpp). A
// capacity lock the forking thread holds that way itself (such a callback
// forks) is neither waited for nor released by the handlers; one that
// another thread holds that way while its callback takes a set's map lock
// or another cache's capacity lock can leave a prepare handler waiting for
// it for ever.
//
// Thread-safety: add and remove may be called from any thread, with none of
// the locks above held (they take their list's lock).
#pragma once

#include <atomic>
#include <thread>

#include "primcache/base/thread_annotations.hpp"

namespace primcache {
class constant_tensor_cache;
class constant_tensor_caches;
}  // namespace primcache

namespace primcache::const_cache_internal {

class listener_list;

// Holds `m` for its scope and records the calling thread in `holder`
// (cleared before the release), so that the fork handlers can tell a lock
// the forking thread holds from one a thread the child does not have held.
class PRIMCACHE_SCOPED_CAPABILITY holder_guard {
 public:
  holder_guard(mutex& m, std::atomic<std::thread::id>& holder) PRIMCACHE_ACQUIRE(m)
      : m_(m), holder_(holder) {
    m_.lock();
    // Relaxed: only the holder compares it with its own id, and a thread
    // always reads its own latest store.
    holder_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  ~holder_guard() PRIMCACHE_RELEASE() {
    holder_.store(std::thread::id(), std::memory_order_relaxed);
    m_.unlock();
  }
  holder_guard(const holder_guard&) = delete;
  holder_guard& operator=(const holder_guard&) = delete;

 private:
  mutex& m_;
  std::atomic<std::thread::id>& holder_;
};

// The process-wide list (fork.cpp); a friend of the classes whose locks it
// holds across a fork.
class fork_handlers {
 public:
  // Each object is on the list from its constructor to its destructor.
  static void add(constant_tensor_caches& set);
  static void remove(constant_tensor_caches& set) noexcept;
  static void add(constant_tensor_cache& cache);
  static void remove(constant_tensor_cache& cache) noexcept;
  static void add(listener_list& list);
  static void remove(listener_list& list) noexcept;

  // The atfork handlers' steps, per object.
  static void lock_for_fork(constant_tensor_caches& set) PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  static void unlock_after_fork(constant_tensor_caches& set) PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  static void reset_in_child(constant_tensor_caches& set) PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  static void lock_for_fork(constant_tensor_cache& cache) PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  static void unlock_after_fork(constant_tensor_cache& cache) PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
};

}  // namespace primcache::const_cache_internal
