#include "tiered/background_compiler.hpp"

#include <cstdlib>

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <system_error>
#include <thread>
#include <utility>

#include "jit/process_jit.hpp"
#include "primcache/base/env.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/runtime/persistent_cache.hpp"

namespace primcache::cpu_internal {

namespace {

// Off-pool runs (run_here) on this thread that have not ended: stop()
// called on such a thread (exit() from inside a compilation) and a fork
// made from one do not wait for themselves.
thread_local int t_outside_runs = 0;
// The job this thread runs in run_here, innermost; null when none.
thread_local background_job* t_running_here = nullptr;

void pause_briefly() noexcept {
  std::this_thread::sleep_for(std::chrono::microseconds(100));
}

// Whether the persistent cache's writer has writes queued or in progress.
bool persistent_writes_waiting() noexcept {
  try {
    return get_persistent_cache_stats().queue_depth > 0;
  } catch (...) {
    return false;
  }
}

}  // namespace

bool background_job::run() {
  if (!claim(k_queued)) return false;
  execute();
  return true;
}

bool background_job::claim(int from) noexcept {
  int expected = from;
  return state_.compare_exchange_strong(expected, k_running, std::memory_order_acq_rel);
}

void background_job::execute() {
  try {
    if (work_) work_();
  } catch (...) {  // the work reports its own failures; nothing escapes a pool thread
  }
  work_ = nullptr;  // what it captured goes now, not with the last reference
  finish();
}

void background_job::drop() {
  int expected = k_queued;
  // The work stays: complete() may still run it (serialize() at exit).
  if (state_.compare_exchange_strong(expected, k_dropped, std::memory_order_acq_rel)) {
    notify_waiters();
  }
}

void background_job::finish() {
  {
    lock_guard guard(mu_);
    state_.store(k_done, std::memory_order_release);
  }
  cv_->notify_all();
}

void background_job::notify_waiters() {
  { lock_guard guard(mu_); }  // a waiter between its check and its wait waits now
  cv_->notify_all();
}

void background_job::wait_for_end() {
  lock_guard guard(mu_);
  // The state changes to done under mu_, to dropped before notify_waiters
  // takes mu_: no notification is missed.
  cv_->wait(mu_, [&] {
    const int s = state_.load(std::memory_order_acquire);
    return s == k_done || s == k_dropped;
  });
}

void background_job::wait() {
  if (done() || background_compiler::instance().run_here(*this, k_queued)) return;
  wait_for_end();
}

void background_job::complete() {
  if (done()) return;
  background_compiler& pool = background_compiler::instance();
  if (pool.run_here(*this, k_queued) || pool.run_here(*this, k_dropped)) return;
  wait_for_end();  // running elsewhere, or dropped once the exit went on
}

void background_job::reset_in_child() {
  static auto* abandoned = new std::vector<std::unique_ptr<std::condition_variable_any>>;
  abandoned->push_back(std::move(cv_));  // kept, never destroyed: see fork_child
  cv_ = std::make_unique<std::condition_variable_any>();
  new (&mu_) mutex;  // trivially destructible; its holder, if any, is not here
  state_.store(k_queued, std::memory_order_relaxed);
}

namespace {

// Stops the pool when static objects are destroyed: this guard is made on
// the pool's first use, after LLVM's namespace-scope statics (libLLVM is
// loaded and initialized before this library), so it is destroyed before
// them. The pool itself is never destroyed: impls in the never-destroyed
// primitive cache may submit during exit, and are refused.
struct stop_at_exit {
  ~stop_at_exit() { background_compiler::instance().stop(); }
};

// The guard alone is not enough: it is registered when the library loads,
// and exit() destroys everything registered later first — among it the
// function-local statics LLVM makes during its first compilations (in a
// shared build the guard even runs only from _dl_fini). A compilation still
// running then used destroyed LLVM state and crashed the exiting process
// (an autotune test: 8 exits out of 8). So the pool registers its stop with
// std::atexit again after each submit and each compilation: exit runs that
// before the statics made so far. That left a compilation that makes a
// static for the first time after the last registration and is still
// running when the process exits (cpu_onednn_test's convolution case
// crashed at exit 2 runs in 16, its matmul case 1 in 10: the process's first
// convolution compiled in the background while exit destroyed what it had
// just made). So while a job runs, a registrar thread registers the stop
// again every k_register_every: exit then runs a stop (which waits for the
// compilation) before every static made more than that long before it
// began. What remains open is a static first made within that interval of
// the exit. At most 1 / k_register_every registrations per second of
// compilation, none while the pool is idle.
//
// Each registration holds a slot of glibc's exit list (32 bytes) for the
// life of the process, and exit runs every one: a service that compiles new
// shapes for hours would grow that list without end. LLVM makes its statics
// on first use, early in a process's compilations, so after
// k_max_stop_registrations registrations (4096: 128 KiB, at least 8 s of
// compilation) the stop is not registered again.
void stop_pool_at_exit() {
  background_compiler::instance().stop();
}

constexpr auto k_register_every = std::chrono::milliseconds(2);

std::atomic<int> g_stop_registrations{0};

void register_stop_at_exit() {
  int n = g_stop_registrations.load(std::memory_order_relaxed);
  while (n < background_compiler::k_max_stop_registrations) {
    if (g_stop_registrations.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) {
      (void)std::atexit(stop_pool_at_exit);
      return;
    }
  }
}

background_compiler* g_pool = nullptr;

// exit() runs the exiting thread's thread_local destructors before any
// std::atexit handler or static destructor (glibc's __run_exit_handlers
// calls __call_tls_dtors first), so a guard in the main thread's storage
// stops the pool — and waits for the running compilation — before exit
// destroys a single LLVM static, however recently the compilation made it.
// The registrations above still cover exit() called from another thread.
// Without this, a short-lived process whose first compilation was still
// running at exit died in LLVM's DAG combiner ("LLVM ERROR: Invalid size
// request on a scalable vector", or a segfault) about once in 100 runs
// (cpu_tiered_concurrency: "processes exiting during their first
// compilation exit cleanly").
struct stop_at_main_thread_exit {
  ~stop_at_main_thread_exit() {
    if (g_pool != nullptr) g_pool->stop_at_main_thread_exit();
  }
};

bool on_main_thread() noexcept {
  return static_cast<pid_t>(syscall(SYS_gettid)) == ::getpid();
}

// Plants the guard in the calling thread's storage if it is the main
// thread. (A guard planted in a thread that is not the process's main
// thread would stop the pool when that thread ends.)
void guard_main_thread_exit() noexcept {
  if (!on_main_thread()) return;
  thread_local stop_at_main_thread_exit guard;
  (void)&guard;
}

}  // namespace

int background_compiler::stop_registrations() noexcept {
  return g_stop_registrations.load(std::memory_order_relaxed);
}

namespace {

void on_fork_prepare() {
  if (g_pool != nullptr) g_pool->fork_prepare();
}
void on_fork_parent() {
  if (g_pool != nullptr) g_pool->fork_parent();
}
void on_fork_child() {
  if (g_pool != nullptr) g_pool->fork_child();
}

}  // namespace

background_compiler& background_compiler::instance() {
  static background_compiler* pool = [] {
    auto* made = new background_compiler;
    g_pool = made;
    // The JIT's fork handlers first, so that this pool's prepare handler
    // runs before theirs (glibc runs prepare handlers in the reverse order
    // of registration): it waits for compilations that may take the locks
    // theirs hold across the fork.
    register_jit_fork_handlers();
    ::pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
    return made;
  }();
  static stop_at_exit guard;
  return *pool;
}

namespace {
// The pool (no thread yet) and its gauge exist from the backend's load on:
// the gauge reads 0 before the first tiered creation instead of missing.
[[maybe_unused]] const bool k_pool_made =
    (background_compiler::instance(), guard_main_thread_exit(), true);
}  // namespace

void background_compiler::fork_prepare() {
  run_mu_.lock();  // waits for the compilation a pool thread is running
  // And for those other threads began before now (wait(), complete()):
  // without a lock, since their threads may hold what a prepare handler
  // that runs after this one waits for (the persistent cache's writer its
  // write lock); a run that begins meanwhile is requeued in the child.
  // Slots are compared, never followed: a job may be gone once its slot
  // is cleared. Not this thread's own run (a job's work that forks).
  background_job* begun[k_outside_slots];
  for (int i = 0; i < k_outside_slots; ++i) {
    begun[i] = outside_jobs_[i].load(std::memory_order_seq_cst);
  }
  for (int i = 0; i < k_outside_slots; ++i) {
    if (begun[i] == nullptr || begun[i] == t_running_here) continue;
    while (outside_jobs_[i].load(std::memory_order_seq_cst) == begun[i]) pause_briefly();
  }
  mu_.lock();
  // Threads start under mu_, so none starts now; one started just before
  // (the first submit) may still be allocating its start-up under the
  // allocator's locks, which AddressSanitizer's allocator does not take
  // around a fork: a child made then hung in its first allocation of that
  // size (CI, under AddressSanitizer: the child of the tiered fork case).
  startups_.wait_for(static_cast<int>(threads_.size()) + (registrar_.joinable() ? 1 : 0));
}

void background_compiler::fork_parent() {
  mu_.unlock();
  run_mu_.unlock();
}

void background_compiler::fork_child() {
  // The parent's threads do not exist here: their std::thread objects are
  // abandoned (destroying or joining them would fail).
  if (!threads_.empty()) new std::vector<std::thread>(std::move(threads_));
  threads_.clear();
  if (registrar_.joinable()) new std::thread(std::move(registrar_));
  registrar_ = std::thread();
  running_ = 0;  // fork_prepare waited for the running job
  startups_.reset();
  // What the parent's other threads held goes back to the head of the
  // queue: a job a pool thread had taken but not begun (it waited for
  // run_mu_), in its order, and before it a job another thread was running
  // in wait() or complete() (begun while the fork was prepared), which
  // starts again. A job still in the queue or done is left as it is.
  const auto held = [this](const background_job* j) PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
    for (const auto& q : queue_) {
      if (q.get() == j) return true;
    }
    return false;
  };
  for (auto it = popped_.rbegin(); it != popped_.rend(); ++it) {
    if ((*it)->state_.load(std::memory_order_relaxed) == background_job::k_queued) {
      queue_.push_front(std::move(*it));
    }
  }
  popped_.clear();
  for (auto& slot : outside_jobs_) {
    background_job* j = slot.load(std::memory_order_relaxed);
    if (j == t_running_here) continue;  // this thread's own run goes on here
    slot.store(nullptr, std::memory_order_relaxed);
    if (j == nullptr || j->state_.load(std::memory_order_relaxed) != background_job::k_running) {
      continue;
    }
    std::shared_ptr<background_job> owned = j->weak_from_this().lock();
    if (!owned) continue;
    j->reset_in_child();
    if (!held(j)) queue_.push_front(std::move(owned));
  }
  // The threads counted in outside_ are not here either (this one's run
  // goes on).
  outside_.store(t_outside_runs, std::memory_order_relaxed);
  pending_.store(static_cast<int>(queue_.size()), std::memory_order_relaxed);
  gauge_.set(static_cast<double>(queue_.size()));
  // The parent's pool threads were waiting on these condition variables,
  // and glibc's condition variable still counts them as waiters here: a
  // notification that must switch groups waits for them to leave, forever
  // (the child's second or third submit hung in pthread_cond_signal). Both
  // are made anew. The old ones are kept, never destroyed (destroying a
  // condition variable waits for its waiters too), in a list that stays
  // reachable, so LeakSanitizer does not count them: two small objects per
  // fork.
  static auto* abandoned = new std::vector<std::unique_ptr<std::condition_variable_any>>;
  abandoned->push_back(std::move(wake_));
  abandoned->push_back(std::move(registrar_wake_));
  wake_ = std::make_unique<std::condition_variable_any>();
  registrar_wake_ = std::make_unique<std::condition_variable_any>();
  // What is queued runs without the child asking: a child that creates no
  // new tiered primitive would otherwise run the generic code for ever. The
  // threads wait for mu_, released below. One that cannot start leaves the
  // queue to the next submit, and to wait().
  if (!queue_.empty() && !stopping_) (void)start_threads_locked(0);
  mu_.unlock();
  run_mu_.unlock();
}

