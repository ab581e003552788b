// constant_tensor_cache on one thread: lookups, the RFC's flush rules,
// refusals when full, each policy's victim, handles that outlive eviction,
// eviction notifications and every failure path.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "test_buffers.hpp"

using const_cache_test::buffer_counter;
using const_cache_test::holds;
using const_cache_test::KiB;
using const_cache_test::MiB;
using primcache::cache_policy;
using primcache::constant_key;
using primcache::constant_tensor_cache;
using primcache::eviction_reason;
using primcache::lookup_outcome;

namespace {

// Looks `name` up (backend 1) with a tensor of `size` bytes filled with `seed`.
primcache::lookup_result<constant_tensor_cache::buffer_ptr> lookup(constant_tensor_cache& cache,
                                                                   buffer_counter& buffers,
                                                                   const std::string& name,
                                                                   std::size_t size,
                                                                   unsigned char seed = 7) {
  return cache.get_or_add(1, name, size, [&] { return buffers.make(size, seed); });
}

bool cached(constant_tensor_cache& cache, buffer_counter& buffers, const std::string& name) {
  int runs = 0;
  cache.get_or_add(1, name, 1, [&] {
    ++runs;
    return buffers.make(1, 0);
  });
  // The probe itself may have been kept; take it out again.
  if (runs == 1) cache.remove_if_exist(1, name);
  return runs == 0;
}

}  // namespace

TEST_CASE("a constant tensor is created once and then hit", "[const_cache][lookup]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  auto first = lookup(cache, buffers, "w", 4 * KiB, 3);
  CHECK(first.outcome == lookup_outcome::miss);
  auto second = lookup(cache, buffers, "w", 4 * KiB, 9);
  CHECK(second.outcome == lookup_outcome::hit);
  CHECK(second.value == first.value);
  CHECK(holds(*second.value, 3));
  CHECK(cache.get_size() == 4 * KiB);
  CHECK(cache.tensor_count() == 1);
  const auto s = cache.stats();
  CHECK(s.hits == 1);
  CHECK(s.misses == 1);
  CHECK(s.refusals == 0);
  CHECK(cache.device() == "cpu");
}

TEST_CASE("keys of different backends never collide", "[const_cache][key]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  const constant_key a(1, "same bytes");
  const constant_key b(2, "same bytes");
  CHECK_FALSE(a == b);
  CHECK(a == constant_key(1, "same bytes"));
  CHECK(a.hash() == constant_key(1, "same bytes").hash());
  auto ra = cache.get_or_add(a, 8, [&] { return buffers.make(8, 1); });
  auto rb = cache.get_or_add(b, 8, [&] { return buffers.make(8, 2); });
  CHECK(rb.outcome == lookup_outcome::miss);
  CHECK(holds(*ra.value, 1));
  CHECK(holds(*rb.value, 2));
  CHECK(cache.tensor_count() == 2);
  CHECK(cache.remove_if_exist(a));
  CHECK_FALSE(cache.remove_if_exist(a));
  CHECK(cache.get_or_add(b, 8, [&] { return buffers.make(8, 3); }).outcome == lookup_outcome::hit);
}

TEST_CASE("the default cache is unlimited, no_evict and not yet set", "[const_cache][capacity]") {
  buffer_counter buffers;
  constant_tensor_cache cache("gpu.0");
  CHECK(cache.capacity() == constant_tensor_cache::unlimited);
  CHECK(cache.policy() == cache_policy::no_evict);
  CHECK_FALSE(cache.capacity_set());
  for (int i = 0; i < 64; ++i) lookup(cache, buffers, "t" + std::to_string(i), 64 * KiB);
  CHECK(cache.tensor_count() == 64);
  CHECK(cache.get_size() == 64 * 64 * KiB);
  CHECK(cache.stats().refusals == 0);
}

