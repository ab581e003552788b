// Tiered creation through the public API: a matmul that misses every cache
// starts on the generic kernel, the specialized kernel is swapped in by the
// background pool, and nothing a caller can see changes but the speed —
// outputs bit-identical across the swap, executions racing with it, impls
// evicted and dropped with their compilation pending, many threads creating
// many shapes. The mode switch (API, control setting, C API) is here too.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "primcache/control/registry.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/primcache.h"
#include "primcache/runtime/runtime.hpp"
#include "support/child_process.hpp"
#include "support/sanitizers.hpp"
#include "tiered/background_compiler.hpp"
#include "tiered_test_support.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

using tiered_support::cpu;
using tiered_support::mode_scope;
using tiered_support::same_bits;
using tiered_support::tiered_here;

memory make(memory::dims dims, unsigned seed) {
  memory m(memory::desc(dims, data_type::f32, dims.size() == 2 ? tag::ab : tag::abc), cpu());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> v(-1.f, 1.f);
  auto* p = static_cast<float*>(m.get_data_handle());
  for (std::int64_t i = 0; i < m.get_desc().nelems(); ++i) p[i] = v(rng);
  return m;
}

// A matmul with bias and a chain of post-ops, its arguments, and a way to
// run it into a fresh dst.
struct matmul_case {
  int m, n, k;
  memory src, wei, bias, addend;
  matmul::primitive_desc pd;

  matmul_case(int m_, int n_, int k_, unsigned seed)
      : m(m_),
        n(n_),
        k(k_),
        src(make({m_, k_}, seed)),
        wei(make({k_, n_}, seed + 1)),
        bias(make({1, n_}, seed + 2)),
        addend(make({m_, n_}, seed + 3)) {
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_gelu_tanh, 0.f, 0.f);
    ops.append_binary(algorithm::binary_add, addend.get_desc());
    ops.append_eltwise(0.5f, algorithm::eltwise_relu, 0.125f, 0.f);
    primitive_attr attr;
    attr.set_post_ops(ops);
    memory::desc dmd({m_, n_}, data_type::f32, tag::ab);
    pd = matmul::primitive_desc(matmul::desc(src.get_desc(), wei.get_desc(), bias.get_desc(), dmd),
                                attr, cpu());
  }

  std::vector<float> run(const primitive& prim) const {
    memory dst(pd.dst_desc(), cpu());
    prim.execute(stream(cpu()),
                 {{PRIMCACHE_ARG_SRC, src},
                  {PRIMCACHE_ARG_WEIGHTS, wei},
                  {PRIMCACHE_ARG_BIAS, bias},
                  {PRIMCACHE_ARG_DST, dst},
                  {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1, addend}});
    const auto* p = static_cast<const float*>(dst.get_data_handle());
    return std::vector<float>(p, p + static_cast<std::size_t>(m) * n);
  }
};

// Waits (bounded) for the background pool to drain.
bool pool_drains() {
  auto& pool = cpu_internal::background_compiler::instance();
  for (int i = 0; i < 6000 && pool.pending() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pool.pending() == 0;
}

}  // namespace

// Run first in its own process by CTest, with PRIMCACHE_JIT_MODE set or not.
TEST_CASE("the initial JIT mode comes from PRIMCACHE_JIT_MODE", "[cpu][tiered][mode]") {
  // Registered when the libraries load, before any creation or API call:
  // the console shows the switch and the gauge from the start.
  std::string setting;
  for (const auto& s : control().list_settings()) {
    if (s.name == "jit_mode") setting = std::get<std::string>(s.value);
  }
  bool gauge = false;
  for (const auto& m : control().list_metrics()) {
    if (m.name == "primcache_jit_pending_compilations") gauge = true;
  }
  CHECK(gauge);
  const char* env = std::getenv("PRIMCACHE_JIT_MODE");
  const jit_mode want =
      env != nullptr && std::string(env) == "sync" ? jit_mode::sync : jit_mode::tiered;
  CHECK(get_jit_mode() == want);
  CHECK(setting == to_string(want));
}

