#include <catch2/catch.hpp>

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "support/child_process.hpp"

using primcache::thread_pool;

TEST_CASE("balance splits n items into shares that differ by at most one",
          "[runtime][thread_pool]") {
  auto n = GENERATE(0, 1, 7, 64, 1001);
  auto nthr = GENERATE(1, 2, 3, 16);
  std::int64_t expected_begin = 0;
  for (int ithr = 0; ithr < nthr; ++ithr) {
    auto r = primcache::balance(n, ithr, nthr);
    CHECK(r.begin == expected_begin);
    CHECK(r.end - r.begin >= n / nthr);
    CHECK(r.end - r.begin <= n / nthr + 1);
    expected_begin = r.end;
  }
  CHECK(expected_begin == n);
}

TEST_CASE("parallel_for runs every share exactly once", "[runtime][thread_pool]") {
  thread_pool pool(4);
  REQUIRE(pool.size() == 4);
  auto nthr = GENERATE(1, 2, 3, 4, 9);
  std::vector<int> runs(16, 0);
  std::vector<int> seen_nthr(16, -1);
  pool.parallel_for(nthr, [&](int ithr, int n) {
    runs[ithr] += 1;
    seen_nthr[ithr] = n;
  });
  const int used = std::min(nthr, 4);  // clamped to the pool's size
  for (int i = 0; i < 16; ++i) {
    CHECK(runs[i] == (i < used ? 1 : 0));
    if (i < used) CHECK(seen_nthr[i] == used);
  }
}

