#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "primcache/runtime/thread_pool.hpp"

using primcache::thread_pool;

// Several outside threads start regions on one pool at once; regions are
// serialized and each sees exactly its own shares. Repeated: the races are
// in the hand-off between regions.
TEST_CASE("concurrent callers each get complete, private regions", "[runtime][thread_pool]") {
  thread_pool pool(4);
  constexpr int kCallers = 4;
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  constexpr int kRegions = 300;
#else
  constexpr int kRegions = 3000;
#endif
  std::vector<int> bad(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRegions; ++r) {
        std::vector<int> hits(4, 0);
        const int nthr = 1 + (r + c) % 4;
        pool.parallel_for(nthr, [&](int ithr, int n) {
          if (n != nthr) hits[ithr] += 100;
          hits[ithr] += 1;
        });
        for (int i = 0; i < 4; ++i) {
          if (hits[i] != (i < nthr ? 1 : 0)) ++bad[c];
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) CHECK(bad[c] == 0);
}

TEST_CASE("resizing while other threads run regions loses no share", "[runtime][thread_pool]") {
  thread_pool pool(2);
  std::atomic<bool> stop{false};
  std::atomic<long> mismatches{0};
  std::thread runner([&] {
    while (!stop.load()) {
      std::atomic<int> count{0};
      int seen_n = 0;
      pool.parallel_for(8, [&](int ithr, int n) {
        count.fetch_add(1);
        if (ithr == 0) seen_n = n;
      });
      if (count.load() != seen_n) mismatches.fetch_add(1);
    }
  });
  for (int i = 0; i < 200; ++i) pool.resize(1 + i % 6);
  stop.store(true);
  runner.join();
  CHECK(mismatches.load() == 0);
}

TEST_CASE("many short regions back to back complete", "[runtime][thread_pool]") {
  thread_pool pool(3);
  std::atomic<long> total{0};
#if defined(__SANITIZE_THREAD__)
  constexpr int kRegions = 2000;
#else
  constexpr int kRegions = 20000;
#endif
  for (int r = 0; r < kRegions; ++r) {
    pool.parallel_for(3, [&](int, int) { total.fetch_add(1, std::memory_order_relaxed); });
  }
  CHECK(total.load() == 3L * kRegions);
}
