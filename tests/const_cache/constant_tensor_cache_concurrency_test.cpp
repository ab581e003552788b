// constant_tensor_cache under threads: one computation per key however many
// threads race for it, a failure reaching every waiter, get_size and the
// other readers never waiting for a computation in flight, subscriptions
// reset while evictions run, and a stress run over shared and private keys
// with capacities, policies and flushes changing underneath.
//
// Catch2's assertions are not thread-safe: worker threads record into plain
// per-thread data and the main thread asserts after joining them. Nothing
// here sleeps for correctness: threads wait for what the code under test
// must make happen (a counter reaching a value, a future set).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "test_buffers.hpp"

using const_cache_test::buffer_counter;
using const_cache_test::holds;
using const_cache_test::KiB;
using primcache::cache_policy;
using primcache::constant_key;
using primcache::constant_tensor_cache;
using primcache::eviction_reason;
using primcache::lookup_outcome;

namespace {

// See tests/cache/concurrent_cache_concurrency_test.cpp: waiters of a failed
// creation share one exception object, whose reference count libstdc++
// keeps with atomics TSan cannot see. Reads of it go through this function,
// and only races whose stacks include it are suppressed.
[[gnu::noinline]] std::string shared_exception_message(const std::exception& e) {
  return e.what();
}

}  // namespace

extern "C" const char* __tsan_default_suppressions() {
  return "race:shared_exception_message\n";
}

namespace {

template <typename F>
void spin_until(F done) {
  while (!done()) std::this_thread::yield();
}

constexpr int kThreads = 8;

}  // namespace

TEST_CASE("threads racing for one key share one computation", "[const_cache][concurrency]") {
  for (int round = 0; round < 20; ++round) {
    buffer_counter buffers;
    constant_tensor_cache cache("cpu");
    const constant_key key(1, "weights");
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<int> runs{0};
    std::vector<constant_tensor_cache::buffer_ptr> got(kThreads);
    std::vector<lookup_outcome> outcomes(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto r = cache.get_or_add(key, 4 * KiB, [&] {
          runs.fetch_add(1);
          released.wait();
          return buffers.make(4 * KiB, 0x11);
        });
        got[t] = r.value;
        outcomes[t] = r.outcome;
      });
    }
    // Everyone but the computing thread is waiting before it may finish.
    spin_until([&] { return cache.stats().waits == kThreads - 1; });
    CHECK(cache.get_size() == 0);  // in flight: weighs nothing yet
    release.set_value();
    for (auto& th : threads) th.join();
    CHECK(runs.load() == 1);
    int misses = 0;
    for (int t = 0; t < kThreads; ++t) {
      CHECK(got[t] == got[0]);
      misses += outcomes[t] == lookup_outcome::miss ? 1 : 0;
    }
    CHECK(misses == 1);
    CHECK(holds(*got[0], 0x11));
    CHECK(cache.get_size() == 4 * KiB);
  }
}

TEST_CASE("a throwing computation reaches every waiter and leaves nothing",
          "[const_cache][concurrency]") {
  for (int round = 0; round < 20; ++round) {
    buffer_counter buffers;
    constant_tensor_cache cache("cpu");
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          cache.get_or_add(1, "weights", KiB, [&]() -> std::shared_ptr<primcache::constant_buffer> {
            released.wait();
            throw std::runtime_error("reorder failed");
          });
        } catch (const std::exception& e) {
          errors[t] = shared_exception_message(e);
        }
      });
    }
    spin_until([&] { return cache.stats().waits == kThreads - 1; });
    release.set_value();
    for (auto& th : threads) th.join();
    for (const std::string& e : errors) CHECK(e == "reorder failed");
    CHECK(cache.tensor_count() == 0);
    CHECK(cache.get_size() == 0);
    CHECK(cache.stats().failures == 1);
    auto again = cache.get_or_add(1, "weights", KiB, [&] { return buffers.make(KiB, 2); });
    CHECK(again.outcome == lookup_outcome::miss);
  }
}

TEST_CASE("readers never wait for a computation in flight", "[const_cache][concurrency]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  cache.set_capacity(64, cache_policy::lru);
  cache.get_or_add(1, "ready", KiB, [&] { return buffers.make(KiB, 1); });
  std::promise<void> release;
  std::promise<void> started;
  std::thread creator([&] {
    cache.get_or_add(1, "slow", 2 * KiB, [&] {
      started.set_value();
      release.get_future().wait();
      return buffers.make(2 * KiB, 2);
    });
  });
  started.get_future().wait();
  // Each of these would hang (and the test time out) if it waited for the
  // computation, which only the release below lets finish.
  CHECK(cache.get_size() == KiB);
  CHECK(cache.tensor_count() == 2);
  CHECK(cache.stats().misses == 2);
  CHECK(cache.capacity() == 64);
  auto preview = cache.preview_capacity(32);
  CHECK(preview.tensors == 2);
  CHECK(preview.bytes == KiB);
  CHECK(cache.get_or_add(1, "ready", KiB, [&] { return buffers.make(KiB, 3); }).outcome ==
        lookup_outcome::hit);
  CHECK(cache.remove_if_exist(1, "ready"));
  release.set_value();
  creator.join();
  CHECK(cache.get_size() == 2 * KiB);
}

