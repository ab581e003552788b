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
// - A call from inside a parallel region (a worker, or the caller while it
//   runs ithr 0) runs every ithr inline on that thread: nested parallelism
//   never deadlocks and never oversubscribes.
// - Calls from several outside threads at once are serialized: one region
//   runs at a time, each with the whole pool.
// - nthr is clamped to [1, size()]. If f throws, the first exception is
//   rethrown to the caller after every ithr has finished.
// - Workers spin briefly after a region (so back-to-back regions of one
//   kernel start fast), then sleep on a futex (Linux).
//
// The default pool's size comes from set_num_threads(), else
// PRIMCACHE_NUM_THREADS, else the number of cores; it is created on first use.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/base/thread_annotations.hpp"

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
  // Changes the size for regions started afterwards (>= 1). Waits for a
  // running region to finish; starts workers as needed (never stops any).
  void resize(int size) PRIMCACHE_EXCLUDES(region_mu_);
  void parallel_for(int nthr, parallel_body f) PRIMCACHE_EXCLUDES(region_mu_);

  // True on a pool worker and on a caller while it runs a region.
  static bool in_parallel_region() noexcept;

 private:
  void start_workers(int count) PRIMCACHE_REQUIRES(region_mu_);
  void worker_main(int ithr, std::uint32_t seen) noexcept;
  void run_one(int ithr, int nthr) noexcept;

  std::atomic<int> size_;
  mutex region_mu_;  // one region at a time; the caller holds it throughout
  std::vector<std::thread> workers_ PRIMCACHE_GUARDED_BY(region_mu_);
  // The running region's body. Written by the caller before it publishes
  // the region (seq_cst store of generation_), read by workers with
  // ithr < nthr after they load that generation; the caller does not return
  // (or write it again) before those workers have decremented pending_.
  parallel_body body_{[](int, int) {}};
  std::exception_ptr first_error_;  // written by the first failing thread only
  std::atomic<bool> has_error_{false};
  // (region counter << 16) | nthr: a worker reads nthr from the same word
  // that told it a region started, so it never mixes two regions' fields.
  alignas(64) std::atomic<std::uint32_t> generation_{0};
  alignas(64) std::atomic<int> sleeping_workers_{0};
  alignas(64) std::atomic<std::uint32_t> pending_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stopping_{false};
};

// The process-wide pool the CPU backend runs on.
PRIMCACHE_API thread_pool& default_thread_pool();
// Sets the size of the default pool (>= 1; throws primcache::error
// otherwise). Takes effect for regions started afterwards; the previous pool
// is retired once idle. The API wins over PRIMCACHE_NUM_THREADS.
PRIMCACHE_API void set_num_threads(int n);
PRIMCACHE_API int get_num_threads();

}  // namespace primcache
