#include "primcache/runtime/thread_pool.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <limits>
#include <string>

#include "primcache/base/env.hpp"
#include "primcache/base/error.hpp"

namespace primcache {
namespace {

thread_local bool tl_in_region = false;

// About 10-50 us of polling before a futex sleep: long enough that the next
// region of a multi-stage kernel finds the workers awake, short enough not
// to burn a shared core for long.
constexpr int kSpinIterations = 2000;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Raw futexes on the atomics' own words. (libstdc++ 12's atomic::wait
// routes some types through a shared proxy word and was seen to lose
// wake-ups here.) The atomics carry the memory ordering; the futex only
// sleeps while the word still holds `expected`.
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected,
            nullptr, nullptr, 0);
}
void futex_wake(std::atomic<std::uint32_t>& word, int count) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr,
            nullptr, 0);
}

// The generation word: (region counter << kNthrBits) | nthr. The counter
// wraps after 2^22 regions; a worker could only mistake one region for
// another if it slept through exactly that many wake-ups.
constexpr std::uint32_t kNthrBits = 10;
constexpr std::uint32_t kNthrMask = (1u << kNthrBits) - 1;
constexpr int kMaxThreads = static_cast<int>(kNthrMask);

struct region_flag {
  region_flag() { tl_in_region = true; }
  ~region_flag() { tl_in_region = false; }
};

}  // namespace

range balance(std::int64_t n, int ithr, int nthr) noexcept {
  if (nthr <= 1 || n <= 0) return {0, std::max<std::int64_t>(n, 0)};
  const std::int64_t base = n / nthr;
  const std::int64_t extra = n % nthr;
  const std::int64_t begin = ithr * base + std::min<std::int64_t>(ithr, extra);
  return {begin, begin + base + (ithr < extra ? 1 : 0)};
}

thread_pool::thread_pool(int size) : size_(1) {
  if (size < 1 || size > kMaxThreads) {
    throw error(status::invalid_arguments, "thread pool size " + std::to_string(size) +
                                               " is outside [1, " + std::to_string(kMaxThreads) +
                                               "]");
  }
  lock_guard g(region_mu_);
  start_workers(size - 1);
  size_.store(size, std::memory_order_relaxed);
}

thread_pool::~thread_pool() {
  stopping_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1u << kNthrBits, std::memory_order_seq_cst);
  futex_wake(generation_, INT_MAX);
  lock_guard g(region_mu_);
  for (auto& t : workers_) t.join();
}

void thread_pool::start_workers(int count) {
  while (static_cast<int>(workers_.size()) < count) {
    const int ithr = static_cast<int>(workers_.size()) + 1;
    // The word as of now (stable: no region runs while region_mu_ is held).
    // Read here, not in the new thread, which may start after the next
    // region is published and would then take it for one already seen.
    const std::uint32_t seen = generation_.load(std::memory_order_relaxed);
    workers_.emplace_back([this, ithr, seen] { worker_main(ithr, seen); });
  }
}

void thread_pool::resize(int size) {
  if (size < 1 || size > kMaxThreads) {
    throw error(status::invalid_arguments, "thread pool size " + std::to_string(size) +
                                               " is outside [1, " + std::to_string(kMaxThreads) +
                                               "]");
  }
  lock_guard g(region_mu_);
  start_workers(size - 1);
  size_.store(size, std::memory_order_relaxed);
}

bool thread_pool::in_parallel_region() noexcept {
  return tl_in_region;
}

void thread_pool::run_one(int ithr, int nthr) noexcept {
  try {
    body_(ithr, nthr);
  } catch (...) {
    if (!has_error_.exchange(true, std::memory_order_acq_rel)) {
      first_error_ = std::current_exception();
    }
  }
}

void thread_pool::worker_main(int ithr, std::uint32_t seen) noexcept {
  tl_in_region = true;
  for (;;) {
    std::uint32_t word = generation_.load(std::memory_order_acquire);
    for (int spin = 0; word == seen && spin < kSpinIterations; ++spin) {
      cpu_relax();
      word = generation_.load(std::memory_order_acquire);
    }
    while (word == seen) {
      // Dekker with parallel_for: we announce sleeping, then re-check the
      // word inside wait(); the caller stores the word, then reads
      // sleeping_workers_. seq_cst on all four makes one of us see the other.
      sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
      futex_wait(generation_, seen);
      sleeping_workers_.fetch_sub(1, std::memory_order_seq_cst);
      word = generation_.load(std::memory_order_acquire);
    }
    seen = word;
    if (stopping_.load(std::memory_order_acquire)) return;
    const int nthr = static_cast<int>(word & kNthrMask);
    if (ithr >= nthr) continue;
    run_one(ithr, nthr);
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        caller_sleeping_.load(std::memory_order_seq_cst)) {
      futex_wake(pending_, 1);
    }
  }
}

void thread_pool::parallel_for(int nthr, parallel_body f) {
  nthr = std::clamp(nthr, 1, size());
  if (nthr == 1 || tl_in_region) {
    // Nested or single-threaded: every share inline, in order.
    for (int ithr = 0; ithr < nthr; ++ithr) f(ithr, nthr);
    return;
  }
  lock_guard g(region_mu_);
  nthr = std::min(nthr, static_cast<int>(workers_.size()) + 1);
  body_ = f;
  first_error_ = nullptr;
  has_error_.store(false, std::memory_order_relaxed);
  pending_.store(static_cast<std::uint32_t>(nthr - 1), std::memory_order_relaxed);
  const std::uint32_t next = ((generation_.load(std::memory_order_relaxed) >> kNthrBits) + 1)
                             << kNthrBits;
  generation_.store(next | static_cast<std::uint32_t>(nthr), std::memory_order_seq_cst);
  if (sleeping_workers_.load(std::memory_order_seq_cst) > 0) futex_wake(generation_, INT_MAX);

  {
    region_flag in_region;
    run_one(0, nthr);
  }

  std::uint32_t left = pending_.load(std::memory_order_acquire);
  for (int spin = 0; left != 0 && spin < kSpinIterations * 8; ++spin) {
    cpu_relax();
    left = pending_.load(std::memory_order_acquire);
  }
  while (left != 0) {
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    futex_wait(pending_, left);
    caller_sleeping_.store(false, std::memory_order_seq_cst);
    left = pending_.load(std::memory_order_acquire);
  }
  if (has_error_.load(std::memory_order_acquire)) {
    std::exception_ptr e = std::exchange(first_error_, nullptr);
    std::rethrow_exception(e);
  }
}

namespace {

int initial_num_threads() {
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(env_int("PRIMCACHE_NUM_THREADS", cores, 1, kMaxThreads));
}

thread_pool& pool_instance() {
  // Never destroyed: kernels may run from static destructors of user code,
  // and idle workers sleeping on a futex cost nothing at exit.
  static thread_pool* pool = new thread_pool(initial_num_threads());
  return *pool;
}

}  // namespace

thread_pool& default_thread_pool() {
  return pool_instance();
}

void set_num_threads(int n) {
  pool_instance().resize(n);
}

int get_num_threads() {
  return pool_instance().size();
}

}  // namespace primcache
