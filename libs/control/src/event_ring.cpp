#include "event_ring.hpp"

#include <chrono>
#include <utility>

#include "registry_state.hpp"

namespace primcache {
namespace control_internal {

void event_ring::record(control_event e) {
  if (e.time_unix_ms == 0) {
    e.time_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  }
  {
    lock_guard g(mu_);
    e.seq = ++last_seq_;
    std::swap(slots_[(e.seq - 1) % slots_.size()], e);
  }
  // `e` now holds the replaced event, freed here outside the lock.
}

event_page event_ring::since(std::uint64_t since) const {
  event_page page;
  lock_guard g(mu_);
  const std::uint64_t oldest = last_seq_ > slots_.size() ? last_seq_ - slots_.size() + 1 : 1;
  if (since >= last_seq_) {
    page.next = since > last_seq_ ? last_seq_ : since;
    return page;
  }
  const std::uint64_t first = since + 1 > oldest ? since + 1 : oldest;
  page.events.reserve(static_cast<std::size_t>(last_seq_ - first + 1));
  for (std::uint64_t s = first; s <= last_seq_; ++s) {
    page.events.push_back(slots_[(s - 1) % slots_.size()]);
  }
  page.next = last_seq_;
  return page;
}

}  // namespace control_internal

void control_registry::record_event(control_event event) {
  state_->events.record(std::move(event));
}

event_page control_registry::events_since(std::uint64_t since) const {
  return state_->events.since(since);
}

}  // namespace primcache
