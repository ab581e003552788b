// constant_tensor_caches: one cache per device, settings per kind, and the
// caches as control shows them (constant.cpu, constant.gpu.N) and turns them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/const_cache/constant_tensor_caches.hpp"
#include "primcache/control/registry.hpp"
#include "test_buffers.hpp"

using const_cache_test::buffer_counter;
using const_cache_test::KiB;
using const_cache_test::MiB;
using primcache::cache_policy;
using primcache::constant_tensor_cache;
using primcache::constant_tensor_caches;

namespace {

void fill(constant_tensor_cache& cache, buffer_counter& buffers, const std::string& name,
          std::size_t size) {
  cache.get_or_add(1, name, size, [&] { return buffers.make(size, 1); });
}

std::uint64_t extra(const primcache::cache_info& info, const std::string& name) {
  for (const auto& [n, v] : info.extra) {
    if (n == name) return v;
  }
  FAIL("no extra statistic " << name);
  return 0;
}

}  // namespace

TEST_CASE("each device has one cache, created on first use", "[const_cache][devices]") {
  primcache::control_registry registry;
  constant_tensor_caches caches(registry);
  CHECK(caches.find("cpu") == nullptr);
  constant_tensor_cache& cpu = caches.device("cpu");
  CHECK(&caches.device("cpu") == &cpu);
  CHECK(caches.find("cpu") == &cpu);
  constant_tensor_cache& gpu0 = caches.device("gpu.0");
  CHECK(&gpu0 != &cpu);
  CHECK(gpu0.device() == "gpu.0");
  caches.device("gpu.1");
  CHECK(caches.devices() == std::vector<std::string>{"cpu", "gpu.0", "gpu.1"});
  CHECK(constant_tensor_caches::kind_of("gpu.1") == "gpu");
  CHECK(constant_tensor_caches::kind_of("cpu") == "cpu");
}

TEST_CASE("device names must make control names", "[const_cache][devices]") {
  primcache::control_registry registry;
  constant_tensor_caches caches(registry);
  const std::string bad = GENERATE(as<std::string>{}, "", "GPU", "gpu 0", std::string(120, 'x'));
  CAPTURE(bad);
  CHECK_THROWS_MATCHES(caches.device(bad), primcache::error,
                       Catch::Predicate<primcache::error>([](const primcache::error& e) {
                         return e.code() == primcache::status::invalid_arguments;
                       }));
  CHECK(caches.devices().empty());
}

TEST_CASE("two sets on one registry cannot both own a device", "[const_cache][devices]") {
  primcache::control_registry registry;
  constant_tensor_caches a(registry);
  constant_tensor_caches b(registry);
  a.device("cpu");
  CHECK_THROWS_MATCHES(b.device("cpu"), primcache::error,
                       Catch::Predicate<primcache::error>([](const primcache::error& e) {
                         return e.code() == primcache::status::already_exists;
                       }));
  CHECK(b.find("cpu") == nullptr);
}

TEST_CASE("a kind's capacity applies to its devices, now and later", "[const_cache][kinds]") {
  buffer_counter buffers;
  primcache::control_registry registry;
  constant_tensor_caches caches(registry);
  constant_tensor_cache& cpu = caches.device("cpu");
  constant_tensor_cache& gpu0 = caches.device("gpu.0");
  fill(cpu, buffers, "a", KiB);
  fill(gpu0, buffers, "a", KiB);
  CHECK(caches.capacity("gpu") == constant_tensor_cache::unlimited);
  CHECK(caches.policy("gpu") == cache_policy::no_evict);

  caches.set_capacity("gpu", 2048, cache_policy::lru);
  CHECK(gpu0.capacity() == 2048);
  CHECK(gpu0.policy() == cache_policy::lru);
  CHECK(gpu0.tensor_count() == 0);  // the first setting flushed it
  CHECK(cpu.tensor_count() == 1);   // another kind
  CHECK_FALSE(cpu.capacity_set());
  constant_tensor_cache& gpu1 = caches.device("gpu.1");
  CHECK(gpu1.capacity() == 2048);
  CHECK(gpu1.policy() == cache_policy::lru);
  CHECK(caches.capacity("gpu") == 2048);
  CHECK(caches.policy("gpu") == cache_policy::lru);

  fill(gpu0, buffers, "b", KiB);
  caches.set_capacity("gpu", 4096);  // an increase, the policy kept
  CHECK(gpu0.tensor_count() == 1);
  CHECK(gpu0.policy() == cache_policy::lru);
  caches.set_capacity("gpu", 1024);  // a decrease
  CHECK(gpu0.tensor_count() == 0);

  SECTION("bad kind settings change nothing") {
    CHECK_THROWS_AS(caches.set_capacity("gpu.0", 1), primcache::error);
    CHECK_THROWS_AS(caches.set_capacity("", 1), primcache::error);
    CHECK_THROWS_AS(caches.set_capacity("gpu", constant_tensor_cache::max_megabytes + 1),
                    primcache::error);
    CHECK_THROWS_AS(caches.set_capacity("gpu", 1, static_cast<cache_policy>(200)),
                    primcache::error);
    CHECK(caches.capacity("gpu") == 1024);
    CHECK(gpu1.capacity() == 1024);
  }
}

