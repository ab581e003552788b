#include "primcache/base/call_gate.hpp"

namespace primcache {
namespace {
// The innermost call this thread is making through any gate.
thread_local const void* innermost_call = nullptr;
}  // namespace

call_gate::frame::frame(call_gate* g) noexcept
    : gate(g), outer(static_cast<const frame*>(innermost_call)) {
  innermost_call = this;
}

call_gate::frame::~frame() {
  innermost_call = outer;
  gate->leave();
}

std::uint32_t call_gate::calls_on_this_thread() const noexcept {
  std::uint32_t n = 0;
  for (auto* f = static_cast<const frame*>(innermost_call); f != nullptr; f = f->outer) {
    if (f->gate == this) ++n;
  }
  return n;
}

bool call_gate::enter() noexcept {
  // Counted first, checked after, in one read-modify-write of the word: a
  // close() that cleared the bit before this increment waits for the undo
  // below, one after it waits for the call.
  if ((state_.fetch_add(one_call, std::memory_order_acquire) & open_bit) != 0) return true;
  leave();
  return false;
}

void call_gate::leave() noexcept {
  // Release: what the call did happens before close() sees the count drop,
  // so the object may be destroyed once close() returns.
  const std::uint32_t after = state_.fetch_sub(one_call, std::memory_order_release) - one_call;
  if ((after & open_bit) == 0) state_.notify_all();
}

void call_gate::close() noexcept {
  const std::uint32_t own = calls_on_this_thread() * one_call;
  std::uint32_t seen = state_.fetch_and(~open_bit, std::memory_order_acq_rel) & ~open_bit;
  while (seen > own) {
    state_.wait(seen, std::memory_order_acquire);
    seen = state_.load(std::memory_order_acquire);
  }
}

void call_gate::reset_in_child() noexcept {
  const std::uint32_t open = state_.load(std::memory_order_relaxed) & open_bit;
  state_.store(open | calls_on_this_thread() * one_call, std::memory_order_relaxed);
}

}  // namespace primcache
