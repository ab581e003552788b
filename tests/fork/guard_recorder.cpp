// Interposes __cxa_guard_acquire for first_use_statics_test: the compiler
// calls it the first time a function-local static with a dynamic
// initializer is reached, and every DSO calls it through the PLT, so this
// definition in the executable sees the initializations of every library
// the test loads. It records where each initialization starts (the
// caller's address) while recording is on, then forwards to the C++
// runtime's own. No function-local static, allocation or lock here.
#include "guard_recorder.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdint>

namespace {

using guard_acquire_fn = int (*)(std::int64_t*);

std::atomic<guard_acquire_fn> g_real{nullptr};
std::atomic<bool> g_recording{false};
std::atomic<std::size_t> g_count{0};
void* g_callers[primcache_test::k_max_guard_initializations];

guard_acquire_fn real_guard_acquire() {
  guard_acquire_fn f = g_real.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<guard_acquire_fn>(::dlsym(RTLD_NEXT, "__cxa_guard_acquire"));
    g_real.store(f, std::memory_order_release);
  }
  return f;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int __cxa_guard_acquire(std::int64_t* guard) {
  const int initialize = real_guard_acquire()(guard);
  if (initialize == 1 && g_recording.load(std::memory_order_acquire)) {
    const std::size_t i = g_count.fetch_add(1, std::memory_order_relaxed);
    if (i < primcache_test::k_max_guard_initializations) g_callers[i] = __builtin_return_address(0);
  }
  return initialize;
}

namespace primcache_test {

void start_recording_guard_initializations() {
  g_count.store(0, std::memory_order_relaxed);
  g_recording.store(true, std::memory_order_release);
}

std::vector<void*> stop_recording_guard_initializations() {
  g_recording.store(false, std::memory_order_release);
  const std::size_t n = std::min(g_count.load(), k_max_guard_initializations);
  return std::vector<void*>(g_callers, g_callers + n);
}

}  // namespace primcache_test
