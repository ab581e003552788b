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
//   if (!background_compiler::instance().submit(job)) compile_now();  // exiting, or no thread
//   job->wait();                                                      // done, either way
//
// fork(): the pool's pthread_atfork handlers wait for the compilations in
// progress — the one a pool thread is running, and those other threads run
// in wait() or complete() — and for any of the pool's threads still
// starting up, and hold the pool's locks across the fork, so no thread of
// the pool holds a lock of LLVM, of the JIT or of the C library when the
// child starts. (A run another thread begins while the fork is prepared is
// not waited for: that thread may hold what a later prepare handler waits
// for, the persistent cache's writer its write lock; the child runs such a
// job again, as if it was still queued.) In the child the pool's threads do
// not exist (the parent's are abandoned, never joined), its condition
// variables are made anew (the parent's waiters are gone), the jobs the
// parent's threads held — taken from the queue but not begun, or running
// on a thread that is not in the child — go back to the head of the queue,
// the counts are those of the child's queue, and if anything is queued the
// pool starts its threads at once, so the child gets its specialized code
// without asking; otherwise they start on the next submit.
//
// At exit (first of all, from a guard in the main thread's thread_local
// storage: background_compiler.cpp says why), the pool stops: queued jobs
// are dropped (their wait() returns), running ones finish — on the pool's
// threads and on any other — and the threads are joined; later submits are
// refused, and their callers compile synchronously. A dropped job still
// runs for complete() on the caller's thread while the main thread's exit
// waits, before it destroys anything: the persistent cache's writer, whose
// exit flush comes later, serializes (complete()) what it holds then, so a
// short-lived process stores every kernel it created. When the stop dropped
// jobs, that exit waits while the writer has writes waiting (or a thread
// compiles a job), at most k_exit_compile_budget; a process without a
// persistent cache waits for nothing. Later (exit() called from another
// thread, or past the budget) a dropped job stays dropped. The control
// gauge primcache_jit_pending_compilations counts jobs queued or running;
// the counter primcache_jit_specialization_failures_total the
// specializations that failed (count_failure()).
//
// Thread-safety: every member may be called from any thread. A job's work
// may run a second time in a fork child, when the fork cut its run short on
// another thread: it must find what that run installed and keep it.
// Exceptions: submit may throw std::bad_alloc (a thread that cannot start
// makes it return false); a job's work must not throw (what it throws is
// swallowed: the job counts as done).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "primcache/base/thread_annotations.hpp"
#include "primcache/base/thread_startup.hpp"
#include "primcache/control/metric.hpp"

namespace primcache::cpu_internal {

class background_job : public std::enable_shared_from_this<background_job> {
 public:
  static std::shared_ptr<background_job> make(std::function<void()> work) {
    return std::shared_ptr<background_job>(new background_job(std::move(work)));
  }

  // Runs the work unless it has started, or was dropped, already; true when
  // this call ran it. (The pool's threads.)
  bool run();
  // Returns once the work has run (here if it is still queued) or was
  // dropped at exit.
  void wait();
  // As wait(), but a job dropped at exit runs here too, while the main
  // thread's exit waits for it (see above).
  void complete();
  // Marks a queued job dropped (the pool stopping): its wait() returns; its
  // work stays, for complete().
  void drop();
  bool done() const noexcept { return state_.load(std::memory_order_acquire) == k_done; }

 private:
  friend class background_compiler;
  explicit background_job(std::function<void()> work) : work_(std::move(work)) {}
  // Moves the job from state `from` (queued or dropped) to running; true
  // when this call did.
  bool claim(int from) noexcept;
  // Runs the claimed work, then marks the job done.
  void execute();
  void finish();
  void notify_waiters();
  // Waits until the state is done or dropped.
  void wait_for_end();
  // In a fork child, for a job whose runner is not there: queued again,
  // with a mutex and a condition variable of its own (the runner may have
  // held the one, the parent's waiters counted on the other).
  void reset_in_child() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;