background_compiler::background_compiler()
    : max_threads_(static_cast<int>(env_int("PRIMCACHE_JIT_THREADS", 1, 1, 64))),
      gauge_(control().gauge("primcache_jit_pending_compilations",
                             "Specialized kernels of tiered primitives queued or compiling")),
      failures_(control().counter(
          "primcache_jit_specialization_failures_total",
          "Specialized kernels of tiered primitives whose compilation failed (the primitive "
          "keeps its generic kernel)")) {}

void background_compiler::pending_add(int d) noexcept {
  pending_.fetch_add(d, std::memory_order_relaxed);
  gauge_.add(d);
}

bool background_compiler::start_threads_locked(int extra) {
  const int queued = static_cast<int>(queue_.size()) + extra;
  const int busy = pending_.load(std::memory_order_relaxed) + extra;
  // One more thread while below the cap and every thread is busy. A thread
  // that cannot start (std::system_error, EAGAIN: the process's or the
  // system's limit) fails this only when the pool has none to run the job,
  // or no registrar (the job's compilation would run unguarded at exit).
  try {
    if (static_cast<int>(threads_.size()) < max_threads_ && queued > 0 &&
        busy > static_cast<int>(threads_.size())) {
      threads_.emplace_back([this] { work(); });
    }
  } catch (const std::system_error&) {
    if (threads_.empty()) return false;
  }
  try {
    if (!registrar_.joinable()) registrar_ = std::thread([this] { register_stops(); });
  } catch (const std::system_error&) {
    return false;
  }
  return true;
}

