// Threads creating the same and different primitives with a persistent
// cache attached, while another thread empties the in-memory primitive
// cache and attaches and detaches stores: every result is right, nothing
// is lost or torn, the queue drains. Runs under ThreadSanitizer in CI.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "cases.hpp"
#include "primcache/persist/blob_store.hpp"
#include "primcache/runtime/persistent_cache.hpp"

using namespace primcache;
using namespace primcache::test;

TEST_CASE("threads create through the persistent cache while it is emptied and swapped",
          "[persistent][concurrency]") {
  temp_dir dir_a, dir_b;
  // Each thread's cases, with their expected results computed up front.
  constexpr int kThreads = 4;
  constexpr int kRounds = 4;
  std::vector<std::vector<a_case>> cases(kThreads);
  std::vector<std::vector<std::vector<std::uint8_t>>> want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    // One shared shape (the same key on every thread), one of the thread's own.
    cases[t] = {matmul_case(11), matmul_case(13 + 2 * t), reorder_case()};
    for (const a_case& c : cases[t]) want[t].push_back(run(primitive(c.make_pd()), c));
  }
  set_persistent_cache(open_persistent_cache_dir(dir_a.path(), 64));
  empty_primitive_cache();  // the first creation of each key asks the store

  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        for (std::size_t i = 0; i < cases[t].size(); ++i) {
          if (run(primitive(cases[t][i].make_pd()), cases[t][i]) != want[t][i]) ++wrong;
        }
      }
    });
  }
  std::thread churn([&] {
    int n = 0;
    while (!stop.load()) {
      empty_primitive_cache();
      // Now and then another store: writes a creator queues for the old one
      // after it was detached are dropped, so swapping in a tight loop
      // would leave nothing ever written.
      if (++n % 8 == 0) {
        set_persistent_cache(open_persistent_cache_dir(n % 16 ? dir_b.path() : dir_a.path(), 64));
      }
      get_persistent_cache_stats();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  for (auto& th : threads) th.join();
  stop = true;
  churn.join();
  CHECK(wrong == 0);
  flush_persistent_cache_writes();
  CHECK(get_persistent_cache_stats().queue_depth == 0);
  const auto s = get_persistent_cache_stats();
  CHECK(s.writes_failed == 0);
  CHECK(s.rejected == 0);
  CHECK(s.hits + s.misses > 0);
  detach_persistent_cache();
}
