// The background pool of tiered creation at the edges of a process's life:
// a fork with jobs queued, popped by a pool thread or running on a thread
// that waits for them; a pool thread that cannot start; and the exit of a
// short-lived process whose specializations the persistent cache's writer
// still needs.
//
// Not a *_concurrency binary: the cases fork (ThreadSanitizer refuses to
// start threads in the child of a multithreaded fork) or spawn this binary.
#include <catch2/catch.hpp>

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "primcache/control/registry.hpp"
#include "primcache/runtime/runtime.hpp"
#include "support/child_process.hpp"
#include "support/sanitizers.hpp"
#include "tiered/background_compiler.hpp"
#include "tiered_test_support.hpp"

using namespace primcache;
using cpu_internal::background_compiler;
using cpu_internal::background_job;

namespace {

// Waits (bounded) for the pool to drain.
bool pool_drains() {
  auto& pool = background_compiler::instance();
  for (int i = 0; i < 6000 && pool.pending() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pool.pending() == 0;
}

// A job that marks its start and then spins for `ms` (a compilation's
// stand-in), and marks its end.
struct timed_job {
  std::shared_ptr<std::atomic<bool>> started = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<bool>> ended = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<background_job> job;

  explicit timed_job(int ms) {
    job = background_job::make([s = started, e = ended, ms] {
      s->store(true);
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
      while (std::chrono::steady_clock::now() < until) {
      }
      e->store(true);
    });
  }
  void wait_started() const {
    while (!started->load()) std::this_thread::yield();
  }
};

// The control gauge of pending compilations, as a scrape reads it.
double pending_gauge() {
  for (const auto& m : control().list_metrics()) {
    if (m.name == "primcache_jit_pending_compilations" && !m.samples.empty()) {
      return m.samples[0].value;
    }
  }
  return -1;
}

// Polls `done` for at most `seconds`.
template <class Done>
bool within(int seconds, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Runs this binary's case `filter` in a fresh process with `extra`
// environment variables (the PRIMCACHE_ ones of this process left out), its
// output this one's; returns wait_child's status.
int spawn_self(const std::string& filter, const std::vector<std::string>& extra) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PRIMCACHE_", 10) != 0) env_strings.emplace_back(*e);
  }
  env_strings.insert(env_strings.end(), extra.begin(), extra.end());
  std::vector<char*> envp;
  for (auto& v : env_strings) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string f = filter;
  char* argv[] = {const_cast<char*>(self.c_str()), f.data(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  return primcache_test::wait_child(pid, 55);  // two fit in CTest's 120 s
}

}  // namespace

// The pool's threads run one job at a time. Here the fork waits for the
// job a pool thread is running, and a second pool thread, started by the
// next submit, takes the next job from the queue and waits for the fork
// too: before the fix that job was in no queue of the child, and the gauge
// still counted it while the pool's own count did not. The pool's size is
// read once per process: with one thread the case runs itself again in a
// process with PRIMCACHE_JIT_THREADS=2.
TEST_CASE("a child forked with a job popped by a pool thread runs it unasked",
          "[cpu][tiered][pool][fork]") {
  if (background_compiler::instance().threads() < 2) {
    const int status =
        spawn_self("a child forked with a job popped by a pool thread runs it unasked",
                   {"PRIMCACHE_JIT_THREADS=2"});
    CHECK(primcache_test::describe_child_status(status) == "exit status 0");
    return;
  }
  auto& pool = background_compiler::instance();
  REQUIRE(pool_drains());
  timed_job running(300);
  REQUIRE(pool.submit(running.job));
  running.wait_started();
  timed_job popped(1);
  int status = -1;
  // Forks from another thread, which waits in the pool's prepare handler
  // for the running job; meanwhile this thread submits, and a second pool
  // thread (when allowed) pops the job and waits for the fork too, behind
  // the forking thread.
  std::thread forking([&] {
    status = primcache_test::run_in_child(45, [&] {
      // Only looks: no wait, no submit.
      if (!within(15, [&] { return popped.job->done(); })) return 1;
      if (!within(15, [&] { return pool.pending() == 0; })) return 2;
      if (pending_gauge() != 0) return 3;
      return *popped.ended ? 0 : 4;
    });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(!running.ended->load());  // the fork is still waiting for it
  const bool submitted = pool.submit(popped.job);
  forking.join();
  REQUIRE(submitted);
  CHECK(primcache_test::describe_child_status(status) == "exit status 0");
  popped.job->wait();
  REQUIRE(pool_drains());
  CHECK(pending_gauge() == 0);
}

// Another thread runs a job in wait() (the pool was busy with another when
// it asked) when the process forks: before the fix the job stayed running
// in the child, where no thread runs it, and the child's wait() waited for
// ever.
TEST_CASE("a child forked while a thread runs a job in wait() finds it done",
          "[cpu][tiered][pool][fork]") {
  auto& pool = background_compiler::instance();
  REQUIRE(pool_drains());
  timed_job busy(50);
  REQUIRE(pool.submit(busy.job));
  busy.wait_started();
  timed_job waited(600);
  REQUIRE(pool.submit(waited.job));
  // Runs it here (the pool is busy), then stays until the child is done: a
  // thread that ends allocates (under AddressSanitizer, whose allocator's
  // locks a fork does not take).
  std::atomic<bool> release{false};
  std::thread waiter([&] {
    waited.job->wait();
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  waited.wait_started();
  busy.job->wait();
  REQUIRE(pool_drains());  // the pool is idle: only the waiter runs a job
  REQUIRE(!waited.ended->load());
  const int status = primcache_test::run_in_child(30, [&] {
    waited.job->wait();
    return waited.ended->load() ? 0 : 1;
  });
  release.store(true);
  waiter.join();
  CHECK(primcache_test::describe_child_status(status) == "exit status 0");
}

// A pool thread that cannot start (std::thread throws std::system_error,
// EAGAIN): the job is not queued nor counted, submit says no, and the
// caller compiles synchronously. The failure is made real: the child caps
// its address space so that no thread stack fits.
TEST_CASE("a pool thread that cannot start refuses the job instead of throwing",
          "[cpu][tiered][pool]") {
#if PRIMCACHE_TEST_TSAN || PRIMCACHE_TEST_ASAN
  WARN("skipped under the sanitizers (their address space cannot be capped)");
  return;
#endif
  auto& pool = background_compiler::instance();
  REQUIRE(pool_drains());
  const int status = primcache_test::run_in_child(60, [&pool] {
    // The child's pool has no thread (the parent's are not here).
    std::ifstream statm("/proc/self/statm");
    unsigned long pages = 0;
    statm >> pages;
    if (pages == 0) return 10;
    rlimit saved{};
    if (::getrlimit(RLIMIT_AS, &saved) != 0) return 11;
    rlimit capped = saved;
    capped.rlim_cur = pages * static_cast<unsigned long>(::sysconf(_SC_PAGESIZE)) + (2ul << 20);
    bool accepted = true;
    int code = 0;
    auto job = background_job::make([] {});
    if (::setrlimit(RLIMIT_AS, &capped) != 0) return 12;
    try {
      accepted = pool.submit(job);
    } catch (const std::system_error&) {
      code = 13;  // before the fix
    }
    ::setrlimit(RLIMIT_AS, &saved);
    if (code != 0) return code;
    if (accepted) return 14;  // a thread started after all: nothing shown
    if (pool.pending() != 0) return 15;
    if (pending_gauge() != 0) return 16;
    if (job->done()) return 17;
    // The next submit starts the thread.
    if (!pool.submit(job)) return 18;
    job->wait();
    return pool_drains() ? 0 : 19;
  });
  CHECK(primcache_test::describe_child_status(status) == "exit status 0");
}

TEST_CASE("failed specializations are a control counter next to the pending gauge",
          "[cpu][tiered][pool]") {
  (void)background_compiler::instance();
  bool found = false;
  for (const auto& m : control().list_metrics()) {
    if (m.name == "primcache_jit_specialization_failures_total") {
      found = m.kind == metric_kind::counter;
    }
  }
  CHECK(found);
}

namespace {

// A matmul of shape (40 + i) x 256 x 192.
matmul::primitive_desc exit_case_pd(int i) {
  memory::desc a({40 + i, 256}, data_type::f32, format_tag::ab);
  memory::desc b({256, 192}, data_type::f32, format_tag::ab);
  memory::desc c({40 + i, 192}, data_type::f32, format_tag::ab);
  return matmul::primitive_desc(matmul::desc(a, b, c), tiered_support::cpu());
}

constexpr int k_exit_creations = 6;

}  // namespace

// Run by the case below in a fresh process: a short-lived program (a CLI, a
// batch job) attaches a persistent cache, creates its primitives in tiered
// mode and returns from main at once, its specializations queued.
TEST_CASE("a short-lived tiered process", "[.][persist-exit]") {
  set_jit_mode(jit_mode::tiered);
  set_persistent_cache(open_persistent_cache_dir(std::getenv("PRIMCACHE_TEST_STORE"), 64));
  static std::vector<matmul> prims;  // alive at exit, as a CLI's would be
  for (int i = 0; i < k_exit_creations; ++i) prims.emplace_back(exit_case_pd(i));
  if (const char* expect = std::getenv("PRIMCACHE_TEST_EXPECT_HITS")) {
    CHECK(get_persistent_cache_stats().hits == std::strtoull(expect, nullptr, 10));
  }
}

// Before the fix the main thread's exit guard stopped the pool and dropped
// the queued specializations before the persistent-cache writer's exit
// flush ran, and the writer's serialize() threw "its compilation was
// dropped at exit": the second run found 1 kernel of 6 (sync mode: 6).
TEST_CASE("a short-lived tiered process stores every kernel it created",
          "[cpu][tiered][pool][persistent]") {
  if (!tiered_support::tiered_here()) return;
  char dir_template[] = "/tmp/primcache_tiered_exit_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);  // mode 0700, as the store requires
  const std::string dir = dir_template;
  const std::string store = "PRIMCACHE_TEST_STORE=" + dir;
  const int first = spawn_self("[persist-exit]", {store});
  CHECK(primcache_test::describe_child_status(first) == "exit status 0");
  const int second = spawn_self(
      "[persist-exit]", {store, "PRIMCACHE_TEST_EXPECT_HITS=" + std::to_string(k_exit_creations)});
  CHECK(primcache_test::describe_child_status(second) == "exit status 0");
  std::filesystem::remove_all(dir);
}
