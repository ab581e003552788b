#include "tiered/background_compiler.hpp"

#include <cstdlib>

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <utility>

#include "primcache/base/env.hpp"
#include "primcache/control/registry.hpp"

namespace primcache::cpu_internal {

bool background_job::run() {
  int expected = k_queued;
  if (!state_.compare_exchange_strong(expected, k_running, std::memory_order_acq_rel)) {
    return false;
  }
  try {
    work_();
  } catch (...) {  // the work reports its own failures; nothing escapes a pool thread
  }
  work_ = nullptr;  // what it captured goes now, not with the last reference
  finish();
  return true;
}

void background_job::drop() {
  int expected = k_queued;
  if (state_.compare_exchange_strong(expected, k_running, std::memory_order_acq_rel)) {
    work_ = nullptr;
    finish();
  }
}

void background_job::finish() {
  {
    lock_guard guard(mu_);
    state_.store(k_done, std::memory_order_release);
  }
  cv_.notify_all();
}

void background_job::wait() {
  if (done() || run()) return;
  lock_guard guard(mu_);
  // The state changes to done under mu_, so no notification is missed.
  cv_.wait(mu_, [&] { return state_.load(std::memory_order_acquire) == k_done; });
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
    if (g_pool != nullptr) g_pool->stop();
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
  // abandoned (destroying or joining them would fail), and new threads start
  // on the next submit.
  if (!threads_.empty()) new std::vector<std::thread>(std::move(threads_));
  threads_.clear();
  if (registrar_.joinable()) new std::thread(std::move(registrar_));
  registrar_ = std::thread();
  running_ = 0;  // fork_prepare waited for the running job
  startups_.reset();
  pending_.store(static_cast<int>(queue_.size()), std::memory_order_relaxed);
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
  mu_.unlock();
  run_mu_.unlock();
}

background_compiler::background_compiler()
    : max_threads_(static_cast<int>(env_int("PRIMCACHE_JIT_THREADS", 1, 1, 64))),
      gauge_(control().gauge("primcache_jit_pending_compilations",
                             "Specialized kernels of tiered primitives queued or compiling")) {}

void background_compiler::pending_add(int d) noexcept {
  pending_.fetch_add(d, std::memory_order_relaxed);
  gauge_.add(d);
}

bool background_compiler::submit(std::shared_ptr<background_job> job) {
  guard_main_thread_exit();  // when the library was loaded on another thread
  {
    lock_guard guard(mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(job));
    pending_add(1);
    // One more thread while below the cap and every thread is busy.
    if (static_cast<int>(threads_.size()) < max_threads_ && static_cast<int>(queue_.size()) > 0 &&
        pending_.load(std::memory_order_relaxed) > static_cast<int>(threads_.size())) {
      threads_.emplace_back([this] { work(); });
    }
    if (!registrar_.joinable()) registrar_ = std::thread([this] { register_stops(); });
    // Also after each submit: statics a running compilation made before now
    // are destroyed after this stop. Under mu_, so a fork on another thread
    // (fork_prepare takes mu_) never copies glibc's exit-list lock held.
    register_stop_at_exit();
  }
  wake_->notify_one();
  return true;
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
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    {
      lock_guard running(run_mu_);
      {
        lock_guard guard(mu_);
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
}

}  // namespace primcache::cpu_internal