  static constexpr int k_queued = 0, k_running = 1, k_done = 2, k_dropped = 3;
  std::atomic<int> state_{k_queued};
  std::function<void()> work_;  // read only by the one thread that moves state_ to running
  mutex mu_;
  std::unique_ptr<std::condition_variable_any> cv_ =
      std::make_unique<std::condition_variable_any>();
};

class background_compiler {
 public:
  static background_compiler& instance();

  // Queues the job; false when the pool has stopped (the process is
  // exiting) or a thread it needs cannot start: the job is then neither
  // queued nor counted, and the caller compiles synchronously.
  bool submit(std::shared_ptr<background_job> job);
  // Jobs queued or running.
  int pending() const noexcept { return pending_.load(std::memory_order_relaxed); }
  int threads() const noexcept { return max_threads_; }
  // Stops the pool: drops what is queued, lets running jobs finish (on any
  // thread but the caller's), joins the threads; no dropped job runs after
  // it. Idempotent; called at exit.
  void stop();
  // The same, from the main thread's exit, first: before it closes, a
  // dropped job still runs for complete() (see above).
  void stop_at_main_thread_exit();
  // A specialized compilation failed (primcache_jit_specialization_failures_total).
  void count_failure() noexcept { failures_.add(); }

  // How long the main thread's exit waits, at most, for the persistent
  // cache's writer to serialize what it holds: as long as that writer
  // flushes at exit (libs/runtime, kExitFlushLimit).
  static constexpr auto k_exit_compile_budget = std::chrono::seconds(10);

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
  friend class background_job;
  background_compiler();
  void work();
  // The registrar thread: while a job runs, registers the stop with
  // std::atexit every k_register_every (background_compiler.cpp says why).
  void register_stops();
  void pending_add(int d) noexcept;
  // Stops the pool (stop() less the close); true when it dropped jobs.
  bool stop_pool();
  void close_exit_compilations();
  // Starts a pool thread if the queue (with `extra` more jobs) needs one,
  // and the registrar; false when a needed thread cannot start.
  bool start_threads_locked(int extra) PRIMCACHE_REQUIRES(mu_);
  // Runs `job` on the calling thread if it is in state `from` (wait(),
  // complete()); counted in outside_ (the stop at exit waits for it) and
  // listed in outside_jobs_ (a fork waits for it, a fork child requeues it).
  bool run_here(background_job& job, int from);

  const int max_threads_;
  // Held by a pool thread while it runs a job, and by fork_prepare until the
  // fork is done (taken before mu_ when both are).
  mutex run_mu_;
  mutex mu_;
  // Made anew in a fork child (fork_child says why).
  std::unique_ptr<std::condition_variable_any> wake_ =
      std::make_unique<std::condition_variable_any>();
  std::deque<std::shared_ptr<background_job>> queue_ PRIMCACHE_GUARDED_BY(mu_);
  // Jobs a pool thread took from the queue and has not begun (it waits for
  // run_mu_): requeued in a fork child.
  std::vector<std::shared_ptr<background_job>> popped_ PRIMCACHE_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ PRIMCACHE_GUARDED_BY(mu_);
  bool stopping_ PRIMCACHE_GUARDED_BY(mu_) = false;
  int running_ PRIMCACHE_GUARDED_BY(mu_) = 0;  // jobs the threads are running
  std::thread registrar_ PRIMCACHE_GUARDED_BY(mu_);
  std::unique_ptr<std::condition_variable_any> registrar_wake_ =
      std::make_unique<std::condition_variable_any>();
  // The pool threads and the registrar past their start-up: fork_prepare
  // waits for the others (thread_startup.hpp says why).
  thread_startups startups_;
  // Runs on threads outside the pool (run_here): how many, and which jobs
  // (a slot each; a run that finds none free is not listed, and a fork
  // neither waits for it nor requeues it).
  static constexpr int k_outside_slots = 64;
  std::atomic<int> outside_{0};
  std::atomic<background_job*> outside_jobs_[k_outside_slots] = {};
  // Whether dropped jobs may no longer run (set by the first stop).
  // Sequentially consistent with outside_ (run_here).
  std::atomic<bool> exit_closed_{false};
  std::atomic<int> pending_{0};
  metric_gauge gauge_;
  metric_counter failures_;
};

}  // namespace primcache::cpu_internal
