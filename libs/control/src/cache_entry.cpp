#include <cstddef>

#include "registry_state.hpp"

namespace primcache::control_internal {
// The innermost call this thread is making into any cache entry.
thread_local cache_entry::call_frame* cache_entry::innermost_call_ = nullptr;

cache_entry::call_frame::call_frame(cache_entry* e) noexcept : entry(e), outer(innermost_call_) {
  innermost_call_ = this;
}

cache_entry::call_frame::~call_frame() {
  innermost_call_ = outer;
  entry->leave();
}

std::size_t cache_entry::calls_on_this_thread(const cache_entry* e) noexcept {
  std::size_t n = 0;
  for (const call_frame* f = innermost_call_; f != nullptr; f = f->outer) {
    if (f->entry == e) ++n;
  }
  return n;
}

bool cache_entry::enter() {
  lock_guard g(mu_);
  if (!live_) return false;
  ++in_flight_;
  return true;
}

void cache_entry::leave() noexcept {
  lock_guard g(mu_);
  --in_flight_;
  if (!live_) idle_.notify_all();
}

void cache_entry::retire() noexcept {
  const std::size_t own = calls_on_this_thread(this);
  lock_guard g(mu_);
  live_ = false;
  // condition_variable_any unlocks and relocks mu_ itself around the wait.
  while (in_flight_ > own) idle_.wait(mu_);
}

}  // namespace primcache::control_internal
