#include "primcache/persist/circuit_breaker.hpp"

#include <algorithm>
#include <utility>

namespace primcache {

std::string_view to_string(breaker_state s) noexcept {
  switch (s) {
    case breaker_state::closed: return "closed";
    case breaker_state::open: return "open";
    case breaker_state::half_open: return "half_open";
  }
  return "unknown";
}

circuit_breaker::ticket::ticket(ticket&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), probe_(other.probe_) {}

circuit_breaker::ticket& circuit_breaker::ticket::operator=(ticket&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr) owner_->report(*this, false);
    owner_ = std::exchange(other.owner_, nullptr);
    probe_ = other.probe_;
  }
  return *this;
}

circuit_breaker::ticket::~ticket() {
  if (owner_ != nullptr) owner_->report(*this, false);
}

circuit_breaker::circuit_breaker(circuit_breaker_options options) : options_(options) {}

circuit_breaker::ticket circuit_breaker::try_acquire(clock::time_point now) {
  lock_guard g(mu_);
  switch (state_) {
    case breaker_state::closed: return ticket(this, false);
    case breaker_state::open:
      if (now - opened_at_ >= options_.cool_down) {
        state_ = breaker_state::half_open;
        return ticket(this, true);
      }
      break;
    case breaker_state::half_open: break;  // the probe is out
  }
  ++rejections_;
  return ticket();
}

void circuit_breaker::report(ticket& t, bool success, clock::time_point now) {
  if (t.owner_ != this) return;
  t.owner_ = nullptr;
  lock_guard g(mu_);
  if (t.probe_) {
    // Only the probe moves a half-open breaker.
    if (success) {
      state_ = breaker_state::closed;
      consecutive_failures_ = 0;
    } else {
      state_ = breaker_state::open;
      opened_at_ = now;
      ++opens_;
    }
    return;
  }
  // A call let through while closed. If the breaker opened meanwhile, its
  // outcome is old news: only the probe decides when to close again.
  if (state_ != breaker_state::closed) return;
  if (success) {
    consecutive_failures_ = 0;
    return;
  }
  ++consecutive_failures_;
  if (consecutive_failures_ >= std::max<std::uint32_t>(1, options_.failure_threshold)) {
    state_ = breaker_state::open;
    opened_at_ = now;
    ++opens_;
  }
}

breaker_state circuit_breaker::state() const {
  lock_guard g(mu_);
  return state_;
}

std::uint64_t circuit_breaker::opens() const {
  lock_guard g(mu_);
  return opens_;
}

std::uint64_t circuit_breaker::rejections() const {
  lock_guard g(mu_);
  return rejections_;
}

}  // namespace primcache
