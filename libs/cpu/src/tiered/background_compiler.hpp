// tiered/background_compiler.hpp — the small pool that compiles specialized
// kernels for tiered primitives, and the jobs it runs.
//
// A tiered impl submits one job: the compilation of its specialized kernel
// and its installation. The pool runs jobs in submission order on at most
// PRIMCACHE_JIT_THREADS threads (default 1) at low scheduling priority (nice
// 10), started on first use, so that a 2-core machine keeps a core for the
// caller. A job whose impl died before it started installs nothing (the job
// checks through a weak reference); wait() runs a job still queued on the
// caller's thread instead of waiting for the pool to reach it.
//
//   auto job = background_job::make([weak] { ... compile, install ... });
//   if (!background_compiler::instance().submit(job)) compile_now();  // exiting
//   job->wait();                                                      // done, either way
//
// fork(): the pool's pthread_atfork handlers wait for the compilation
// running on a pool thread (the fork waits for at most one compilation) and
// for any of its threads still starting up, and
// hold the pool's locks across the fork, so no pool thread holds a lock of
// LLVM, of the JIT or of the C library when the child starts; in the child
// the pool has no threads (the parent's are abandoned, never joined), its
// condition variables are made anew (the parent's waiters are gone), and it
// starts new threads on the next submit; queued jobs stay queued. (A job a waiter was running on
// another thread of the parent stays unfinished in the child.)
//
// At exit (first of all, from a guard in the main thread's thread_local
// storage: background_compiler.cpp says why), the pool stops: queued jobs
// are dropped (their waiters return), running ones finish, the threads are
// joined; later submits are refused, and their callers compile
// synchronously. The control gauge
// primcache_jit_pending_compilations counts jobs queued or running.
//
// Thread-safety: every member may be called from any thread. Exceptions:
// submit may throw std::bad_alloc and std::system_error (no thread); a job's
// work must not throw (what it throws is swallowed: the job counts as done).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "primcache/base/thread_annotations.hpp"
#include "primcache/base/thread_startup.hpp"
#include "primcache/control/metric.hpp"

namespace primcache::cpu_internal {

class background_job {
 public:
  static std::shared_ptr<background_job> make(std::function<void()> work) {
    return std::shared_ptr<background_job>(new background_job(std::move(work)));
  }

  // Runs the work unless it has started (or was dropped) already; true when
  // this call ran it.
  bool run();
  // Returns once the work has run (here if it is still queued) or was
  // dropped at exit.
  void wait();
  // Marks the job done without running it (the pool stopping).
  void drop();
  bool done() const noexcept { return state_.load(std::memory_order_acquire) == k_done; }

 private:
  explicit background_job(std::function<void()> work) : work_(std::move(work)) {}
  void finish();

  static constexpr int k_queued = 0, k_running = 1, k_done = 2;
  std::atomic<int> state_{k_queued};
  std::function<void()> work_;  // read only by the one thread that moves state_ to running
  mutex mu_;
  std::condition_variable_any cv_;
};

class background_compiler {
 public:
  static background_compiler& instance();

  // Queues the job; false when the pool has stopped (the process is exiting).
  bool submit(std::shared_ptr<background_job> job);
  // Jobs queued or running.
  int pending() const noexcept { return pending_.load(std::memory_order_relaxed); }
  int threads() const noexcept { return max_threads_; }
  // Stops the pool: drops what is queued, lets running jobs finish, joins
  // the threads. Idempotent; called at exit.
  void stop();

  // Times the pool's stop was registered with std::atexit (after submits,
  // compilations, and every few ms while one runs), which stops at
  // k_max_stop_registrations (background_compiler.cpp says why).
  static constexpr int k_max_stop_registrations = 4096;
  static int stop_registrations() noexcept;

  // pthread_atfork handlers (registered on first use).
  void fork_prepare() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  void fork_parent() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  void fork_child() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;

 private:
  background_compiler();
  void work();
  // The registrar thread: while a job runs, registers the stop with
  // std::atexit every k_register_every (background_compiler.cpp says why).
  void register_stops();
  void pending_add(int d) noexcept;

  const int max_threads_;
  // Held by a pool thread while it runs a job, and by fork_prepare until the
  // fork is done (taken before mu_ when both are).
  mutex run_mu_;
  mutex mu_;
  // Made anew in a fork child (fork_child says why).
  std::unique_ptr<std::condition_variable_any> wake_ =
      std::make_unique<std::condition_variable_any>();
  std::deque<std::shared_ptr<background_job>> queue_ PRIMCACHE_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ PRIMCACHE_GUARDED_BY(mu_);
  bool stopping_ PRIMCACHE_GUARDED_BY(mu_) = false;
  int running_ PRIMCACHE_GUARDED_BY(mu_) = 0;  // jobs the threads are running
  std::thread registrar_ PRIMCACHE_GUARDED_BY(mu_);
  std::unique_ptr<std::condition_variable_any> registrar_wake_ =
      std::make_unique<std::condition_variable_any>();
  // The pool threads and the registrar past their start-up: fork_prepare
  // waits for the others (thread_startup.hpp says why).
  thread_startups startups_;
  std::atomic<int> pending_{0};
  metric_gauge gauge_;
};

}  // namespace primcache::cpu_internal
