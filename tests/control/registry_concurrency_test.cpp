// Races between registration, unregistration, listing and calls through the
// registry. Worker threads record what they saw in atomics and plain per-thread
// data; the main thread asserts after joining (Catch2 is not thread-safe).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"

using primcache::capacity_unit;
using primcache::control_registry;
using primcache::status;

namespace {

struct probe_stats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t evictions = 0;
};

// A thread-safe cache that counts every call made into it after its owner
// declared it retired (which must never happen) and how many calls are inside
// it at a time.
class probe_cache {
 public:
  std::uint64_t capacity() const {
    enter_and_leave();
    return capacity_.load(std::memory_order_relaxed);
  }
  void set_capacity(std::uint64_t n) {
    inside_.fetch_add(1);
    check_alive();
    if (slow_) std::this_thread::sleep_for(std::chrono::microseconds(50));
    capacity_.store(n, std::memory_order_relaxed);
    check_alive();
    inside_.fetch_sub(1);
  }
  std::uint64_t size() const {
    enter_and_leave();
    return 0;
  }
  probe_stats stats() const {
    enter_and_leave();
    return {};
  }
  void clear() { enter_and_leave(); }

  // The owner calls this after its registration's reset() has returned.
  void retire() { retired_.store(true); }
  int inside() const { return inside_.load(); }
  int calls_after_retirement() const { return late_calls_.load(); }
  void make_slow() { slow_ = true; }

 private:
  void enter_and_leave() const {
    inside_.fetch_add(1);
    check_alive();
    inside_.fetch_sub(1);
  }
  void check_alive() const {
    if (retired_.load()) late_calls_.fetch_add(1);
  }

  std::atomic<std::uint64_t> capacity_{0};
  mutable std::atomic<int> inside_{0};
  mutable std::atomic<int> late_calls_{0};
  std::atomic<bool> retired_{false};
  bool slow_ = false;  // set before registration
};

template <typename F>
status status_of(F&& f) {
  try {
    f();
  } catch (const primcache::error& e) {
    return e.code();
  }
  return status::success;
}

}  // namespace

TEST_CASE("threads register and unregister distinct caches while others list and turn them",
          "[control][concurrency]") {
  constexpr int kThreads = 4;
  constexpr int kRounds = 150;
  control_registry registry;

  struct worker_result {
    int late_calls = 0;         // calls that reached a cache after its unregistration
    int own_failures = 0;       // set_capacity on its own, registered cache that failed
    int unexpected_status = 0;  // failures other than not_found on other threads' caches
    int listed_own_missing = 0;
  };
  std::vector<worker_result> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      worker_result& r = results[static_cast<std::size_t>(t)];
      for (int round = 0; round < kRounds; ++round) {
        const std::string name = "t" + std::to_string(t) + ".c" + std::to_string(round);
        auto cache = std::make_unique<probe_cache>();
        auto reg = registry.register_cache(name, *cache, capacity_unit::entries);
        if (status_of([&] { registry.set_capacity(name, 10); }) != status::success) {
          ++r.own_failures;
        }
        bool listed = false;
        for (const auto& info : registry.list_caches()) listed = listed || info.name == name;
        if (!listed) ++r.listed_own_missing;
        // Turn the neighbours' caches, which may come and go meanwhile.
        const int other = (t + 1) % kThreads;
        for (int k = round - 1; k <= round + 1; ++k) {
          const std::string theirs = "t" + std::to_string(other) + ".c" + std::to_string(k);
          const status s = status_of([&] {
            registry.set_capacity(theirs, 5);
            registry.flush(theirs);
            (void)registry.find_cache(theirs).info();
          });
          if (s != status::success && s != status::not_found) ++r.unexpected_status;
        }
        reg.reset();
        cache->retire();
        r.late_calls += cache->calls_after_retirement();
        cache.reset();  // destroyed: a late call would be a use after free
      }
    });
  }
  for (auto& th : threads) th.join();

  for (const auto& r : results) {
    CHECK(r.late_calls == 0);
    CHECK(r.own_failures == 0);
    CHECK(r.unexpected_status == 0);
    CHECK(r.listed_own_missing == 0);
  }
  CHECK(registry.list_caches().empty());
}