bool background_compiler::submit(std::shared_ptr<background_job> job) {
  guard_main_thread_exit();  // when the library was loaded on another thread
  {
    lock_guard guard(mu_);
    if (stopping_) return false;
    // The threads first: a thread that cannot start leaves nothing queued
    // or counted, and the caller compiles synchronously.
    if (!start_threads_locked(1)) return false;
    queue_.push_back(std::move(job));
    pending_add(1);
    // Also after each submit: statics a running compilation made before now
    // are destroyed after this stop. Under mu_, so a fork on another thread
    // (fork_prepare takes mu_) never copies glibc's exit-list lock held.
    register_stop_at_exit();
  }
  wake_->notify_one();
  return true;
}

bool background_compiler::run_here(background_job& job, int from) {
  if (job.state_.load(std::memory_order_acquire) != from) return false;
  // Listed before the job is claimed, so that a fork that does not see the
  // run finds the job still queued, or requeues it (sequentially consistent
  // with fork_prepare's look at the slots).
  int slot = -1;
  for (int i = 0; i < k_outside_slots && slot < 0; ++i) {
    background_job* expected = nullptr;
    if (outside_jobs_[i].compare_exchange_strong(expected, &job, std::memory_order_seq_cst)) {
      slot = i;
    }
  }
  outside_.fetch_add(1, std::memory_order_seq_cst);
  // A dropped job runs only while the main thread's exit waits for it
  // (stop_at_main_thread_exit): counted first, then the close looked at,
  // both sequentially consistent, so either the exit sees this run and
  // waits for it, or this sees the close and runs nothing.
  const bool claimed =
      (from != background_job::k_dropped || !exit_closed_.load(std::memory_order_seq_cst)) &&
      job.claim(from);
  if (claimed) {
    if (from != background_job::k_dropped && mu_.try_lock()) {
      // Under mu_, as the pool's, so that a fork never copies glibc's
      // exit-list lock held; skipped when mu_ is busy (a fork may hold it),
      // which only leaves this compilation to the other registrations.
      register_stop_at_exit();
      mu_.unlock();
    }
    background_job* const outer = t_running_here;
    t_running_here = &job;
    ++t_outside_runs;
    job.execute();
    --t_outside_runs;
    t_running_here = outer;
  }
  outside_.fetch_sub(1, std::memory_order_seq_cst);
  if (slot >= 0) outside_jobs_[slot].store(nullptr, std::memory_order_seq_cst);
  return claimed;
}

