#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "primcache/runtime/thread_pool.hpp"
#include "support/sanitizers.hpp"

using primcache::thread_pool;

// Several outside threads start regions on one pool at once; the regions
// share the workers and each sees exactly its own shares. Repeated: the
// races are in the hand-off between regions and slots.
TEST_CASE("concurrent callers each get complete, private regions", "[runtime][thread_pool]") {
  thread_pool pool(4);
  constexpr int kCallers = 4;
#if PRIMCACHE_TEST_TSAN || PRIMCACHE_TEST_ASAN
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
#if PRIMCACHE_TEST_TSAN
  constexpr int kRegions = 2000;
#else
  constexpr int kRegions = 20000;
#endif
  for (int r = 0; r < kRegions; ++r) {
    pool.parallel_for(3, [&](int, int) { total.fetch_add(1, std::memory_order_relaxed); });
  }
  CHECK(total.load() == 3L * kRegions);
}

// Caller B's region holds the pool's only worker (or B itself) in a share
// that ends when caller A has finished its regions: A's regions must run
// beside it (A runs its shares itself), not queue behind it.
TEST_CASE("a caller's regions do not wait for another caller's region", "[runtime][thread_pool]") {
  thread_pool pool(2);
  std::atomic<bool> a_done{false};
  std::atomic<bool> b_started{false};
  std::atomic<bool> b_timed_out{false};
  std::thread b([&] {
    pool.parallel_for(2, [&](int, int) {
      b_started.store(true);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!a_done.load()) {
        if (std::chrono::steady_clock::now() > deadline) {
          b_timed_out.store(true);
          break;
        }
        std::this_thread::yield();
      }
    });
  });
  while (!b_started.load()) std::this_thread::yield();
  long sum = 0;
  for (int r = 0; r < 100; ++r) {
    std::vector<int> parts(2, 0);
    pool.parallel_for(2, [&](int ithr, int) { parts[ithr] = ithr + 1; });
    sum += parts[0] + parts[1];
  }
  a_done.store(true);
  b.join();
  CHECK(sum == 300);
  CHECK_FALSE(b_timed_out.load());
}

TEST_CASE("an exception reaches only the caller whose region threw", "[runtime][thread_pool]") {
  thread_pool pool(3);
#if PRIMCACHE_TEST_TSAN || PRIMCACHE_TEST_ASAN
  constexpr int kRegions = 200;
#else
  constexpr int kRegions = 2000;
#endif
  std::atomic<int> wrong{0};
  std::atomic<int> caught{0};
  std::thread thrower([&] {
    for (int r = 0; r < kRegions; ++r) {
      try {
        pool.parallel_for(3, [&](int ithr, int) {
          if (ithr == r % 3) throw std::runtime_error("thrower's share");
        });
        wrong.fetch_add(1);  // the region threw; the call must rethrow
      } catch (const std::runtime_error&) {
        caught.fetch_add(1);
      }
    }
  });
  std::thread quiet([&] {
    for (int r = 0; r < kRegions; ++r) {
      try {
        std::atomic<int> ran{0};
        pool.parallel_for(3, [&](int, int) { ran.fetch_add(1); });
        if (ran.load() != 3) wrong.fetch_add(1);
      } catch (...) {
        wrong.fetch_add(1);
      }
    }
  });
  thrower.join();
  quiet.join();
  CHECK(wrong.load() == 0);
  CHECK(caught.load() == kRegions);
}

TEST_CASE("nested regions inside concurrent regions run inline", "[runtime][thread_pool]") {
  thread_pool pool(3);
  constexpr int kCallers = 3;
  std::vector<int> bad(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < 200; ++r) {
        std::vector<int> cells(9, 0);
        pool.parallel_for(3, [&](int outer, int) {
          const auto me = std::this_thread::get_id();
          pool.parallel_for(3, [&](int inner, int) {
            if (std::this_thread::get_id() == me) cells[outer * 3 + inner] += 1;
          });
        });
        for (int v : cells) {
          if (v != 1) ++bad[c];
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) CHECK(bad[c] == 0);
}

// More callers at once than the pool has region slots (64): the extra ones
// run their regions inline, and every region still gets each share once.
TEST_CASE("more concurrent callers than region slots all complete", "[runtime][thread_pool]") {
  thread_pool pool(2);
  constexpr int kCallers = 80;
  std::atomic<int> ready{0};
  std::vector<int> bad(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      ready.fetch_add(1);
      while (ready.load() < kCallers) std::this_thread::yield();
      for (int r = 0; r < 20; ++r) {
        std::vector<int> runs(2, 0);
        pool.parallel_for(2, [&](int ithr, int) {
          runs[ithr] += 1;
          std::this_thread::yield();  // keep slots busy so that callers overlap
        });
        if (runs[0] != 1 || runs[1] != 1) ++bad[c];
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) CHECK(bad[c] == 0);
}
