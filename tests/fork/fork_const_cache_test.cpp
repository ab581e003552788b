// fork() while other threads are inside the constant tensor caches: one
// running an eviction callback (heard from a removal, a flush, or a kind's
// setting, which holds the set's settings lock while its callbacks run), or
// many changing capacities and policies, flushing, subscribing and looking
// tensors up without pause. A fork child has only the forking thread; the
// const_cache atfork handlers hold the caches' locks across the fork and
// make what the vanished threads held or counted the child's own again, so
// the child can unsubscribe, set capacities, flush and look up.
//
// A hang must fail the case, not the suite: every child is waited for with a
// deadline and killed there (tests/support/child_process.hpp). A child
// returns 0 when every expectation held, otherwise the number of the first
// that did not (Catch2's assertions do not reach the parent).
#include <catch2/catch.hpp>

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "const_cache/test_buffers.hpp"
#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "primcache/const_cache/constant_tensor_caches.hpp"
#include "primcache/control/registry.hpp"
#include "support/child_process.hpp"
#include "support/sanitizers.hpp"

using const_cache_test::buffer_counter;
using const_cache_test::KiB;
using primcache::cache_policy;
using primcache::constant_buffer;
using primcache::constant_key;
using primcache::constant_tensor_cache;
using primcache::constant_tensor_caches;
using primcache::eviction_reason;

namespace {

// A gate a test opens once; waiters block until then.
class gate {
 public:
  void wait() { open_.wait(); }
  void open() { promise_.set_value(); }

 private:
  std::promise<void> promise_;
  std::shared_future<void> open_ = promise_.get_future().share();
};

// Everything a child does with the caches after the fork: unsubscribe the
// parent's subscription, look up, set capacities and policies (the cache's
// and the kind's), flush (directly and through control), subscribe anew and
// hear a flush, and make a device. 0 when all went as expected.
int use_everything(constant_tensor_caches& caches, primcache::control_registry& registry,
                   primcache::eviction_subscription& parents, buffer_counter& buffers) {
  parents.reset();  // waited for the parent thread's call for ever before the fix
  if (parents) return 1;
  constant_tensor_cache& cache = caches.device("cpu");
  for (int k = 0; k < 16; ++k) {
    const std::string name = "child" + std::to_string(k);
    const auto seed = static_cast<unsigned char>(k + 1);
    auto r = cache.get_or_add(7, name, KiB, [&] { return buffers.make(KiB, seed); });
    if (r.value == nullptr || !const_cache_test::holds(*r.value, seed)) return 2;
  }
  cache.set_capacity(8);                              // the cache's capacity lock
  cache.set_capacity(8, cache_policy::lru);           // a policy change
  caches.set_capacity("cpu", 16, cache_policy::lru);  // the set's settings lock
  caches.set_capacity("gpu", 4, cache_policy::lru);   // every gpu device
  if (caches.capacity("cpu") != 16 || cache.capacity() != 16) return 3;
  if (cache.policy() != cache_policy::lru) return 4;
  (void)cache.get_or_add(7, "kept", KiB, [&] { return buffers.make(KiB, 9); });
  std::atomic<int> heard{0};
  {
    auto sub =
        cache.on_eviction([&](const constant_key&, const constant_buffer*, eviction_reason r) {
          if (r == eviction_reason::cleared) heard.fetch_add(1);
        });
    cache.flush();  // "kept", and whatever the parent's threads left
    if (heard.load() < 1 || cache.tensor_count() != 0) return 5;
  }
  (void)cache.get_or_add(7, "again", KiB, [&] { return buffers.make(KiB, 10); });
  registry.flush("constant.cpu");
  if (cache.tensor_count() != 0) return 6;
  constant_tensor_cache& made = caches.device("gpu.7");  // the set's map and control's
  if (made.capacity() != 4 || made.policy() != cache_policy::lru) return 7;
  if (caches.find("gpu.7") != &made) return 8;
  return 0;
}

void check_child(int status) {
  INFO("the child: " << primcache_test::describe_child_status(status)
                     << " (0: every expectation held; 1-99: the expectation that failed; "
                        "killed: a hang)");
  CHECK(status == 0);
}

}  // namespace

TEST_CASE("a fork child unsubscribes and uses the caches while a parent thread is in a callback",
          "[fork][const_cache]") {
  primcache::control_registry registry;
  buffer_counter buffers;
  constant_tensor_caches caches(registry);
  constant_tensor_cache& cache = caches.device("cpu");
  (void)caches.device("gpu.0");
  caches.set_capacity("cpu", 4);
  (void)cache.get_or_add(1, "a", KiB, [&] { return buffers.make(KiB, 1); });

  gate inside;
  gate release;
  std::atomic<int> calls{0};
  auto sub = cache.on_eviction([&](const constant_key&, const constant_buffer*, eviction_reason) {
    if (calls.fetch_add(1) == 0) {
      inside.open();
      release.wait();
    }
  });

  std::thread hearer;
  SECTION("heard from a removal (no lock of the cache held)") {
    hearer = std::thread([&] { cache.remove_if_exist(1, "a"); });
  }
  SECTION("heard from a flush (after the capacity lock is released)") {
    hearer = std::thread([&] { cache.flush(); });
  }
  SECTION("heard from a kind's setting (the set's settings lock held)") {
    hearer = std::thread([&] { caches.set_capacity("cpu", 2); });  // a decrease: flushes
  }
  inside.wait();

  const int status = primcache_test::run_in_child(
      20, [&] { return use_everything(caches, registry, sub, buffers); });
  release.open();
  hearer.join();
  check_child(status);
  // The parent's subscription is untouched: it still hears.
  (void)cache.get_or_add(1, "b", KiB, [&] { return buffers.make(KiB, 2); });
  const int before = calls.load();
  CHECK(cache.remove_if_exist(1, "b"));
  CHECK(calls.load() == before + 1);
}