TEST_CASE("capacity follows the RFC's flush rules", "[const_cache][capacity]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  lookup(cache, buffers, "a", KiB);
  lookup(cache, buffers, "b", KiB);

  SECTION("the first setting flushes, even to unlimited") {
    cache.set_capacity(constant_tensor_cache::unlimited);
    CHECK(cache.tensor_count() == 0);
    CHECK(cache.get_size() == 0);
    CHECK(cache.capacity_set());
  }
  SECTION("the first setting flushes; an increase keeps; an equal setting keeps") {
    cache.set_capacity(10);
    CHECK(cache.tensor_count() == 0);
    lookup(cache, buffers, "a", KiB);
    cache.set_capacity(20);
    CHECK(cache.tensor_count() == 1);
    CHECK(cache.capacity() == 20);
    cache.set_capacity(20);
    CHECK(cache.tensor_count() == 1);
    cache.set_capacity(constant_tensor_cache::unlimited);
    CHECK(cache.tensor_count() == 1);
    CHECK(lookup(cache, buffers, "a", KiB).outcome == lookup_outcome::hit);
  }
  SECTION("a decrease flushes, even when everything would fit") {
    cache.set_capacity(20);
    lookup(cache, buffers, "a", KiB);
    cache.set_capacity(19);
    CHECK(cache.tensor_count() == 0);
    CHECK(cache.capacity() == 19);
  }
  SECTION("0 flushes and disables; a later increase enables") {
    cache.set_capacity(20);
    lookup(cache, buffers, "a", KiB);
    cache.set_capacity(0);
    CHECK(cache.tensor_count() == 0);
    const auto before = cache.stats();
    CHECK(lookup(cache, buffers, "a", KiB).outcome == lookup_outcome::miss);
    CHECK(lookup(cache, buffers, "a", KiB).outcome == lookup_outcome::miss);
    CHECK(cache.tensor_count() == 0);
    CHECK(cache.stats().refusals == before.refusals + 2);
    cache.set_capacity(1);
    lookup(cache, buffers, "a", KiB);
    CHECK(lookup(cache, buffers, "a", KiB).outcome == lookup_outcome::hit);
  }
  SECTION("a flush keeps the capacity") {
    cache.set_capacity(5);
    lookup(cache, buffers, "a", KiB);
    cache.flush();
    CHECK(cache.tensor_count() == 0);
    CHECK(cache.capacity() == 5);
  }
  SECTION("a capacity whose bytes do not fit is refused and changes nothing") {
    REQUIRE_THROWS_MATCHES(cache.set_capacity(constant_tensor_cache::max_megabytes + 1),
                           primcache::error,
                           Catch::Predicate<primcache::error>([](const primcache::error& e) {
                             return e.code() == primcache::status::invalid_arguments &&
                                    e.message().find("too large") != std::string::npos;
                           }));
    CHECK(cache.tensor_count() == 2);
    CHECK_FALSE(cache.capacity_set());
    CHECK_THROWS_AS(cache.preview_capacity(constant_tensor_cache::max_megabytes + 1),
                    primcache::error);
  }
  SECTION("a policy primcache::cache lacks is refused and changes nothing") {
    const auto missing = static_cast<cache_policy>(200);
    CHECK_THROWS_AS(cache.set_capacity(10, missing), primcache::error);
    CHECK_THROWS_AS(cache.preview_capacity(10, missing), primcache::error);
    CHECK(cache.tensor_count() == 2);
    CHECK(cache.policy() == cache_policy::no_evict);
  }
}

TEST_CASE("preview_capacity says what a setting would drop", "[const_cache][capacity]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  lookup(cache, buffers, "a", 3 * KiB);
  lookup(cache, buffers, "b", 5 * KiB);
  auto first = cache.preview_capacity(100);
  CHECK(first.flushes);
  CHECK(first.tensors == 2);
  CHECK(first.bytes == 8 * KiB);
  CHECK(cache.tensor_count() == 2);  // a preview changes nothing

  cache.set_capacity(100);
  lookup(cache, buffers, "a", 3 * KiB);
  auto increase = cache.preview_capacity(200);
  CHECK_FALSE(increase.flushes);
  CHECK(increase.tensors == 0);
  CHECK(increase.bytes == 0);
  auto decrease = cache.preview_capacity(99);
  CHECK(decrease.flushes);
  CHECK(decrease.tensors == 1);
  CHECK(decrease.bytes == 3 * KiB);
  auto policy = cache.preview_capacity(100, cache_policy::lru);
  CHECK(policy.flushes);
  CHECK(policy.tensors == 1);
}

