#include <cstdint>

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

std::uint32_t cache_entry::calls_on_this_thread(const cache_entry* e) noexcept {
  std::uint32_t n = 0;
  for (const call_frame* f = innermost_call_; f != nullptr; f = f->outer) {
    if (f->entry == e) ++n;
  }
  return n;
}

bool cache_entry::enter() noexcept {
  // Counted first, checked after: a retire() that cleared the bit before
  // this increment waits for the undo below, one after it waits for the call.
  if ((state_.fetch_add(one_call, std::memory_order_acquire) & live_bit) != 0) return true;
  leave();
  return false;
}

void cache_entry::leave() noexcept {
  const std::uint32_t after = state_.fetch_sub(one_call, std::memory_order_release) - one_call;
  if ((after & live_bit) == 0) state_.notify_all();
}

void cache_entry::retire() noexcept {
  const std::uint32_t own = calls_on_this_thread(this) * one_call;
  std::uint32_t seen = state_.fetch_and(~live_bit, std::memory_order_acq_rel) & ~live_bit;
  while (seen > own) {
    state_.wait(seen, std::memory_order_acquire);
    seen = state_.load(std::memory_order_acquire);
  }
}

void cache_entry::reset_in_child() noexcept {
  const std::uint32_t live = state_.load(std::memory_order_relaxed) & live_bit;
  state_.store(live | calls_on_this_thread(this) * one_call, std::memory_order_relaxed);
}

}  // namespace primcache::control_internal