TEST_CASE("a fork child made from inside a kind setting's callback finishes that setting",
          "[fork][const_cache]") {
  // The forking thread holds the set's settings lock (its kind setting is
  // hearing its callbacks): the child must neither wait for that lock nor
  // take it from its holder, which releases it when the setting returns.
  primcache::control_registry registry;
  buffer_counter buffers;
  constant_tensor_caches caches(registry);
  constant_tensor_cache& cache = caches.device("cpu");
  caches.set_capacity("cpu", 4);
  (void)cache.get_or_add(1, "a", KiB, [&] { return buffers.make(KiB, 1); });
  pid_t child = -1;
  auto sub = cache.on_eviction([&](const constant_key&, const constant_buffer*, eviction_reason) {
    if (child == -1) child = ::fork();
  });
  caches.set_capacity("cpu", 2);  // a decrease: flushes, and the callback forks
  if (child == 0) {
    int code = 0;
    try {
      sub.reset();
      caches.set_capacity("cpu", 8);
      (void)cache.get_or_add(1, "b", KiB, [&] { return buffers.make(KiB, 2); });
      cache.flush();
      code = caches.capacity("cpu") == 8 && cache.tensor_count() == 0 ? 0 : 1;
    } catch (...) {
      code = 2;
    }
    ::_exit(code);
  }
  REQUIRE(child > 0);
  check_child(primcache_test::wait_child(child, 20));
  CHECK(caches.capacity("cpu") == 2);
}

// Threads that change capacities and policies, flush, subscribe and
// unsubscribe, make devices and look up many keys without pause hold the
// caches' locks (and are inside callbacks) much of the time; a fork in that
// moment gave the child a lock held for ever. Not under AddressSanitizer:
// GCC 12's and clang 15's do not lock their allocators around fork(), so a child forked while
// a churning thread allocates can hang in its own first allocation, whatever
// the caches do (fork_service_threads_test.cpp).
#if !PRIMCACHE_TEST_ASAN
TEST_CASE("fork children use the caches while other threads churn them", "[fork][const_cache]") {
  primcache::control_registry registry;
  buffer_counter buffers;
  constant_tensor_caches caches(registry);
  constant_tensor_cache& cache = caches.device("cpu");
  (void)caches.device("gpu.0");
  caches.set_capacity("cpu", 1, cache_policy::lru);

  // The test's own subscription, which every child resets: the churning
  // threads are inside its callback much of the time.
  std::atomic<std::uint64_t> heard{0};
  auto sub = cache.on_eviction([&](const constant_key&, const constant_buffer*, eviction_reason) {
    for (int i = 0; i < 200; ++i) heard.fetch_add(1, std::memory_order_relaxed);
  });

  std::atomic<bool> stop{false};
  std::vector<std::thread> churn;
  churn.emplace_back([&] {  // capacities, policies and flushes, of the cache and the kind
    const cache_policy policies[] = {cache_policy::lru, cache_policy::no_evict, cache_policy::cost};
    for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      cache.set_capacity(i % 3, policies[(i / 3) % 3]);
      caches.set_capacity("gpu", i % 4);
      if (i % 5 == 0) cache.flush();
      (void)cache.preview_capacity(1);
    }
  });
  churn.emplace_back([&] {  // the kind's settings (its settings lock held through callbacks)
    for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      caches.set_capacity("cpu", 1 + i % 2, cache_policy::lru);
    }
  });
  churn.emplace_back([&] {  // subscriptions
    std::atomic<std::uint64_t> calls{0};
    while (!stop.load(std::memory_order_relaxed)) {
      auto s = cache.on_eviction(
          [&](const constant_key&, const constant_buffer*, eviction_reason) { ++calls; });
      auto t = cache.on_eviction(
          [&](const constant_key&, const constant_buffer*, eviction_reason) { ++calls; });
      s.reset();
    }
  });
  for (int t = 0; t < 2; ++t) {
    churn.emplace_back([&, t] {  // lookups of many keys, and removals
      for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        const std::string key = std::to_string(i % 512);
        (void)cache.get_or_add(t, key, 64 * KiB, [&] { return buffers.make(64 * KiB, 3); });
        if (i % 7 == 0) cache.remove_if_exist(t, key);
      }
    });
  }
  // A few devices only: the atfork prepare handlers hold five locks per
  // device's cache (three backing caches' and two of const_cache's), and
  // ThreadSanitizer's deadlock detector stops the process when one thread
  // holds more than 64 locks.
  churn.emplace_back([&] {  // the set's map: new devices, lookups, control's flushes
    for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      (void)caches.device("gpu." + std::to_string(1 + i % 4));
      (void)caches.devices();
      registry.flush("constant.gpu.0");
    }
  });

  // Let every thread get going before the first fork.
  while (heard.load() < 1000) std::this_thread::yield();
  const std::vector<std::string> failures = primcache_test::run_in_children(
      64, 10, [&](int) { return use_everything(caches, registry, sub, buffers); });
  stop.store(true);
  for (auto& t : churn) t.join();
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
}
#endif