void background_compiler::work() {
  startups_.mark_started();  // before anything that may wait for a fork
  // Low priority: the caller's thread, running generic code, comes first.
  // (On Linux a nice value is per thread.) Failure leaves the default.
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  for (;;) {
    std::shared_ptr<background_job> job;
    {
      lock_guard guard(mu_);
      wake_->wait(
          mu_, [&]() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      job = queue_.front();
      queue_.pop_front();
      popped_.push_back(job);  // until it begins: a fork child requeues it
    }
    {
      lock_guard running(run_mu_);
      {
        lock_guard guard(mu_);
        std::erase(popped_, job);
        ++running_;
      }
      registrar_wake_->notify_one();
      job->run();  // false when a waiter ran it already
      // What follows a job stays under run_mu_, so a fork (which waits for
      // run_mu_) never copies it half done: the job's release may free
      // memory, and std::atexit takes glibc's exit-list lock, which a child
      // would find held forever.
      job.reset();
      {
        lock_guard guard(mu_);
        --running_;
      }
      pending_add(-1);
      // Once per compilation; refused, harmlessly, once exit has begun.
      register_stop_at_exit();
    }
  }
}

void background_compiler::register_stops() {
  startups_.mark_started();
  lock_guard guard(mu_);
  for (;;) {
    registrar_wake_->wait(
        mu_, [&]() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || running_ > 0; });
    if (stopping_) return;
    // Under mu_: exit's handlers run without glibc's lock held, so a stop
    // running on the exiting thread waits here at most for this call.
    register_stop_at_exit();
    registrar_wake_->wait_for(mu_, k_register_every,
                              [&]() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { return stopping_; });
  }
}

