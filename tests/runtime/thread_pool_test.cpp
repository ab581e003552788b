#include <catch2/catch.hpp>

#include <atomic>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/runtime/thread_pool.hpp"

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

TEST_CASE("shares run on distinct threads, ithr 0 on the caller", "[runtime][thread_pool]") {
  thread_pool pool(3);
  std::vector<std::thread::id> ids(3);
  for (int repeat = 0; repeat < 100; ++repeat) {
    pool.parallel_for(3, [&](int ithr, int) { ids[ithr] = std::this_thread::get_id(); });
    REQUIRE(ids[0] == std::this_thread::get_id());
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
