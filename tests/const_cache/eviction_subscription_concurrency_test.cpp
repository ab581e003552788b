// Eviction subscriptions under threads: no lock is held while a callback
// runs, so callbacks that remove tensors on two threads at once do not wait
// for each other, and a slow callback holds up no other evicting thread;
// reset() still waits for a call in progress on another thread, and never
// for one on its own.
//
// A deadlock must fail the test, not hang the suite: scenarios that could
// deadlock run in a forked child killed at a deadline
// (tests/support/child_process.hpp), or on a std::async thread waited for
// with wait_for, released afterwards whatever happened.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <string>
#include <thread>

#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "support/child_process.hpp"
#include "test_buffers.hpp"

using const_cache_test::buffer_counter;
using const_cache_test::KiB;
using primcache::constant_key;
using primcache::constant_tensor_cache;
using primcache::eviction_reason;

namespace {

// Deadlines for work that takes milliseconds: they only bound a failure.
constexpr int kDeadlineSeconds = 10;
constexpr auto kPatience = std::chrono::seconds(5);

void fill(constant_tensor_cache& cache, buffer_counter& buffers, const char* name) {
  cache.get_or_add(1, name, KiB, [&] { return buffers.make(KiB, 1); });
}

}  // namespace

TEST_CASE("two subscribers whose callbacks remove tensors on two threads do not deadlock",
          "[const_cache][notification][concurrency]") {
  // T2 is inside L2's callback (having passed L1) and waits until T1 is
  // inside L1's; then each removes another tensor, whose notification visits
  // L1 and L2 again. With a lock held per callback, T1 needs L2's (held by
  // T2) and T2 needs L1's (held by T1).
  const int status = primcache_test::run_in_child(kDeadlineSeconds, [] {
    buffer_counter buffers;
    constant_tensor_cache cache("cpu");
    cache.set_capacity(64);
    for (const char* k : {"a", "b", "a2", "b2"}) fill(cache, buffers, k);
    std::latch t1_in_l1(1);
    std::latch t2_in_l2(1);
    auto l1 = cache.on_eviction(
        [&](const constant_key& k, const primcache::constant_buffer*, eviction_reason) {
          if (k.bytes() == "a") {
            t1_in_l1.count_down();
            cache.remove_if_exist(1, "a2");
          }
        });
    auto l2 = cache.on_eviction(
        [&](const constant_key& k, const primcache::constant_buffer*, eviction_reason) {
          if (k.bytes() == "b") {
            t2_in_l2.count_down();
            t1_in_l1.wait();
            cache.remove_if_exist(1, "b2");
          }
        });
    std::thread t2([&] { cache.remove_if_exist(1, "b"); });
    t2_in_l2.wait();
    std::thread t1([&] { cache.remove_if_exist(1, "a"); });
    t1.join();
    t2.join();
    return cache.tensor_count() == 0 ? 0 : 1;
  });
  INFO("the scenario's child: " << primcache_test::describe_child_status(status));
  CHECK(status == 0);
}

TEST_CASE("a slow callback holds up no eviction on another thread",
          "[const_cache][notification][concurrency]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  fill(cache, buffers, "slow");
  fill(cache, buffers, "other");
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto sub = cache.on_eviction(
      [&](const constant_key& k, const primcache::constant_buffer*, eviction_reason) {
        if (k.bytes() == "slow") {
          entered.set_value();
          released.wait();
        }
      });
  std::thread slow([&] { cache.remove_if_exist(1, "slow"); });
  entered.get_future().wait();
  // The same subscriber is called for "other" while it is still busy with
  // "slow" on the other thread.
  auto other = std::async(std::launch::async, [&] { return cache.remove_if_exist(1, "other"); });
  const bool finished = other.wait_for(kPatience) == std::future_status::ready;
  release.set_value();  // lets everything end, whatever happened above
  slow.join();
  CHECK(finished);
  CHECK(other.get());
  CHECK(cache.tensor_count() == 0);
}

TEST_CASE("reset waits for a call in progress on another thread",
          "[const_cache][notification][concurrency]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  fill(cache, buffers, "slow");
  fill(cache, buffers, "after");
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> returned{false};
  std::atomic<int> calls{0};
  primcache::eviction_subscription sub = cache.on_eviction(
      [&](const constant_key& k, const primcache::constant_buffer*, eviction_reason) {
        calls.fetch_add(1);
        if (k.bytes() == "slow") {
          entered.set_value();
          released.wait();
        }
      });
  std::thread slow([&] { cache.remove_if_exist(1, "slow"); });
  entered.get_future().wait();
  auto resetting = std::async(std::launch::async, [&] {
    sub.reset();
    returned.store(true);
  });
  // Not a proof (a wrong reset could return later), but a reset that does
  // not wait for the call returns at once.
  const bool waited =
      resetting.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout;
  release.set_value();
  const bool done = resetting.wait_for(kPatience) == std::future_status::ready;
  slow.join();
  CHECK(waited);
  CHECK(done);
  cache.remove_if_exist(1, "after");  // no longer heard
  CHECK(calls.load() == 1);
}

TEST_CASE("a callback may reset its own subscription from a nested call",
          "[const_cache][notification][concurrency]") {
  // The callback removes a tensor, so it is called again on the same thread,
  // and resets its subscription there: two calls of its own in progress,
  // none to wait for.
  const int status = primcache_test::run_in_child(kDeadlineSeconds, [] {
    buffer_counter buffers;
    constant_tensor_cache cache("cpu");
    fill(cache, buffers, "outer");
    fill(cache, buffers, "inner");
    fill(cache, buffers, "later");
    int calls = 0;
    primcache::eviction_subscription sub;
    sub = cache.on_eviction(
        [&](const constant_key& k, const primcache::constant_buffer*, eviction_reason) {
          ++calls;
          if (k.bytes() == "outer") cache.remove_if_exist(1, "inner");
          if (k.bytes() == "inner") sub.reset();
        });
    cache.remove_if_exist(1, "outer");
    cache.remove_if_exist(1, "later");
    if (calls != 2) return 1;
    if (sub) return 2;
    return 0;
  });
  INFO("the scenario's child: " << primcache_test::describe_child_status(status));
  CHECK(status == 0);
}