void background_compiler::stop() {
  stop_pool();
  close_exit_compilations();
}

void background_compiler::stop_at_main_thread_exit() {
  const bool dropped = stop_pool();
  // Nothing has been destroyed yet (this runs before every std::atexit
  // handler and static destructor), so this is where a dropped job can
  // still compile: for the persistent cache's writer, which serializes
  // (complete()) the impls it holds and would otherwise find their jobs
  // dropped — its own exit flush comes later, among the std::atexit
  // handlers. When jobs were dropped, waits while the writer has writes
  // waiting or a thread compiles here, at most k_exit_compile_budget. A
  // process without a persistent cache, or whose writes are done, waits
  // for nothing.
  const auto start = std::chrono::steady_clock::now();
  while (dropped) {
    const bool active =
        outside_.load(std::memory_order_seq_cst) > t_outside_runs || persistent_writes_waiting();
    if (!active || std::chrono::steady_clock::now() - start >= k_exit_compile_budget) break;
    pause_briefly();
  }
  close_exit_compilations();
}

bool background_compiler::stop_pool() {
  std::deque<std::shared_ptr<background_job>> dropped;
  std::vector<std::thread> threads;
  std::thread registrar;
  {
    lock_guard guard(mu_);
    stopping_ = true;
    dropped.swap(queue_);
    threads.swap(threads_);
    registrar.swap(registrar_);
  }
  wake_->notify_all();
  registrar_wake_->notify_all();
  for (auto& job : dropped) {
    job->drop();
    pending_add(-1);
  }
  const bool dropped_any = !dropped.empty();
  for (auto& t : threads) {
    // exit() called on a pool thread (LLVM's fatal errors do) runs this
    // there: that thread cannot join itself.
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();
      continue;
    }
    t.join();
  }
  if (registrar.joinable()) {
    if (registrar.get_id() == std::this_thread::get_id()) {
      registrar.detach();
    } else {
      registrar.join();
    }
  }
  return dropped_any;
}

void background_compiler::close_exit_compilations() {
  // From here on exit destroys statics: no dropped job compiles any more
  // (run_here), and compilations on other threads — a waiter's, or one the
  // writer began above — end before exit goes on. (Not this thread's own,
  // when exit() was called from inside one.)
  exit_closed_.store(true, std::memory_order_seq_cst);
  while (outside_.load(std::memory_order_seq_cst) > t_outside_runs) pause_briefly();
}

}  // namespace primcache::cpu_internal