TEST_CASE("unregistration returns only when no call is inside the cache, and none starts after",
          "[control][concurrency]") {
  constexpr int kRepeats = 20;
  constexpr int kCallers = 3;
  control_registry registry;

  struct round_result {
    int inside_when_unregistered = 0;
    int late_calls = 0;
    int unexpected_status = 0;
    long successful_calls = 0;
  };
  std::vector<round_result> rounds(kRepeats);
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    probe_cache cache;
    cache.make_slow();
    auto reg = registry.register_cache("contended", cache);
    const primcache::cache_handle handle = reg.handle();
    std::atomic<bool> stop{false};
    std::atomic<int> started{0};
    std::vector<long> successes(kCallers, 0);
    std::vector<int> unexpected(kCallers, 0);
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        started.fetch_add(1);
        while (!stop.load()) {
          // Alternate between the name (which disappears) and a held handle
          // (which outlives the registration).
          const status s = status_of([&] {
            if (c % 2 == 0) {
              registry.set_capacity("contended", 7);
            } else {
              handle.set_capacity(7);
            }
          });
          if (s == status::success) {
            ++successes[static_cast<std::size_t>(c)];
          } else if (s != status::not_found) {
            ++unexpected[static_cast<std::size_t>(c)];
          }
        }
      });
    }
    while (started.load() < kCallers) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    reg.reset();
    round_result& r = rounds[static_cast<std::size_t>(repeat)];
    r.inside_when_unregistered = cache.inside();
    cache.retire();
    // Callers keep trying for a while: every attempt must now fail.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    stop.store(true);
    for (auto& th : callers) th.join();
    r.late_calls = cache.calls_after_retirement();
    for (int c = 0; c < kCallers; ++c) {
      r.successful_calls += successes[static_cast<std::size_t>(c)];
      r.unexpected_status += unexpected[static_cast<std::size_t>(c)];
    }
  }

  long total_successes = 0;
  for (const auto& r : rounds) {
    CHECK(r.inside_when_unregistered == 0);
    CHECK(r.late_calls == 0);
    CHECK(r.unexpected_status == 0);
    total_successes += r.successful_calls;
  }
  CHECK(total_successes > 0);  // the calls did race with the unregistrations
}

TEST_CASE("of threads registering one name at once, exactly one succeeds",
          "[control][concurrency]") {
  constexpr int kThreads = 4;
  constexpr int kRepeats = 50;
  control_registry registry;
  std::vector<int> winners(kRepeats, 0);
  std::vector<int> unexpected(kRepeats, 0);
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    std::vector<probe_cache> caches(kThreads);
    std::vector<primcache::cache_registration> regs(kThreads);
    std::vector<status> outcome(kThreads, status::success);
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const auto i = static_cast<std::size_t>(t);
        while (!go.load()) std::this_thread::yield();
        outcome[i] = status_of([&] { regs[i] = registry.register_cache("same", caches[i]); });
      });
    }
    go.store(true);
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      const auto i = static_cast<std::size_t>(t);
      if (outcome[i] == status::success) {
        ++winners[static_cast<std::size_t>(repeat)];
      } else if (outcome[i] != status::already_exists) {
        ++unexpected[static_cast<std::size_t>(repeat)];
      }
    }
    regs.clear();  // unregisters the winner before the caches go
  }
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    CHECK(winners[static_cast<std::size_t>(repeat)] == 1);
    CHECK(unexpected[static_cast<std::size_t>(repeat)] == 0);
  }
  CHECK(registry.list_caches().empty());
}

TEST_CASE("switches flip by name while owners read them and others come and go",
          "[control][concurrency]") {
  constexpr int kFlips = 2000;
  control_registry registry;
  auto tune = registry.register_switch("tune", "", false);
  std::atomic<bool> finished{false};

  // The owner's hot path reads only. Once it sees `finished`, set after the
  // last flip, the switch must read on (release store, acquire load).
  bool final_state = false;
  std::thread owner([&] {
    for (;;) {
      const bool done = finished.load();
      const bool on = tune.on();
      if (done) {
        final_state = on;
        return;
      }
    }
  });
  // Churn on other switch names in parallel.
  int churn_failures = 0;
  std::thread churn([&] {
    for (int i = 0; i < 300; ++i) {
      const status s = status_of([&] {
        auto other = registry.register_switch("churn." + std::to_string(i % 3), "", true);
        (void)registry.list_switches();
        registry.set_switch(other.name(), false);
      });
      if (s != status::success) ++churn_failures;
    }
  });
  int flip_failures = 0;
  for (int i = 0; i < kFlips; ++i) {
    if (status_of([&] { registry.set_switch("tune", i % 2 == 0); }) != status::success) {
      ++flip_failures;
    }
  }
  registry.set_switch("tune", true);
  finished.store(true);
  churn.join();
  owner.join();

  CHECK(flip_failures == 0);
  CHECK(churn_failures == 0);
  CHECK(final_state);
  CHECK(registry.get_switch("tune"));
  CHECK(registry.list_switches().size() == 1);
}