TEST_CASE("the JIT mode is set by the API, the control setting and the C API",
          "[cpu][tiered][mode]") {
  mode_scope scope(jit_mode::sync);
  CHECK(get_jit_mode() == jit_mode::sync);
  set_jit_mode(jit_mode::tiered);
  CHECK(get_jit_mode() == jit_mode::tiered);
  control().set_setting("jit_mode", std::string("sync"));
  CHECK(get_jit_mode() == jit_mode::sync);
  CHECK_THROWS_AS(control().set_setting("jit_mode", std::string("fast")), error);
  CHECK(get_jit_mode() == jit_mode::sync);
  CHECK(pc_set_jit_mode(pc_jit_mode_tiered) == pc_success);
  pc_jit_mode_t m = pc_jit_mode_sync;
  CHECK(pc_get_jit_mode(&m) == pc_success);
  CHECK(m == pc_jit_mode_tiered);
  CHECK(pc_set_jit_mode(static_cast<pc_jit_mode_t>(0x7ffffffe)) == pc_invalid_arguments);
  CHECK(pc_get_jit_mode(nullptr) == pc_invalid_arguments);
  CHECK(get_jit_mode() == jit_mode::tiered);
  CHECK(std::string(to_string(jit_mode::sync)) == "sync");
}

TEST_CASE("a tiered matmul gives bit-identical outputs before and after the swap",
          "[cpu][tiered][matmul]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  std::mt19937 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    const int m = 1 + static_cast<int>(rng() % 90), n = 1 + static_cast<int>(rng() % 130),
              k = 1 + static_cast<int>(rng() % 200);
    INFO(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
    matmul_case c(m, n, k, 100 + trial);
    // A cache of capacity 0 keeps nothing: each creation is a fresh miss.
    set_primitive_cache_capacity(0);
    matmul tiered(c.pd);
    const std::vector<float> before = c.run(tiered);
    const bool was_generic = !tiered.specialized();
    tiered.wait_until_specialized();
    CHECK(tiered.specialized());
    const std::vector<float> after = c.run(tiered);
    CHECK(same_bits(before, after));
    // The same key created synchronously compiles the same specialized code.
    set_jit_mode(jit_mode::sync);
    matmul sync(c.pd);
    CHECK(sync.specialized());
    CHECK(same_bits(before, c.run(sync)));
    set_jit_mode(jit_mode::tiered);
    // At least the first creation ran generic code before the swap (the
    // compilation takes milliseconds; the execution above does not wait).
    if (trial == 0) CHECK(was_generic);
  }
}

TEST_CASE("both modes reach one cached primitive: the mode is not in the key",
          "[cpu][tiered][matmul]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(16);
  matmul_case c(33, 70, 45, 9);
  matmul tiered(c.pd);
  CHECK(tiered.creation_outcome() == lookup_outcome::miss);
  set_jit_mode(jit_mode::sync);
  matmul again(c.pd);
  CHECK(again.creation_outcome() == lookup_outcome::hit);
  again.wait_until_specialized();
  CHECK(tiered.specialized());
  // A blob holds the specialized code only.
  const auto blob = tiered.cache_blob();
  CHECK_FALSE(blob.empty());
}

