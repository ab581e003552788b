// primcache/base/thread_startup.hpp — counts a component's threads that are
// past their start-up, so that its pthread_atfork prepare handler can wait
// for the rest before the fork.
//
// A new thread allocates while it starts (its thread-local storage, and
// under AddressSanitizer the sanitizer's own records). glibc's malloc locks
// its arenas around fork(), but the AddressSanitizer allocator of GCC 12 and clang 15 does
// not: a fork in that moment gives the child an allocator lock held by a
// thread the child does not have, and the child's first allocation of that
// size waits forever. A component that starts threads counts them here, and
// its prepare handler (holding the lock under which it starts threads, so no
// new one starts) waits until all of them are counted:
//
//   void worker() { startups_.mark_started(); ... }          // first statement
//   void fork_prepare() { mu_.lock(); startups_.wait_for(spawned_); }
//   void fork_child() { startups_.reset(); ... }             // no thread here
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <atomic>

#include "primcache/base/export.hpp"

namespace primcache {

class PRIMCACHE_API thread_startups {
 public:
  // The first statement of the thread's function: its start-up is over.
  void mark_started() noexcept { started_.fetch_add(1, std::memory_order_release); }
  // Returns once `spawned` threads have called mark_started (yields, then
  // sleeps 100 us between looks). Waits forever for a thread that never
  // starts: the caller counts only threads whose creation succeeded.
  void wait_for(int spawned) const noexcept;
  // In a fork child, whose threads are gone.
  void reset() noexcept { started_.store(0, std::memory_order_relaxed); }
  int started() const noexcept { return started_.load(std::memory_order_acquire); }

 private:
  std::atomic<int> started_{0};
};

}  // namespace primcache