TEST_CASE("no_evict refuses new tensors when full; the caller still gets its tensor",
          "[const_cache][policy]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  cache.set_capacity(1);  // 1 MiB

  SECTION("a tensor that would overflow the capacity") {
    lookup(cache, buffers, "a", 600 * KiB, 1);
    auto b = lookup(cache, buffers, "b", 600 * KiB, 2);
    CHECK(b.outcome == lookup_outcome::miss);
    CHECK(holds(*b.value, 2));
    CHECK(cache.stats().refusals == 1);
    CHECK(cache.tensor_count() == 1);
    CHECK(cache.get_size() == 600 * KiB);
    CHECK(lookup(cache, buffers, "a", 600 * KiB).outcome == lookup_outcome::hit);
    CHECK(lookup(cache, buffers, "b", 600 * KiB).outcome == lookup_outcome::miss);
    CHECK(cache.stats().evictions == 0);
  }
  SECTION("a full cache refuses before the creator runs, and keeps refusing") {
    lookup(cache, buffers, "a", MiB);
    for (int i = 0; i < 3; ++i) {
      auto r = lookup(cache, buffers, "n", KiB, 4);
      CHECK(r.outcome == lookup_outcome::miss);
      CHECK(holds(*r.value, 4));
    }
    CHECK(cache.stats().refusals == 3);
    CHECK(cache.tensor_count() == 1);
  }
  SECTION("a tensor larger than the capacity is computed and not kept") {
    auto big = lookup(cache, buffers, "big", 2 * MiB, 5);
    CHECK(holds(*big.value, 5));
    CHECK(cache.tensor_count() == 0);
    CHECK(cache.stats().refusals == 1);
  }
}

TEST_CASE("would_keep, find and count_refused_miss let a caller do without a tensor",
          "[const_cache][policy]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  CHECK(cache.would_keep(64 * MiB));  // unlimited
  cache.set_capacity(1);              // 1 MiB, no_evict
  CHECK(cache.would_keep(MiB));
  CHECK_FALSE(cache.would_keep(MiB + 1));
  lookup(cache, buffers, "a", 600 * KiB, 3);
  CHECK(cache.would_keep(400 * KiB));
  CHECK_FALSE(cache.would_keep(600 * KiB));  // what get_or_add would refuse

  // find: a kept tensor is a hit; an absent one is nothing, and no miss.
  const auto before = cache.stats();
  const auto kept = cache.find(constant_key(1, "a"));
  REQUIRE(kept != nullptr);
  CHECK(holds(*kept, 3));
  CHECK(cache.find(constant_key(1, "b")) == nullptr);
  CHECK(cache.stats().hits == before.hits + 1);
  CHECK(cache.stats().misses == before.misses);
  cache.count_refused_miss();
  CHECK(cache.stats().misses == before.misses + 1);
  CHECK(cache.stats().refusals == before.refusals + 1);
  CHECK(cache.tensor_count() == 1);

  cache.set_capacity(1, cache_policy::lru);  // evicts to admit what fits
  CHECK(cache.would_keep(MiB));
  CHECK_FALSE(cache.would_keep(2 * MiB));
  cache.set_capacity(0);
  CHECK_FALSE(cache.would_keep(1));
  CHECK(cache.find(constant_key(1, "a")) == nullptr);  // flushed
}

TEST_CASE("lru evicts the least recently used tensor to make room", "[const_cache][policy]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  cache.set_capacity(1, cache_policy::lru);
  CHECK(cache.policy() == cache_policy::lru);
  std::vector<std::tuple<std::string, bool, eviction_reason>> heard;
  auto sub = cache.on_eviction(
      [&](const constant_key& k, const primcache::constant_buffer* b, eviction_reason r) {
        heard.emplace_back(std::string(k.bytes()), b != nullptr, r);
      });
  lookup(cache, buffers, "a", 400 * KiB);
  lookup(cache, buffers, "b", 400 * KiB);
  CHECK(lookup(cache, buffers, "a", 400 * KiB).outcome == lookup_outcome::hit);  // a is recent
  lookup(cache, buffers, "c", 400 * KiB);
  REQUIRE(heard.size() == 1);
  CHECK(std::get<0>(heard[0]) == "b");
  CHECK(std::get<1>(heard[0]));
  CHECK(std::get<2>(heard[0]) == eviction_reason::capacity);
  CHECK(cache.stats().evictions == 1);
  CHECK(cache.stats().refusals == 0);
  CHECK(cache.tensor_count() == 2);
  CHECK(cached(cache, buffers, "a"));
  CHECK(cached(cache, buffers, "c"));
}