TEST_CASE("executions racing with the swap all give the same bits", "[cpu][tiered][matmul]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  matmul_case c(64, 96, 300, 21);
  set_jit_mode(jit_mode::sync);
  const std::vector<float> expected = c.run(matmul(c.pd));
  set_jit_mode(jit_mode::tiered);
  for (int round = 0; round < 3; ++round) {
    matmul prim(c.pd);
    std::atomic<int> mismatches{0}, generic_runs{0}, runs{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        // Run until well after the swap.
        for (int i = 0; i < 400; ++i) {
          const bool generic = !prim.specialized();
          if (!same_bits(c.run(prim), expected)) ++mismatches;
          ++runs;
          if (generic) {
            ++generic_runs;
          } else if (i > 20) {
            break;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    CHECK(mismatches == 0);
    CHECK(runs > 0);
    prim.wait_until_specialized();
    CHECK(prim.specialized());
  }
}

TEST_CASE("tiered impls evicted and dropped with their compilation pending",
          "[cpu][tiered][matmul]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(2);
  SECTION("dropped before their compilation runs: nothing is installed, nothing leaks") {
    for (int i = 0; i < 12; ++i) {
      matmul_case c(8 + i, 40 + i, 16 + i, 40 + i);
      matmul prim(c.pd);
      (void)c.run(prim);
    }                                 // each primitive goes; the cache keeps 2 of the impls
    set_primitive_cache_capacity(0);  // evicts the rest while their jobs may be queued
    CHECK(pool_drains());
  }
  SECTION("a primitive outlives its eviction and still gets its specialized code") {
    matmul_case c(31, 77, 63, 60);
    matmul prim(c.pd);
    set_primitive_cache_capacity(0);
    const std::vector<float> before = c.run(prim);
    prim.wait_until_specialized();
    CHECK(prim.specialized());
    CHECK(same_bits(before, c.run(prim)));
  }
}

TEST_CASE("many threads create many shapes at once in tiered mode", "[cpu][tiered][matmul]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(64);
  constexpr int threads_n = 6, shapes = 5;
  std::vector<std::unique_ptr<matmul_case>> cases;
  for (int s = 0; s < shapes; ++s) {
    cases.push_back(std::make_unique<matmul_case>(9 + 7 * s, 50 + 13 * s, 20 + 11 * s, 200 + s));
  }
  std::atomic<int> failures{0};
  std::vector<std::vector<std::vector<float>>> outputs(threads_n);
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_n; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int s = 0; s < shapes; ++s) {
          const matmul_case& c = *cases[(s + t) % shapes];
          matmul prim(c.pd);
          outputs[t].push_back(c.run(prim));
        }
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(failures == 0);
  // Every thread saw the same bits for a shape, whichever kernel it ran.
  for (int t = 1; t < threads_n; ++t) {
    for (int s = 0; s < shapes; ++s) {
      const int shape0 = s % shapes, index_t = ((s - t) % shapes + shapes) % shapes;
      CHECK(same_bits(outputs[0][shape0], outputs[t][index_t]));
    }
  }
  for (const auto& c : cases) matmul(c->pd).wait_until_specialized();
  CHECK(pool_drains());
}

TEST_CASE("the C API waits for the specialized code", "[cpu][tiered][matmul]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  pc_engine_t eng = nullptr;
  REQUIRE(pc_engine_create(&eng, pc_engine_cpu, 0) == pc_success);
  const int64_t dims_a[] = {19, 23}, dims_b[] = {23, 41}, dims_c[] = {19, 41};
  pc_memory_desc_t a = nullptr, b = nullptr, d = nullptr;
  REQUIRE(pc_memory_desc_create_with_tag(&a, 2, dims_a, pc_f32, pc_tag_ab) == pc_success);
  REQUIRE(pc_memory_desc_create_with_tag(&b, 2, dims_b, pc_f32, pc_tag_ab) == pc_success);
  REQUIRE(pc_memory_desc_create_with_tag(&d, 2, dims_c, pc_f32, pc_tag_ab) == pc_success);
  pc_primitive_desc_t pd = nullptr;
  REQUIRE(pc_matmul_primitive_desc_create(&pd, eng, a, b, nullptr, d, nullptr) == pc_success);
  pc_primitive_t prim = nullptr;
  REQUIRE(pc_primitive_create(&prim, pd) == pc_success);
  int specialized = -1;
  CHECK(pc_primitive_wait_until_specialized(prim, &specialized) == pc_success);
  CHECK(specialized == 1);
  CHECK(pc_primitive_wait_until_specialized(prim, nullptr) == pc_success);
  CHECK(pc_primitive_wait_until_specialized(nullptr, &specialized) == pc_invalid_arguments);
  pc_primitive_destroy(prim);
  pc_primitive_desc_destroy(pd);
  pc_memory_desc_destroy(a);
  pc_memory_desc_destroy(b);
  pc_memory_desc_destroy(d);
  pc_engine_destroy(eng);
}

TEST_CASE("the pool's stop is registered with atexit a bounded number of times", "[cpu][tiered]") {
  // Each submit and each finished job registers the stop once more, until
  // the bound: a long-running process must not grow glibc's exit list
  // without end.
  using cpu_internal::background_compiler;
  auto& pool = background_compiler::instance();
  const int before = background_compiler::stop_registrations();
  std::atomic<int> ran{0};
  const int jobs = background_compiler::k_max_stop_registrations;
  std::vector<std::shared_ptr<cpu_internal::background_job>> submitted;
  int refused = 0;
  for (int i = 0; i < jobs; ++i) {
    auto job = cpu_internal::background_job::make([&] { ran.fetch_add(1); });
    if (!pool.submit(job)) ++refused;
    submitted.push_back(std::move(job));
  }
  REQUIRE(refused == 0);
  for (auto& job : submitted) job->wait();
  REQUIRE(pool_drains());
  CHECK(ran.load() == jobs);
  // 2 x jobs attempts (a submit and a completion each) after `before`
  // (below the bound when this test runs alone, as CTest runs it): the count
  // reached the bound and stopped there.
  INFO("registrations before: " << before);
  CHECK(background_compiler::stop_registrations() == background_compiler::k_max_stop_registrations);
}

TEST_CASE("the pending compilations are a control gauge", "[cpu][tiered]") {
  auto& pool = cpu_internal::background_compiler::instance();
  CHECK(pool.threads() >= 1);
  bool found = false;
  for (const auto& m : control().list_metrics()) {
    if (m.name == "primcache_jit_pending_compilations") found = true;
  }
  CHECK(found);
}

namespace {
std::uint64_t compile_samples() {
  for (const auto& f : control().list_metrics()) {
    if (f.name != "primcache_primitive_create_seconds") continue;
    for (const auto& s : f.samples) {
      const auto has = [&](const char* k, const char* v) {
        return std::find(s.labels.begin(), s.labels.end(),
                         std::pair<std::string, std::string>(k, v)) != s.labels.end();
      };
      if (has("engine", "cpu") && has("source", "compile")) return s.count;
    }
  }
  return 0;
}
}  // namespace

TEST_CASE("a tiered creation is an event of source tiered and no compile-time sample",
          "[cpu][tiered][matmul]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  matmul_case c(17, 35, 53, 950);
  const std::uint64_t since = control().events_since(0).next;
  const std::uint64_t compiled = compile_samples();
  matmul prim(c.pd);
  const event_page page = control().events_since(since);
  REQUIRE(page.events.size() == 1);
  CHECK(page.events[0].source == "tiered");
  CHECK(compile_samples() == compiled);
  set_jit_mode(jit_mode::sync);
  matmul sync(c.pd);  // capacity 0: compiled again, synchronously
  CHECK(control().events_since(since).events.back().source == "compile");
  CHECK(compile_samples() == compiled + 1);
  prim.wait_until_specialized();
}

TEST_CASE("the persistent cache stores and loads only specialized code",
          "[cpu][tiered][persistent]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  char dir_template[] = "/tmp/primcache_tiered_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);  // mode 0700, as the store requires
  const std::string dir = dir_template;
  set_persistent_cache(open_persistent_cache_dir(dir, 64));
  const persistent_cache_stats before = get_persistent_cache_stats();
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(16);
  matmul_case c(27, 59, 81, 900);
  matmul first(c.pd);  // a store miss: tiered; its write waits for the specialized code
  const std::vector<float> generic_or_not = c.run(first);
  flush_persistent_cache_writes();
  const persistent_cache_stats written = get_persistent_cache_stats();
  CHECK(written.writes_stored == before.writes_stored + 1);
  CHECK(first.specialized());  // the write waited for it
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(16);
  matmul loaded(c.pd);  // a store hit: specialized at once, no generic tier
  CHECK(get_persistent_cache_stats().hits == written.hits + 1);
  CHECK(loaded.specialized());
  CHECK(same_bits(generic_or_not, c.run(loaded)));
  set_persistent_cache(nullptr);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a child forked with compilations pending gets its specialized kernels",
          "[cpu][tiered][fork]") {
  if (!tiered_here()) return;
#if PRIMCACHE_TEST_TSAN
  // ThreadSanitizer refuses to start threads in the child of a multithreaded
  // fork (die_after_fork): this case runs in the other builds only.
  WARN("skipped under ThreadSanitizer");
  return;
#endif
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(64);
  std::vector<std::unique_ptr<matmul_case>> cases;
  std::vector<matmul> prims;
  for (int i = 0; i < 4; ++i) {
    cases.push_back(std::make_unique<matmul_case>(11 + i, 52 + i, 37 + i, 700 + i));
    prims.emplace_back(cases.back()->pd);
  }
  matmul_case fresh(29, 83, 61, 800);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::alarm(60);  // a hang ends the child with SIGALRM, a failure below
    int code = 0;
    try {
      for (std::size_t i = 0; i < prims.size(); ++i) {
        const std::vector<float> before = cases[i]->run(prims[i]);
        prims[i].wait_until_specialized();
        if (!prims[i].specialized()) code = 10;
        if (!same_bits(before, cases[i]->run(prims[i]))) code = 11;
      }
      matmul child(fresh.pd);  // a new tiered creation: the child's pool
      const std::vector<float> before = fresh.run(child);
      child.wait_until_specialized();
      if (!same_bits(before, fresh.run(child))) code = 12;
    } catch (...) {
      code = 13;
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  for (auto& p : prims) p.wait_until_specialized();
}

// A fork waits for the job a pool thread is running, so it comes the moment
// that job ends, while the pool thread goes on with what follows a job:
// before the fix, the pool thread's std::atexit registration and the job's
// release (glibc's exit-list lock, the allocator's locks) ran outside the
// pool's locks, so a child could start with one of them held by a thread it
// does not have, and hang on its first submit (a CI run under
// AddressSanitizer: the child of the case above hung until its alarm). And
// the child's pool reused condition variables whose waiters (the parent's
// pool threads) do not exist in the child: glibc's condition variable waits
// for such waiters to leave before it switches groups, so the child's third
// or fourth notification hung. Each child here submits several jobs one
// after the other and waits for each.
TEST_CASE("forks racing with the end of a background job leave a working pool in the child",
          "[cpu][tiered][fork]") {
#if PRIMCACHE_TEST_TSAN
  WARN("skipped under ThreadSanitizer");  // die_after_fork, as above
  return;
#endif
  using cpu_internal::background_compiler;
  using cpu_internal::background_job;
  auto& pool = background_compiler::instance();
#if PRIMCACHE_TEST_ASAN
  const int forks = 60;  // a sanitized fork copies a large shadow mapping
#else
  const int forks = 200;
#endif
  std::vector<std::string> failures;
  for (int i = 0; i < forks && failures.size() < 3; ++i) {
    auto started = std::make_shared<std::atomic<bool>>(false);
    auto job = background_job::make([started, i] {
      started->store(true);
      // Ends 0-99 us after it starts: the fork below waits for it.
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(i % 100);
      while (std::chrono::steady_clock::now() < until) {
      }
    });
    REQUIRE(pool.submit(job));
    // Every fourth fork finds the pool idle: its threads wait on their
    // condition variables when the child is made.
    if (i % 4 == 3) {
      job->wait();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else {
      while (!started->load()) std::this_thread::yield();
    }
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::alarm(10);  // a hang ends the child with SIGALRM
      int code = 0;
      for (int j = 0; j < 4 && code == 0; ++j) {
        std::atomic<bool> ran{false};
        auto child_job = background_job::make([&ran] { ran.store(true); });
        if (!pool.submit(child_job)) code = 20;
        // Give the child's pool thread the job, most times, before waiting.
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        child_job->wait();
        if (code == 0 && !ran.load()) code = 21;
      }
      ::_exit(code);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failures.push_back("fork " + std::to_string(i) + ": " +
                         (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                              : "status " + std::to_string(WEXITSTATUS(status))));
    }
    job->wait();
  }
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
}

// A fork made right after the pool's first submit, while the threads that
// submit started may still be starting up: under the AddressSanitizer of GCC 12 and clang 15 a
// thread's start-up allocates under the allocator's locks, which the
// sanitizer does not take around fork(), so a child made then could start
// with one of them held and hang in its first allocation of that size (a CI
// run under AddressSanitizer: the child of "a child forked with compilations
// pending ..." hung until its alarm). A pool's threads are new only once per
// process, so each round runs in a child of its own, whose pool has no
// threads: it submits and forks at once, and the grandchild allocates across
// the allocator's size classes and runs jobs on its own pool.
TEST_CASE("a fork right after the pool starts its threads leaves a working child",
          "[cpu][tiered][fork]") {
#if PRIMCACHE_TEST_TSAN
  WARN("skipped under ThreadSanitizer");  // die_after_fork, as above
  return;
#endif
  using cpu_internal::background_compiler;
  using cpu_internal::background_job;
  auto& pool = background_compiler::instance();
#if PRIMCACHE_TEST_ASAN
  const int rounds = 24;  // a sanitized fork copies a large shadow mapping
#else
  const int rounds = 48;
#endif
  // A failure's status may be the child's or its grandchild's (passed on).
  const std::vector<std::string> failures =
      primcache_test::run_in_children(rounds, 30, [&pool](int) {
        auto first = background_job::make([] {});
        if (!pool.submit(first)) return 30;  // starts this process's pool threads
        const pid_t grandchild = ::fork();
        if (grandchild < 0) return 31;
        if (grandchild == 0) {
          int code = 0;
          primcache_test::allocate_from_every_size_class();
          for (int j = 0; j < 3 && code == 0; ++j) {
            std::atomic<bool> ran{false};
            auto job = background_job::make([&ran] {
              std::vector<std::string> made(64,
                                            std::string(100, 'x'));  // allocates on the pool thread
              ran.store(made.size() == 64);
            });
            if (!pool.submit(job)) code = 20;
            std::this_thread::sleep_for(
                std::chrono::milliseconds(2));  // most times the pool runs it
            job->wait();
            if (code == 0 && !ran.load()) code = 21;
          }
          ::_exit(code);
        }
        const int code = primcache_test::wait_child(grandchild, 10);
        first->wait();
        return code;
      });
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
}

// Run by the case below, each time in a fresh process: the process's first
// compilation (a tiered matmul's specialized kernel) is still running when
// the process exits, PRIMCACHE_TEST_EXIT_AFTER_US microseconds later.
TEST_CASE("exit during the process's first compilation", "[.][exit-first]") {
  set_jit_mode(jit_mode::tiered);
  static matmul_case c(128, 3072, 768, 900);  // alive at exit
  static matmul prim(c.pd);
  const char* after = std::getenv("PRIMCACHE_TEST_EXIT_AFTER_US");
  std::this_thread::sleep_for(std::chrono::microseconds(after ? std::atoi(after) : 0));
}

// exit() destroys the statics LLVM made during the compilation still running
// on the pool thread unless the pool stops first: before the main thread's
// guard (background_compiler.cpp), 8 processes in 120 died this way (a
// segfault, or "LLVM ERROR: Invalid size request on a scalable vector").
TEST_CASE("processes exiting during their first compilation exit cleanly",
          "[cpu][tiered][exit-race]") {
  if (!tiered_here()) return;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
#if PRIMCACHE_TEST_TSAN || PRIMCACHE_TEST_ASAN
  const int runs = 24;  // sanitized processes start slowly
#else
  const int runs = 80;
#endif
  std::vector<std::string> failures;
  for (int i = 0; i < runs; ++i) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "PRIMCACHE_", 10) != 0) env_strings.emplace_back(*e);
    }
    const int after_us = (i % 12) * 1000;  // 0 to 11 ms: across the compilation
    env_strings.push_back("PRIMCACHE_TEST_EXIT_AFTER_US=" + std::to_string(after_us));
    std::vector<char*> envp;
    for (auto& v : env_strings) envp.push_back(v.data());
    envp.push_back(nullptr);
    std::string filter = "[exit-first]";
    char* argv[] = {const_cast<char*>(self.c_str()), filter.data(), nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, self.c_str(), &fa, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failures.push_back("exit after " + std::to_string(after_us) + " us: " +
                         (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                              : "status " + std::to_string(WEXITSTATUS(status))));
    }
  }
  INFO(failures.size() << " of " << runs << " processes failed");
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
}

// Run alone by CTest (see tests/cpu/CMakeLists.txt): creates tiered
// primitives and returns with their compilations queued; the process must
// exit cleanly (the pool drops what is queued and joins its threads).
TEST_CASE("exit with compilations pending", "[.][exit]") {
  if (!tiered_here()) return;
  set_jit_mode(jit_mode::tiered);
  static std::vector<std::unique_ptr<matmul_case>> cases;  // alive at exit
  static std::vector<matmul> prims;
  for (int i = 0; i < 8; ++i) {
    cases.push_back(std::make_unique<matmul_case>(20 + i, 60 + i, 30 + i, 500 + i));
    prims.emplace_back(cases.back()->pd);
    (void)cases.back()->run(prims.back());
  }
  CHECK(cpu_internal::background_compiler::instance().pending() > 0);
}
