// The bounded ring of recent events (event.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "primcache/base/thread_annotations.hpp"
#include "primcache/control/event.hpp"

namespace primcache::control_internal {

class event_ring {
 public:
  event_ring() : slots_(event_ring_capacity) {}

  void record(control_event e) PRIMCACHE_EXCLUDES(mu_);
  event_page since(std::uint64_t since) const PRIMCACHE_EXCLUDES(mu_);

  // Held across fork() (registry_state::lock_for_fork).
  void lock_for_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { mu_.lock(); }
  void unlock_after_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { mu_.unlock(); }

 private:
  mutable mutex mu_;
  std::vector<control_event> slots_ PRIMCACHE_GUARDED_BY(mu_);  // seq s lives at (s-1) % size
  std::uint64_t last_seq_ PRIMCACHE_GUARDED_BY(mu_) = 0;
};

}  // namespace primcache::control_internal