TEST_CASE("cost keeps the tensors most expensive to compute per byte", "[const_cache][policy]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  cache.set_capacity(1, cache_policy::cost);
  CHECK(cache.policy() == cache_policy::cost);
  std::vector<std::string> evicted;
  auto sub = cache.on_eviction([&](const constant_key& k, const primcache::constant_buffer*,
                                   eviction_reason) { evicted.emplace_back(k.bytes()); });
  // 300 KiB each; "slow" takes 50 ms to compute, the others a few microseconds.
  cache.get_or_add(1, "slow", 300 * KiB, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return buffers.make(300 * KiB, 1);
  });
  lookup(cache, buffers, "fast", 300 * KiB);
  lookup(cache, buffers, "other", 300 * KiB);
  for (int i = 0; i < 3; ++i) lookup(cache, buffers, "fast", 300 * KiB);  // recency: no part
  lookup(cache, buffers, "new", 300 * KiB);  // needs room: a cheap one goes, never "slow"
  REQUIRE(evicted.size() == 1);
  CHECK(evicted[0] != "slow");
  CHECK(cached(cache, buffers, "slow"));
  CHECK(cache.stats().evictions == 1);
  CHECK(cache.stats().refusals == 0);
}

TEST_CASE("a change of policy flushes and takes effect", "[const_cache][policy]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  cache.set_capacity(1);
  lookup(cache, buffers, "a", 600 * KiB);
  cache.set_capacity(1, cache_policy::lru);
  CHECK(cache.tensor_count() == 0);
  CHECK(cache.get_size() == 0);
  lookup(cache, buffers, "a", 600 * KiB);
  lookup(cache, buffers, "b", 600 * KiB);  // lru: a goes, b stays
  CHECK(cache.stats().evictions == 1);
  CHECK(cache.tensor_count() == 1);
  cache.set_capacity(1, cache_policy::no_evict);
  CHECK(cache.tensor_count() == 0);
  lookup(cache, buffers, "a", 600 * KiB);
  lookup(cache, buffers, "b", 600 * KiB);  // no_evict: b is refused
  CHECK(cache.stats().refusals == 1);
  // Counters run on across policies.
  CHECK(cache.stats().misses == 5);
}

TEST_CASE("a handed-out tensor outlives its eviction", "[const_cache][handles]") {
  buffer_counter buffers;
  {
    constant_tensor_cache cache("cpu");
    cache.set_capacity(1, cache_policy::lru);
    auto held = lookup(cache, buffers, "a", 600 * KiB, 0x5a).value;

    SECTION("evicted for room") {
      lookup(cache, buffers, "b", 600 * KiB);
    }
    SECTION("removed") {
      CHECK(cache.remove_if_exist(1, "a"));
    }
    SECTION("flushed") {
      cache.flush();
    }
    SECTION("flushed by a decrease") {
      cache.set_capacity(0);
    }

    CHECK(cache.get_size() <= 600 * KiB);
    CHECK(holds(*held, 0x5a));
    const long live = buffers.live.load();
    held.reset();  // the last holder frees it
    CHECK(buffers.live.load() == live - 1);
  }
  CHECK(buffers.live.load() == 0);
}

TEST_CASE("subscribers hear every tensor that leaves", "[const_cache][notification]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  std::vector<std::pair<std::string, eviction_reason>> heard;
  auto sub = cache.on_eviction(
      [&](const constant_key& k, const primcache::constant_buffer* b, eviction_reason r) {
        CHECK(k.backend_id() == 1);
        CHECK(b != nullptr);
        heard.emplace_back(std::string(k.bytes()), r);
      });
  CHECK(sub);
  lookup(cache, buffers, "a", KiB);
  lookup(cache, buffers, "b", KiB);
  lookup(cache, buffers, "c", KiB);
  cache.remove_if_exist(1, "a");
  CHECK_FALSE(cache.remove_if_exist(1, "a"));
  cache.flush();
  REQUIRE(heard.size() == 3);
  CHECK(heard[0] == std::pair<std::string, eviction_reason>("a", eviction_reason::erased));
  CHECK(heard[1].second == eviction_reason::cleared);
  CHECK(heard[2].second == eviction_reason::cleared);

  SECTION("a capacity change that flushes is heard as a clear") {
    lookup(cache, buffers, "d", KiB);
    cache.set_capacity(3);
    REQUIRE(heard.size() == 4);
    CHECK(heard[3] == std::pair<std::string, eviction_reason>("d", eviction_reason::cleared));
  }
  SECTION("after reset nothing more is heard") {
    sub.reset();
    CHECK_FALSE(sub);
    lookup(cache, buffers, "d", KiB);
    cache.flush();
    CHECK(heard.size() == 3);
  }
  SECTION("a moved subscription still listens, and its old self does not double") {
    primcache::eviction_subscription moved = std::move(sub);
    lookup(cache, buffers, "d", KiB);
    cache.flush();
    CHECK(heard.size() == 4);
    moved = primcache::eviction_subscription();
    lookup(cache, buffers, "d", KiB);
    cache.flush();
    CHECK(heard.size() == 4);
  }
}

