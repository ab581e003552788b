// primcache/runtime/thread_pool.hpp — the runtime's own thread pool.
//
// CPU kernels split their work with parallel_for(nthr, f): f(ithr, nthr) runs
// once for each ithr in [0, nthr), ithr 0 on the calling thread and the rest
// on the pool's workers; the call returns when all have finished. OpenMP is
// not used, so the pool's size is the runtime's alone.
//
//   primcache::thread_pool& pool = primcache::default_thread_pool();
//   pool.parallel_for(pool.size(), [&](int ithr, int nthr) {
//     auto [begin, end] = primcache::balance(n, ithr, nthr);
//     for (std::int64_t i = begin; i < end; ++i) y[i] = 2 * x[i];
//   });
//
// Contract:
// - A call from inside a parallel region (a worker, or a caller while it
//   runs one of its shares) runs every ithr inline on that thread: nested
//   parallelism never deadlocks and never oversubscribes.
// - Calls from several outside threads at once share the pool: each region
//   is published in a slot of its own, its shares (ithr values) are claimed
//   one at a time by any idle worker and by the region's own caller, which
//   claims shares of its region until none is left and then waits for those
//   that others run. So which thread runs a share is not fixed (the caller
//   usually runs ithr 0; it may run them all when the workers are busy with
//   other callers' regions); kernels must make results depend only on ithr,
//   never on the thread. The pool offers size() threads in all: while as
//   many outside callers (or more) are inside parallel_for, a region runs
//   all its shares on its caller, as it does when more than 64 regions run
//   at once, and for a short while (100 us) after callers last did: two
//   callers alternating small regions with work of their own keep running
//   their regions themselves instead of waking a worker between them.
// - nthr is clamped to [1, size()]. If f throws, the first exception of a
//   region is rethrown to that region's caller after every ithr of it has
//   finished; other regions are not affected.
// - Workers spin briefly after a region (so back-to-back regions of one
//   kernel start fast), then sleep on a futex (Linux). A region allocates
//   nothing.
//
// The default pool's size comes from set_num_threads(), else
// PRIMCACHE_NUM_THREADS, else the CPUs this process may use: the CPUs in its
// affinity mask (sched_getaffinity), capped by its cgroup's CPU quota (v2
// cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, rounded up). It is
// created on first use. fork(): the child has none of the parent's threads,
// so the default pool is replaced in the child (same size) on its first use
// there; a pool a user constructed must not be used in a child. A fork waits
// until every pool's workers are past their thread's start-up, so that none
// of them holds an allocator lock the child would inherit.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/base/thread_startup.hpp"

namespace primcache {

// A non-owning reference to a callable taking (ithr, nthr): no allocation
// per region. The callable must outlive the parallel_for call.
class parallel_body {
 public:
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, parallel_body>)
  parallel_body(F&& f) noexcept  // NOLINT: implicit by design
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, int ithr, int nthr) {
          (*static_cast<std::remove_reference_t<F>*>(o))(ithr, nthr);
        }) {}
  void operator()(int ithr, int nthr) const { call_(object_, ithr, nthr); }

 private:
  void* object_;
  void (*call_)(void*, int, int);
};

// The [begin, end) share of n items for thread ithr of nthr, balanced so that
// shares differ by at most one item.
struct range {
  std::int64_t begin;
  std::int64_t end;
};
PRIMCACHE_API range balance(std::int64_t n, int ithr, int nthr) noexcept;

class PRIMCACHE_API thread_pool {
 public:
  // A pool of `size` threads in all (>= 1): the caller plus size - 1 workers.
  explicit thread_pool(int size);
  ~thread_pool();  // joins the workers; no region may be running
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int size() const noexcept { return size_.load(std::memory_order_relaxed); }
  // Changes the size for regions started afterwards (>= 1); running regions
  // are not affected. Starts workers as needed (never stops any).
  void resize(int size) PRIMCACHE_EXCLUDES(workers_mu_);
  void parallel_for(int nthr, parallel_body f);

  // True on a pool worker and on a caller while it runs a region.
  static bool in_parallel_region() noexcept;