TEST_CASE("parsed variable entries apply per kind", "[const_cache][kinds][env]") {
  primcache::control_registry registry;
  constant_tensor_caches caches(registry);
  caches.set_capacity("gpu", 10, cache_policy::lru);
  caches.apply(primcache::parse_constant_capacity("cpu:64;gpu:32;tpu:1"));
  CHECK(caches.capacity("cpu") == 64);
  CHECK(caches.policy("cpu") == cache_policy::no_evict);
  CHECK(caches.capacity("gpu") == 32);
  CHECK(caches.policy("gpu") == cache_policy::lru);  // no policy given: kept
  CHECK(caches.device("cpu").capacity() == 64);
}

TEST_CASE("control lists each cache as constant.<device>", "[const_cache][control]") {
  buffer_counter buffers;
  primcache::control_registry registry;
  constant_tensor_caches caches(registry);
  constant_tensor_cache& gpu0 = caches.device("gpu.0");
  constant_tensor_cache& cpu = caches.device("cpu");
  cpu.set_capacity(1);
  fill(cpu, buffers, "a", 600 * KiB);
  fill(cpu, buffers, "a", 600 * KiB);
  fill(cpu, buffers, "b", 600 * KiB);  // refused

  const auto list = registry.list_caches();
  REQUIRE(list.size() == 2);
  CHECK(list[0].name == "constant.cpu");
  CHECK(list[1].name == "constant.gpu.0");
  const primcache::cache_info& info = list[0];
  CHECK(info.unit == primcache::capacity_unit::megabytes);
  CHECK(info.capacity == 1);
  CHECK(info.size == 1);  // 600 KiB, rounded up
  REQUIRE(info.weight_bytes);
  CHECK(*info.weight_bytes == 600 * KiB);
  CHECK(info.stats.hits == 1);
  CHECK(info.stats.misses == 2);
  CHECK(info.stats.refusals == 1);
  CHECK(info.stats.evictions == 0);
  CHECK(extra(info, "tensors") == 1);
  CHECK(extra(info, "capacity_set") == 1);
  CHECK(extra(info, "policy") == static_cast<std::uint64_t>(cache_policy::no_evict));
  CHECK(list[1].capacity == primcache::unlimited_capacity);
  CHECK(extra(list[1], "capacity_set") == 0);
  (void)gpu0;
}

TEST_CASE("capacity set through control follows the flush rules", "[const_cache][control]") {
  buffer_counter buffers;
  primcache::control_registry registry;
  constant_tensor_caches caches(registry);
  constant_tensor_cache& cpu = caches.device("cpu");
  fill(cpu, buffers, "a", KiB);
  registry.set_capacity("constant.cpu", 100);  // first: flushes
  CHECK(cpu.tensor_count() == 0);
  CHECK(cpu.capacity() == 100);
  fill(cpu, buffers, "a", KiB);
  registry.set_capacity("constant.cpu", 200);  // increase: keeps
  CHECK(cpu.tensor_count() == 1);
  registry.set_capacity("constant.cpu", primcache::unlimited_capacity);  // increase
  CHECK(cpu.tensor_count() == 1);
  CHECK(cpu.capacity() == constant_tensor_cache::unlimited);
  registry.set_capacity("constant.cpu", 50);  // decrease: flushes
  CHECK(cpu.tensor_count() == 0);
  fill(cpu, buffers, "a", KiB);
  registry.flush("constant.cpu");
  CHECK(cpu.tensor_count() == 0);
  CHECK(cpu.capacity() == 50);
  CHECK_THROWS_AS(registry.set_capacity("constant.cpu", constant_tensor_cache::max_megabytes + 1),
                  primcache::error);
  CHECK(cpu.capacity() == 50);
}

TEST_CASE("destroying the set unregisters its caches", "[const_cache][control]") {
  primcache::control_registry registry;
  {
    constant_tensor_caches caches(registry);
    caches.device("cpu");
    CHECK(registry.list_caches().size() == 1);
  }
  CHECK(registry.list_caches().empty());
}

TEST_CASE("the process's caches register with control()", "[const_cache][control]") {
  primcache::constant_tensor_cache& cpu = primcache::constant_caches().device("cpu");
  CHECK(&primcache::constant_caches().device("cpu") == &cpu);
  auto h = primcache::control().find_cache("constant.cpu");
  CHECK(h.unit() == primcache::capacity_unit::megabytes);
  CHECK(h.capacity() == cpu.capacity());
}

TEST_CASE("settings that keep the policy keep the one in force", "[const_cache][kinds]") {
  primcache::control_registry registry;
  constant_tensor_caches caches(registry);
  constant_tensor_cache& cpu = caches.device("cpu");
  constant_tensor_cache& gpu = caches.device("gpu.0");
  caches.set_capacity("cpu", 8, cache_policy::cost);
  caches.set_capacity("gpu", 8, cache_policy::lru);

  caches.set_capacity("cpu", 16);
  CHECK(caches.policy("cpu") == cache_policy::cost);
  CHECK(cpu.policy() == cache_policy::cost);
  caches.apply(primcache::parse_constant_capacity("cpu:24;gpu:24"));
  CHECK(caches.policy("cpu") == cache_policy::cost);
  CHECK(caches.policy("gpu") == cache_policy::lru);
  CHECK(gpu.policy() == cache_policy::lru);
  CHECK(gpu.capacity() == 24);

  // Control on the kind's own cache keeps that cache's policy, set alone.
  cpu.set_capacity(24, cache_policy::lru);
  registry.set_capacity("constant.cpu", 32);
  CHECK(caches.policy("cpu") == cache_policy::lru);
  CHECK(cpu.policy() == cache_policy::lru);
  CHECK(cpu.capacity() == 32);
}
