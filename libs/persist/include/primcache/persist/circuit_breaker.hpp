// primcache/persist/circuit_breaker.hpp — the circuit breaker a remote store
// puts in front of its server, so that a dead or stalled server costs its
// callers nothing once it has failed a few times in a row.
//
//   primcache::circuit_breaker b({.failure_threshold = 3, .cool_down = std::chrono::seconds(1)});
//   primcache::circuit_breaker::ticket t = b.try_acquire();
//   if (!t) return miss;                  // open: do not even ask the server
//   bool ok = ask_server_within_timeout();
//   b.report(t, ok);                      // ok closes it; failures may open it
//
// States:
//   closed     every call may go; failure_threshold consecutive failures open it.
//   open       no call goes; after cool_down the next try_acquire() is the probe
//              and the breaker is half-open.
//   half_open  one call (the probe) is out; no other goes. Its success closes the
//              breaker, its failure opens it again for another cool_down.
// A ticket that is dropped without a report counts as a failure (a probe
// cannot be lost, leaving the breaker half-open for ever).
//
// Thread-safety: every member may be called from any thread at once (one
// small mutex, held for a few loads and stores, never during a call).
// Exceptions: none.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "primcache/base/export.hpp"
#include "primcache/base/thread_annotations.hpp"

namespace primcache {

// Values are stable: stats and control report them as integers.
enum class breaker_state : int { closed = 0, open = 1, half_open = 2 };

// "closed", "open", "half_open".
PRIMCACHE_API std::string_view to_string(breaker_state s) noexcept;

struct circuit_breaker_options {
  // Consecutive failures that open a closed breaker (at least 1).
  std::uint32_t failure_threshold = 3;
  // How long an open breaker refuses calls before it lets one probe through.
  std::chrono::milliseconds cool_down{1000};
};

class PRIMCACHE_API circuit_breaker {
 public:
  using clock = std::chrono::steady_clock;

  // Permission for one call; false (empty) when the breaker refuses it.
  class PRIMCACHE_API ticket {
   public:
    ticket() noexcept = default;
    ticket(ticket&& other) noexcept;
    ticket& operator=(ticket&& other) noexcept;
    ~ticket();  // an unreported ticket reports a failure
    explicit operator bool() const noexcept { return owner_ != nullptr; }
    bool probe() const noexcept { return probe_; }

   private:
    friend class circuit_breaker;
    ticket(circuit_breaker* owner, bool probe) noexcept : owner_(owner), probe_(probe) {}
    circuit_breaker* owner_ = nullptr;
    bool probe_ = false;
  };

  explicit circuit_breaker(circuit_breaker_options options = {});
  circuit_breaker(const circuit_breaker&) = delete;
  circuit_breaker& operator=(const circuit_breaker&) = delete;

  // A ticket, or an empty one when open (or half-open with the probe out).
  // `now` is a seam for tests; callers pass nothing.
  ticket try_acquire(clock::time_point now = clock::now());
  // Ends the call `t` allowed: success closes the breaker, failure counts
  // toward opening it (a failed probe reopens it at once). Empties `t`.
  void report(ticket& t, bool success, clock::time_point now = clock::now());

  breaker_state state() const;
  // Times the breaker went from closed (or half-open) to open.
  std::uint64_t opens() const;
  // Calls refused because the breaker was open.
  std::uint64_t rejections() const;

 private:
  const circuit_breaker_options options_;
  mutable mutex mu_;
  breaker_state state_ PRIMCACHE_GUARDED_BY(mu_) = breaker_state::closed;
  std::uint32_t consecutive_failures_ PRIMCACHE_GUARDED_BY(mu_) = 0;
  clock::time_point opened_at_ PRIMCACHE_GUARDED_BY(mu_){};
  std::uint64_t opens_ PRIMCACHE_GUARDED_BY(mu_) = 0;
  std::uint64_t rejections_ PRIMCACHE_GUARDED_BY(mu_) = 0;
};

}  // namespace primcache