TEST_CASE("shares run on the caller and idle workers at the same time", "[runtime][thread_pool]") {
  thread_pool pool(3);
  for (int repeat = 0; repeat < 20; ++repeat) {
    // Each share waits (up to 10 s) until all three have started: only
    // three threads running them at once get past it quickly.
    std::atomic<int> started{0};
    std::vector<std::thread::id> ids(3);
    std::vector<int> met(3, 0);
    pool.parallel_for(3, [&](int ithr, int) {
      ids[ithr] = std::this_thread::get_id();
      started.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (started.load() < 3 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      met[ithr] = started.load() == 3 ? 1 : 0;
    });
    for (int v : met) REQUIRE(v == 1);
    REQUIRE(std::set<std::thread::id>(ids.begin(), ids.end()).size() == 3);
  }
}

TEST_CASE("a nested parallel_for runs inline on the calling share", "[runtime][thread_pool]") {
  thread_pool pool(4);
  std::vector<int> inner_runs(4 * 4, 0);
  std::vector<int> inline_ok(4, 0);
  pool.parallel_for(4, [&](int outer, int) {
    const auto me = std::this_thread::get_id();
    bool all_here = true;
    pool.parallel_for(4, [&](int inner, int n) {
      all_here = all_here && std::this_thread::get_id() == me && n == 4;
      inner_runs[outer * 4 + inner] += 1;
    });
    inline_ok[outer] = all_here && thread_pool::in_parallel_region();
  });
  for (int v : inner_runs) CHECK(v == 1);
  for (int v : inline_ok) CHECK(v == 1);
  CHECK_FALSE(thread_pool::in_parallel_region());
}

TEST_CASE("the first exception of a region reaches the caller after all shares finish",
          "[runtime][thread_pool]") {
  thread_pool pool(4);
  std::atomic<int> finished{0};
  SECTION("thrown by a worker") {
    CHECK_THROWS_AS(pool.parallel_for(4,
                                      [&](int ithr, int) {
                                        finished.fetch_add(1);
                                        if (ithr == 2) throw std::runtime_error("share 2 failed");
                                      }),
                    std::runtime_error);
    CHECK(finished.load() == 4);
  }
  SECTION("thrown by the caller's share") {
    CHECK_THROWS_WITH(pool.parallel_for(4,
                                        [&](int ithr, int) {
                                          finished.fetch_add(1);
                                          if (ithr == 0) throw std::runtime_error("share 0");
                                        }),
                      "share 0");
    CHECK(finished.load() == 4);
  }
  // The pool stays usable after a failed region.
  int sum = 0;
  std::vector<int> parts(4, 0);
  pool.parallel_for(4, [&](int ithr, int) { parts[ithr] = ithr + 1; });
  sum = std::accumulate(parts.begin(), parts.end(), 0);
  CHECK(sum == 10);
}

TEST_CASE("pool sizes are validated and resize takes effect for later regions",
          "[runtime][thread_pool]") {
  CHECK_THROWS_AS(thread_pool(0), primcache::error);
  CHECK_THROWS_AS(thread_pool(-3), primcache::error);
  CHECK_THROWS_AS(thread_pool(1 << 20), primcache::error);
  thread_pool pool(2);
  CHECK_THROWS_AS(pool.resize(0), primcache::error);
  pool.resize(5);
  CHECK(pool.size() == 5);
  std::vector<int> runs(5, 0);
  pool.parallel_for(5, [&](int ithr, int) { runs[ithr] += 1; });
  for (int v : runs) CHECK(v == 1);
  pool.resize(1);
  int calls = 0;
  pool.parallel_for(5, [&](int, int n) {
    ++calls;
    CHECK(n == 1);
  });
  CHECK(calls == 1);
}

TEST_CASE("the default pool honours set_num_threads", "[runtime][thread_pool]") {
  const int before = primcache::get_num_threads();
  CHECK(before >= 1);
  primcache::set_num_threads(3);
  CHECK(primcache::get_num_threads() == 3);
  CHECK_THROWS_AS(primcache::set_num_threads(0), primcache::error);
  CHECK(primcache::get_num_threads() == 3);
  primcache::set_num_threads(before);
}

namespace {

// A directory of cgroup files for cgroup_cpu_limit, removed afterwards.
class fake_cgroup_root {
 public:
  fake_cgroup_root() {
    static std::atomic<int> counter{0};
    root_ =
        std::filesystem::temp_directory_path() / ("primcache-cgroup-" + std::to_string(::getpid()) +
                                                  "-" + std::to_string(counter.fetch_add(1)));
    std::filesystem::create_directories(root_);
  }
  ~fake_cgroup_root() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  void write(const std::string& relative, const std::string& text) const {
    const auto path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  std::string path() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

}  // namespace

TEST_CASE("a cgroup v2 cpu.max quota caps the default thread count, rounded up",
          "[runtime][thread_pool][threads]") {
  using primcache::runtime_internal::cgroup_cpu_limit;
  fake_cgroup_root fs;
  SECTION("a quota in the process's own cgroup") {
    fs.write("app.slice/job/cpu.max", "150000 100000\n");
    CHECK(cgroup_cpu_limit(fs.path(), "0::/app.slice/job\n") == 2);
  }
  SECTION("the smallest quota among the cgroup and its ancestors") {
    fs.write("cpu.max", "max 100000\n");
    fs.write("app.slice/cpu.max", "300000 100000\n");
    fs.write("app.slice/job/cpu.max", "max 100000\n");
    CHECK(cgroup_cpu_limit(fs.path(), "0::/app.slice/job\n") == 3);
  }
  SECTION("a quota below one CPU still gives one thread") {
    fs.write("cpu.max", "20000 100000");
    CHECK(cgroup_cpu_limit(fs.path(), "0::/\n") == 1);
  }
  SECTION("no quota, a malformed file or no file means no cap") {
    fs.write("a/cpu.max", "max 100000\n");
    fs.write("b/cpu.max", "lots 100000\n");
    fs.write("c/cpu.max", "100000\n");
    CHECK(cgroup_cpu_limit(fs.path(), "0::/a\n") == 0);
    CHECK(cgroup_cpu_limit(fs.path(), "0::/b\n") == 0);
    CHECK(cgroup_cpu_limit(fs.path(), "0::/c\n") == 0);
    CHECK(cgroup_cpu_limit(fs.path(), "0::/d\n") == 0);
    CHECK(cgroup_cpu_limit(fs.path() + "/missing", "0::/\n") == 0);
  }
  SECTION("a path that is not under the mount falls back to the mount's own file") {
    fs.write("cpu.max", "400000 100000\n");
    CHECK(cgroup_cpu_limit(fs.path(), "0::/docker/0123abcd\n") == 4);
    CHECK(cgroup_cpu_limit(fs.path(), "0::/../../etc\n") == 4);
  }
}

TEST_CASE("a cgroup v1 CFS quota caps the default thread count",
          "[runtime][thread_pool][threads]") {
  using primcache::runtime_internal::cgroup_cpu_limit;
  fake_cgroup_root fs;
  const std::string self = "12:memory:/job\n4:cpu,cpuacct:/job\n1:name=systemd:/job\n";
  SECTION("quota and period") {
    fs.write("cpu,cpuacct/job/cpu.cfs_quota_us", "250000\n");
    fs.write("cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
    CHECK(cgroup_cpu_limit(fs.path(), self) == 3);
  }
  SECTION("-1 means no quota") {
    fs.write("cpu,cpuacct/job/cpu.cfs_quota_us", "-1\n");
    fs.write("cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
    CHECK(cgroup_cpu_limit(fs.path(), self) == 0);
  }
  SECTION("a controller line without cpu is ignored") {
    fs.write("memory/job/cpu.cfs_quota_us", "100000\n");
    fs.write("memory/job/cpu.cfs_period_us", "100000\n");
    CHECK(cgroup_cpu_limit(fs.path(), "12:memory:/job\n") == 0);
  }
}

TEST_CASE("the default thread count follows the affinity mask, and PRIMCACHE_NUM_THREADS wins",
          "[runtime][thread_pool][threads]") {
  using primcache::runtime_internal::affinity_cpu_count;
  using primcache::runtime_internal::initial_num_threads;
  CHECK(affinity_cpu_count() >= 1);
  // In a child, so that neither the affinity nor the environment leaks into
  // other tests.
  CHECK(primcache_test::run_in_child(60, [] {
          cpu_set_t one;
          CPU_ZERO(&one);
          cpu_set_t all;
          if (::sched_getaffinity(0, sizeof all, &all) != 0) return 10;
          int first = 0;
          while (!CPU_ISSET(first, &all)) ++first;
          CPU_SET(first, &one);
          if (::sched_setaffinity(0, sizeof one, &one) != 0) return 11;
          if (affinity_cpu_count() != 1) return 12;
          ::unsetenv("PRIMCACHE_NUM_THREADS");
          if (initial_num_threads() != 1) return 13;
          ::setenv("PRIMCACHE_NUM_THREADS", "3", 1);
          if (initial_num_threads() != 3) return 14;
          ::setenv("PRIMCACHE_NUM_THREADS", "three", 1);  // malformed: the default stands
          if (initial_num_threads() != 1) return 15;
          return 0;
        }) == 0);
}

TEST_CASE("a forked child runs parallel regions on a fresh default pool",
          "[runtime][thread_pool][fork]") {
  const int before = primcache::get_num_threads();
  primcache::set_num_threads(3);
  // The parent's workers are awake and have run regions before the fork.
  std::atomic<int> warm{0};
  primcache::default_thread_pool().parallel_for(3, [&](int, int) { warm.fetch_add(1); });
  REQUIRE(warm.load() == 3);
  const int status = primcache_test::run_in_child(60, [] {
    if (primcache::get_num_threads() != 3) return 20;
    constexpr std::int64_t n = 100000;
    std::vector<std::int64_t> y(n, -1);
    for (int round = 0; round < 50; ++round) {
      primcache::default_thread_pool().parallel_for(3, [&](int ithr, int nthr) {
        const auto r = primcache::balance(n, ithr, nthr);
        for (std::int64_t i = r.begin; i < r.end; ++i) y[i] = 3 * i + round;
      });
      for (std::int64_t i = 0; i < n; ++i) {
        if (y[i] != 3 * i + round) return 21;
      }
    }
    // A region that waits for each share to start proves that workers
    // exist. The deadline is generous: under AddressSanitizer with other
    // tests beside it on 2 cores, a new thread's first turn can be slow
    // (one CI run saw 10 s pass). A failure says how many shares started:
    // status 30 + started (31: no worker ran a share, 32: one did).
    std::atomic<int> started{0};
    std::atomic<int> started_at_deadline{3};  // the fewest a share saw at its deadline
    primcache::default_thread_pool().parallel_for(3, [&](int, int) {
      started.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (started.load() < 3 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      const int seen = started.load();
      int fewest = started_at_deadline.load();
      while (seen < fewest && !started_at_deadline.compare_exchange_weak(fewest, seen)) {
      }
    });
    return started_at_deadline.load() == 3 ? 0 : 30 + started_at_deadline.load();
  });
  CHECK(status == 0);
  primcache::set_num_threads(before);
}

TEST_CASE("a fork while a pool's workers are starting leaves the child able to start its own",
          "[runtime][thread_pool][fork]") {
  // Each round constructs a pool (two workers starting) and forks at once,
  // while those workers may still be in their thread's start-up, which
  // allocates. Before fork() waited for them, a child under
  // AddressSanitizer could inherit an allocator lock held by one of them
  // and its own new workers then waited on it forever. The child's region
  // needs both of its workers to run a share; an alarm ends a stuck child.
  const int before = primcache::get_num_threads();
  primcache::set_num_threads(3);
  constexpr int kRounds = 300;
  int failed_round = -1;
  int failed_status = 0;
  for (int round = 0; round < kRounds && failed_round < 0; ++round) {
    primcache::thread_pool starting(3);
    const int status = primcache_test::run_in_child(60, [] {
      ::alarm(60);
      std::atomic<int> started{0};
      primcache::default_thread_pool().parallel_for(3, [&](int, int) {
        started.fetch_add(1);
        while (started.load() < 3) std::this_thread::yield();
      });
      return started.load() == 3 ? 0 : 40;
    });
    if (status != 0) {
      failed_round = round;
      failed_status = status;
    }
  }
  INFO("round " << failed_round << " exited with status " << failed_status
                << " (-1: killed, by the alarm when stuck)");
  CHECK(failed_round == -1);
  primcache::set_num_threads(before);
}
