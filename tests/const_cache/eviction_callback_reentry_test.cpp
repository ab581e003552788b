// What an eviction callback may call back into while the change that caused
// it is being made: flush() and preview_capacity() of the same cache, from a
// callback heard during a capacity change, a policy change or a flush, and
// the same through the set (a kind's preview) and control (flush and
// preview of constant.cpu) while a kind setting or a control setting runs.
//
// A deadlock here would hang the suite: each scenario runs in a forked child
// that is killed at a deadline (tests/support/child_process.hpp), and
// returns 0 when every expectation held, otherwise the number of the first
// that did not (Catch2's assertions do not reach the parent).
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "primcache/const_cache/constant_tensor_caches.hpp"
#include "primcache/control/registry.hpp"
#include "support/child_process.hpp"
#include "test_buffers.hpp"

using const_cache_test::buffer_counter;
using const_cache_test::KiB;
using primcache::cache_policy;
using primcache::capacity_change_effect;
using primcache::constant_key;
using primcache::constant_tensor_cache;
using primcache::constant_tensor_caches;
using primcache::eviction_reason;

namespace {

// Each scenario takes a few milliseconds; a deadlock is killed at this.
constexpr int kDeadlineSeconds = 10;

void check_completes(const std::function<int()>& scenario) {
  const int status = primcache_test::run_in_child(kDeadlineSeconds, scenario);
  INFO("the scenario's child: " << primcache_test::describe_child_status(status)
                                << " (0: every expectation held; 1-99: the expectation that "
                                   "failed; killed: a deadlock)");
  CHECK(status == 0);
}

void fill(constant_tensor_cache& cache, buffer_counter& buffers, const char* name) {
  cache.get_or_add(1, name, KiB, [&] { return buffers.make(KiB, 1); });
}

// What a callback heard, and what it saw when it called back into the cache.
struct heard_log {
  std::vector<std::string> keys;
  std::vector<eviction_reason> reasons;
  std::vector<capacity_change_effect> previews;
};

}  // namespace

TEST_CASE("an eviction callback may flush and preview the cache that is changing",
          "[const_cache][notification]") {
  SECTION("flush() from a callback of a flushing capacity change") {
    check_completes([] {
      buffer_counter buffers;
      constant_tensor_cache cache("cpu");
      cache.set_capacity(1);
      fill(cache, buffers, "a");
      fill(cache, buffers, "b");
      heard_log log;
      auto sub = cache.on_eviction(
          [&](const constant_key& k, const primcache::constant_buffer*, eviction_reason r) {
            log.keys.emplace_back(k.bytes());
            log.reasons.push_back(r);
            if (log.keys.size() == 1) cache.flush();  // not a capacity or policy change
          });
      cache.set_capacity(0);
      if (log.keys.size() != 2) return 1;
      if (log.reasons[0] != eviction_reason::cleared) return 2;
      if (log.reasons[1] != eviction_reason::cleared) return 3;
      if (cache.capacity() != 0 || cache.tensor_count() != 0) return 4;
      return 0;
    });
  }
  SECTION("preview_capacity() from a callback of a flushing capacity change") {
    check_completes([] {
      buffer_counter buffers;
      constant_tensor_cache cache("cpu");
      cache.set_capacity(1);
      fill(cache, buffers, "a");
      heard_log log;
      auto sub = cache.on_eviction(
          [&](const constant_key& k, const primcache::constant_buffer*, eviction_reason) {
            log.keys.emplace_back(k.bytes());
            log.previews.push_back(cache.preview_capacity(5));
            log.previews.push_back(cache.preview_capacity(5, cache_policy::lru));
          });
      cache.set_capacity(0);
      if (log.keys.size() != 1 || log.previews.size() != 2) return 1;
      // The callback runs once the change is made: 0 -> 5 is an increase,
      // which flushes nothing; a policy change flushes (an empty cache).
      if (log.previews[0].flushes) return 2;
      if (!log.previews[1].flushes || log.previews[1].tensors != 0) return 3;
      return 0;
    });
  }
  SECTION("flush() and preview_capacity() from a callback of a policy change") {
    check_completes([] {
      buffer_counter buffers;
      constant_tensor_cache cache("cpu");
      cache.set_capacity(1);
      fill(cache, buffers, "a");
      fill(cache, buffers, "b");
      heard_log log;
      auto sub = cache.on_eviction(
          [&](const constant_key& k, const primcache::constant_buffer*, eviction_reason r) {
            log.keys.emplace_back(k.bytes());
            log.reasons.push_back(r);
            log.previews.push_back(cache.preview_capacity(1));
            if (log.keys.size() == 1) {
              fill(cache, buffers, "c");  // into the new policy's cache
              cache.flush();              // and out again: heard as cleared
            }
          });
      cache.set_capacity(1, cache_policy::lru);
      if (log.keys.size() != 3) return 1;
      for (eviction_reason r : log.reasons) {
        if (r != eviction_reason::cleared) return 2;
      }
      if (cache.policy() != cache_policy::lru || cache.tensor_count() != 0) return 3;
      for (const capacity_change_effect& e : log.previews) {
        if (e.flushes) return 4;  // the same capacity and policy: keeps
      }
      return 0;
    });
  }
  SECTION("flush() from a callback of a flush") {
    check_completes([] {
      buffer_counter buffers;
      constant_tensor_cache cache("cpu");
      fill(cache, buffers, "a");
      fill(cache, buffers, "b");
      heard_log log;
      auto sub = cache.on_eviction(
          [&](const constant_key& k, const primcache::constant_buffer*, eviction_reason) {
            log.keys.emplace_back(k.bytes());
            if (log.keys.size() == 1) {
              fill(cache, buffers, "c");
              cache.flush();
            }
          });
      cache.flush();
      if (log.keys.size() != 3) return 1;
      if (cache.tensor_count() != 0) return 2;
      return 0;
    });
  }
}

TEST_CASE("an eviction callback may flush and preview through the set and control",
          "[const_cache][notification][control]") {
  // The change under way, as each caller makes it.
  const int change = GENERATE(0, 1, 2);
  CAPTURE(change);  // 0: the set's kind setting, 1: control's set_capacity, 2: control's flush
  check_completes([change] {
    buffer_counter buffers;
    primcache::control_registry registry;
    constant_tensor_caches caches(registry);
    constant_tensor_cache& cpu = caches.device("cpu");
    caches.set_capacity("cpu", 1);
    fill(cpu, buffers, "a");
    heard_log log;
    auto sub = cpu.on_eviction(
        [&](const constant_key& k, const primcache::constant_buffer*, eviction_reason) {
          log.keys.emplace_back(k.bytes());
          log.previews.push_back(caches.preview_capacity("cpu", 5));
          const auto p = registry.find_cache("constant.cpu").preview_capacity(5);
          if (p) log.previews.push_back({p->flushes, p->entries, p->bytes});
          registry.flush("constant.cpu");
        });
    switch (change) {
      case 0: caches.set_capacity("cpu", 0); break;
      case 1: registry.set_capacity("constant.cpu", 0); break;
      default: registry.flush("constant.cpu"); break;
    }
    if (log.keys.size() != 1 || log.keys[0] != "a") return 1;
    if (log.previews.size() != 2) return 2;
    if (cpu.tensor_count() != 0) return 3;
    const std::uint64_t expected = change == 2 ? 1 : 0;
    if (cpu.capacity() != expected || caches.capacity("cpu") != expected) return 4;
    return 0;
  });
}
