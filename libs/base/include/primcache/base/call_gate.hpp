// primcache/base/call_gate.hpp — lets calls into an object run with no lock
// held while its owner can still close it: close() stops new calls and
// returns once no call is in progress on another thread, after which the
// object is never called through the gate again.
//
//   call_gate gate;
//   if (!gate.call([&] { cache.flush(); })) { ... closed: not called ... }
//   gate.close();     // in the owner's teardown; then the object may go
//
// Calls the closing thread itself is making (an object closing its own gate
// from inside a call) are not waited for: that wait could never end. Each
// thread's calls are frames on its own stack, so close() counts them
// without allocating. The gate is one atomic word (a live bit and the
// count); close() waits on it with std::atomic::wait (a futex: no lock a
// fork could copy held, no waiter list a fork child would inherit).
//
// Thread-safety: every member may be called from any thread.
// reset_in_child() only in a fork child, before it has other threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "primcache/base/export.hpp"

namespace primcache {

class PRIMCACHE_API call_gate {
 public:
  call_gate() = default;
  call_gate(const call_gate&) = delete;
  call_gate& operator=(const call_gate&) = delete;

  // Runs f() and returns true while the gate is open; returns false without
  // running f once close() has begun. f's exceptions propagate.
  template <typename F>
  bool call(F&& f) {
    if (!enter()) return false;
    const frame in(this);
    std::forward<F>(f)();
    return true;
  }

  // Stops new calls, then waits until no other thread is inside one.
  void close() noexcept;

  // In a fork child: the calls in progress are the forking thread's own;
  // the other threads' calls ended with their threads.
  void reset_in_child() noexcept;

 private:
  // Marks a call in progress on this thread for its scope; frames form a
  // per-thread stack (a thread_local head in call_gate.cpp).
  class PRIMCACHE_API frame {
   public:
    explicit frame(call_gate* g) noexcept;
    ~frame();
    frame(const frame&) = delete;
    frame& operator=(const frame&) = delete;

    call_gate* const gate;
    const frame* const outer;
  };
  std::uint32_t calls_on_this_thread() const noexcept;

  bool enter() noexcept;
  void leave() noexcept;

  // Bit 0: open; the rest: calls in progress, two per call.
  static constexpr std::uint32_t open_bit = 1;
  static constexpr std::uint32_t one_call = 2;
  std::atomic<std::uint32_t> state_{open_bit};
};

}  // namespace primcache