 private:
  // One published region. The slot belongs to the pool, so a worker that
  // looks at it late touches pool memory, never a finished caller's stack.
  struct alignas(64) region_slot {
    // (sequence << 32) | (nthr << 16) | next unclaimed ithr. A share is
    // claimed by a CAS on this word; a worker holding a stale word (an
    // earlier region of the slot) fails the CAS, since the sequence moved.
    std::atomic<std::uint64_t> claim{0};
    // Shares not yet finished; the caller sleeps on it (futex) when waiting.
    std::atomic<std::uint32_t> pending{0};
    std::atomic<bool> caller_sleeping{false};
    std::atomic<bool> has_error{false};
    parallel_body body{[](int, int) {}};
    std::exception_ptr first_error;  // written by the first failing share only
  };
  static constexpr int kRegionSlots = 64;

  void start_workers(int count) PRIMCACHE_REQUIRES(workers_mu_);
  void worker_main() noexcept;
  // fork() handlers for every live pool (thread_pool.cpp says why).
  static void fork_prepare() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  static void fork_parent() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  static void fork_child() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  // Claims and runs shares of slot `i` until none is left; false when it
  // found none to claim.
  bool run_shares(int i) noexcept;
  static void run_share(region_slot& r, int ithr, int nthr) noexcept;
  static void run_inline(int nthr, parallel_body f);

  std::atomic<int> size_;
  std::atomic<int> active_callers_{0};  // outside callers inside parallel_for
  // When outside callers last filled the pool (steady_clock ticks). Regions
  // starting shortly after run on their callers too: callers that alternate
  // between a short region and a little work of their own are inside
  // parallel_for together only part of the time, and waking a worker for
  // the moments between would oversubscribe the cores they share.
  std::atomic<std::int64_t> saturated_at_{INT64_MIN / 2};
  mutex workers_mu_;
  std::vector<std::thread> workers_ PRIMCACHE_GUARDED_BY(workers_mu_);
  // Workers that have entered worker_main, past their thread's start-up.
  thread_startups startups_;
  // Bit i: slot i is owned by a caller (its region runs or is being set up).
  alignas(64) std::atomic<std::uint64_t> used_slots_{0};
  // Bit i: slot i's region may still have unclaimed shares. Set by the
  // caller when it publishes; cleared by whoever claims the last share.
  alignas(64) std::atomic<std::uint64_t> open_slots_{0};
  // Bumped on every publication; workers sleep on it (futex).
  alignas(64) std::atomic<std::uint32_t> generation_{0};
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> stopping_{false};
  std::unique_ptr<region_slot[]> slots_;
};

namespace runtime_internal {

// The pieces of the default thread count, exposed for tests.
// CPUs in this process's affinity mask (sched_getaffinity); >= 1.
PRIMCACHE_API int affinity_cpu_count() noexcept;
// The CPU quota of the cgroup whose hierarchy is mounted at `cgroup_root`
// (normally /sys/fs/cgroup), for the process whose /proc/self/cgroup reads
// `proc_self_cgroup`: the smallest of ceil(quota / period) over the
// process's cgroup and its ancestors (v2 cpu.max; v1 cpu.cfs_quota_us and
// cpu.cfs_period_us under cpu/ or cpu,cpuacct/), or 0 when none is set.
// Unreadable or malformed files count as "no quota".
PRIMCACHE_API int cgroup_cpu_limit(const std::string& cgroup_root,
                                   const std::string& proc_self_cgroup);
// The default pool's initial size: PRIMCACHE_NUM_THREADS if set and valid,
// else affinity_cpu_count() capped by the cgroup quota of this process.
PRIMCACHE_API int initial_num_threads();

}  // namespace runtime_internal

// The process-wide pool the CPU backend runs on.
PRIMCACHE_API thread_pool& default_thread_pool();
// Sets the size of the default pool (>= 1; throws primcache::error
// otherwise). Takes effect for regions started afterwards (the pool grows;
// workers beyond the size stay idle). The API wins over PRIMCACHE_NUM_THREADS.
PRIMCACHE_API void set_num_threads(int n);
PRIMCACHE_API int get_num_threads();

}  // namespace primcache
