// Kind settings under threads: a setting that keeps the policy — the set's
// set_capacity(kind, mb), control's set_capacity on the kind's own cache
// (constant.cpu), a parsed entry without a policy — keeps the policy in
// force when it is applied, never one read before another thread's setting
// changed it.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <thread>

#include "primcache/const_cache/capacity_config.hpp"
#include "primcache/const_cache/constant_tensor_caches.hpp"
#include "primcache/control/registry.hpp"
#include "test_buffers.hpp"

using const_cache_test::buffer_counter;
using const_cache_test::KiB;
using primcache::cache_policy;
using primcache::constant_key;
using primcache::constant_tensor_cache;
using primcache::constant_tensor_caches;
using primcache::eviction_reason;

TEST_CASE("a kind setting that keeps the policy never reverts a policy set meanwhile",
          "[const_cache][kinds][concurrency]") {
  // 0: caches.set_capacity("cpu", 10); 1: control's set_capacity of
  // constant.cpu; 2: apply() of "cpu:10".
  const int keeper = GENERATE(0, 1, 2);
  CAPTURE(keeper);
  // The interleaving that lost a policy: T0's kind setting is held inside
  // (its eviction callback waits); T2, which sets no_evict, waits for T0;
  // T1, which keeps the policy, comes last. Once T0 ends, T2 and T1 apply
  // in either order. T1 read the policy (lru) before T2's setting, then
  // applied it after: lru again. Kept, the policy must be read where the
  // settings are serialized.
  //
  // The sleeps only order T2 before T1 at the lock so that the old code
  // fails (a lock hands over to its first waiter); whatever order they
  // take, every expectation below holds for a correct set.
  for (int round = 0; round < 5; ++round) {
    buffer_counter buffers;
    primcache::control_registry registry;
    constant_tensor_caches caches(registry);
    constant_tensor_cache& cpu = caches.device("cpu");
    caches.set_capacity("cpu", 64, cache_policy::lru);
    cpu.get_or_add(1, "held", KiB, [&] { return buffers.make(KiB, 1); });
    std::promise<void> entered;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    auto sub = cpu.on_eviction(
        [&](const constant_key& k, const primcache::constant_buffer*, eviction_reason) {
          if (k.bytes() == "held") {
            entered.set_value();
            released.wait();
          }
        });
    std::thread t0([&] { caches.set_capacity("cpu", 32); });  // a decrease: flushes "held"
    entered.get_future().wait();
    std::thread t2([&] { caches.set_capacity("cpu", 20, cache_policy::no_evict); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::thread t1([&] {
      switch (keeper) {
        case 0: caches.set_capacity("cpu", 10); break;
        case 1: registry.set_capacity("constant.cpu", 10); break;
        default: caches.apply(primcache::parse_constant_capacity("cpu:10")); break;
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release.set_value();
    t0.join();
    t2.join();
    t1.join();
    CAPTURE(round);
    CHECK(caches.policy("cpu") == cache_policy::no_evict);
    CHECK(cpu.policy() == cache_policy::no_evict);
    const std::uint64_t mb = caches.capacity("cpu");
    CHECK((mb == 10 || mb == 20));  // T1 last, or T2 last
    CHECK(cpu.capacity() == mb);
  }
}