TEST_CASE("an in-flight tensor flushed by a decrease still reaches its caller",
          "[const_cache][concurrency]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  cache.set_capacity(64);
  std::promise<void> release;
  std::promise<void> started;
  std::vector<std::pair<bool, eviction_reason>> heard;
  auto sub = cache.on_eviction([&](const constant_key&, const primcache::constant_buffer* b,
                                   eviction_reason r) { heard.emplace_back(b != nullptr, r); });
  constant_tensor_cache::buffer_ptr got;
  std::thread creator([&] {
    got = cache
              .get_or_add(1, "slow", KiB,
                          [&] {
                            started.set_value();
                            release.get_future().wait();
                            return buffers.make(KiB, 9);
                          })
              .value;
  });
  started.get_future().wait();
  cache.set_capacity(32);  // flushes the entry in flight (the listener runs here)
  release.set_value();
  creator.join();
  REQUIRE(heard.size() == 1);
  CHECK_FALSE(heard[0].first);  // it left before its buffer existed
  CHECK(heard[0].second == eviction_reason::cleared);
  CHECK(holds(*got, 9));
  CHECK(cache.tensor_count() == 0);  // not kept
}

TEST_CASE("a reset subscription is never called again, whatever runs meanwhile",
          "[const_cache][concurrency]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  cache.set_capacity(1, cache_policy::lru);
  std::atomic<bool> stop{false};
  std::thread evictor([&] {
    for (std::uint64_t i = 0; !stop.load(); ++i) {
      cache.get_or_add(1, std::to_string(i), 300 * KiB, [&] { return buffers.make(300 * KiB, 0); });
    }
  });
  for (int round = 0; round < 50; ++round) {
    auto alive = std::make_unique<std::atomic<int>>(0);
    std::atomic<int>* calls = alive.get();
    auto sub = cache.on_eviction([calls](auto&&...) { calls->fetch_add(1); });
    spin_until([&] { return calls->load() > 0; });
    sub.reset();
    // The callback is not running and will not run: its state may go.
    alive.reset();
  }
  stop.store(true);
  evictor.join();
  SUCCEED("no callback touched freed state (ASan/TSan would say)");
}

TEST_CASE("many threads on shared and private keys, with settings changing",
          "[const_cache][concurrency][stress]") {
  buffer_counter buffers;
  constexpr int kCalls = 20'000;
  constexpr int kSharedKeys = 16;
  constexpr int kPrivateKeys = 16;
  std::vector<std::uint64_t> calls(kThreads, 0);
  std::vector<std::uint64_t> wrong(kThreads, 0);
  std::vector<std::uint64_t> failures_seen(kThreads, 0);
  {
    constant_tensor_cache cache("gpu.0");
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> thrown{0};
    std::atomic<std::uint64_t> heard{0};
    auto sub = cache.on_eviction([&](auto&&...) { heard.fetch_add(1, std::memory_order_relaxed); });
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kCalls; ++i) {
          // Half the calls on keys every thread shares, half on the
          // thread's own; each key's buffer is filled with its own byte.
          const bool shared = (i & 1) == 0;
          const int k = shared ? (i / 2) % kSharedKeys
                               : kSharedKeys + t * kPrivateKeys + (i / 2) % kPrivateKeys;
          const auto seed = static_cast<unsigned char>(k % 251);
          const std::size_t size = (1 + k % 4) * KiB;
          ++calls[t];
          try {
            auto r = cache.get_or_add(7, std::to_string(k), size, [&] {
              if (i % 97 == 0) {
                thrown.fetch_add(1, std::memory_order_relaxed);
                throw std::runtime_error("injected");
              }
              return buffers.make(size, seed);
            });
            if (r.value->size() != size || !holds(*r.value, seed)) ++wrong[t];
          } catch (const std::exception& e) {
            if (shared_exception_message(e) != "injected") ++wrong[t];
            ++failures_seen[t];
          }
        }
      });
    }
    std::thread turner([&] {
      const cache_policy policies[] = {cache_policy::lru, cache_policy::no_evict,
                                       cache_policy::cost};
      for (int i = 0; !stop.load(); ++i) {
        const std::uint64_t mb = static_cast<std::uint64_t>(i % 4);  // 0..3 MB
        if (i % 16 == 15) {
          cache.set_capacity(mb, policies[(i / 16) % 3]);
        } else if (i % 5 == 0) {
          cache.flush();
        } else if (i % 7 == 0) {
          cache.remove_if_exist(7, std::to_string(i % kSharedKeys));
        } else {
          cache.set_capacity(mb);
        }
        (void)cache.get_size();
        (void)cache.preview_capacity(mb);
        std::this_thread::yield();
      }
    });
    for (auto& th : threads) th.join();
    stop.store(true);
    turner.join();

    const auto s = cache.stats();
    std::uint64_t total = 0;
    for (auto c : calls) total += c;
    CHECK(s.hits + s.misses + s.waits == total);
    // Every injected failure was counted, and reached at least its caller.
    CHECK(s.failures == thrown.load());
    std::uint64_t seen = 0;
    for (auto f : failures_seen) seen += f;
    CHECK(seen >= thrown.load());
    const primcache::cache_occupancy o{cache.tensor_count(), cache.get_size(), 0};
    CHECK((cache.capacity() == constant_tensor_cache::unlimited ||
           o.weight <= (cache.capacity() << 20)));
    (void)heard;
  }
  for (int t = 0; t < kThreads; ++t) {
    CHECK(wrong[t] == 0);
  }
  // Every buffer went back to its free function: the cache and its holders
  // are gone.
  CHECK(buffers.live.load() == 0);
}