TEST_CASE("an eviction callback may reset its own subscription", "[const_cache][notification]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  int calls = 0;
  primcache::eviction_subscription sub;
  sub = cache.on_eviction(
      [&](const constant_key&, const primcache::constant_buffer*, eviction_reason) {
        ++calls;
        sub.reset();
      });
  lookup(cache, buffers, "a", KiB);
  lookup(cache, buffers, "b", KiB);
  cache.flush();
  CHECK(calls == 1);
  CHECK_FALSE(sub);
  CHECK_THROWS_AS(cache.on_eviction({}), primcache::error);
}

TEST_CASE("several subscribers each hear an eviction", "[const_cache][notification]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  int first = 0;
  int second = 0;
  auto a = cache.on_eviction([&](auto&&...) { ++first; });
  auto b = cache.on_eviction([&](auto&&...) { ++second; });
  lookup(cache, buffers, "a", KiB);
  cache.remove_if_exist(1, "a");
  CHECK(first == 1);
  CHECK(second == 1);
}

TEST_CASE("a failed computation leaves nothing behind", "[const_cache][failure]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");

  SECTION("the creator throws") {
    CHECK_THROWS_WITH(cache.get_or_add(1, "a", KiB,
                                       [&]() -> std::shared_ptr<primcache::constant_buffer> {
                                         throw std::runtime_error("packing failed");
                                       }),
                      "packing failed");
  }
  SECTION("the creator returns no buffer") {
    REQUIRE_THROWS_MATCHES(
        cache.get_or_add(1, "a", KiB, [] { return std::shared_ptr<primcache::constant_buffer>(); }),
        primcache::error, Catch::Predicate<primcache::error>([](const primcache::error& e) {
          return e.code() == primcache::status::invalid_arguments &&
                 e.message() == "constant tensor creator of backend 1 returned no buffer";
        }));
  }
  SECTION("the creator returns a buffer of the wrong size") {
    REQUIRE_THROWS_MATCHES(
        cache.get_or_add(1, "a", KiB, [&] { return buffers.make(KiB + 1, 0); }), primcache::error,
        Catch::Predicate<primcache::error>([](const primcache::error& e) {
          return e.message() ==
                 "constant tensor creator of backend 1 returned a buffer of 1025 bytes for a "
                 "tensor of 1024 bytes";
        }));
  }
  CHECK(cache.tensor_count() == 0);
  CHECK(cache.get_size() == 0);
  CHECK(cache.stats().failures == 1);
  CHECK(buffers.live.load() == 0);
  auto again = lookup(cache, buffers, "a", KiB, 6);
  CHECK(again.outcome == lookup_outcome::miss);
  CHECK(holds(*again.value, 6));
}

TEST_CASE("creation time is recorded", "[const_cache][cost]") {
  buffer_counter buffers;
  constant_tensor_cache cache("cpu");
  lookup(cache, buffers, "a", 64 * KiB);
  CHECK(cache.stats().creation_time.count() > 0);
}

TEST_CASE("constant buffers check their allocator", "[const_cache][buffer]") {
  auto no_memory = [](std::size_t) -> void* { return nullptr; };
  auto nothing = [](void*, std::size_t) {};
  REQUIRE_THROWS_MATCHES(primcache::make_constant_buffer(16, no_memory, nothing), primcache::error,
                         Catch::Predicate<primcache::error>([](const primcache::error& e) {
                           return e.code() == primcache::status::out_of_memory &&
                                  e.message() ==
                                      "constant buffer of 16 bytes: allocate returned null";
                         }));
  CHECK_THROWS_AS(primcache::make_constant_buffer(16, {}, nothing), primcache::error);
  CHECK_THROWS_AS(primcache::make_constant_buffer(16, no_memory, {}), primcache::error);
  auto empty = primcache::make_constant_buffer(0, no_memory, nothing);
  CHECK(empty->size() == 0);
  CHECK(empty->data() == nullptr);
}
