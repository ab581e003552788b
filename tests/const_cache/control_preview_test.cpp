// The constant caches as the admin API turns them through control: a device
// named by its kind alone ("cpu") is its kind's cache (a capacity set on it
// sets the kind, so the runtime's getter reads it), an indexed device is set
// alone, and control's preview says what a capacity would drop — exactly
// what the change then drops.
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "primcache/base/error.hpp"
#include "primcache/const_cache/constant_tensor_caches.hpp"
#include "primcache/control/registry.hpp"
#include "test_buffers.hpp"

using const_cache_test::buffer_counter;
using const_cache_test::KiB;
using const_cache_test::MiB;
using primcache::cache_policy;
using primcache::capacity_preview;
using primcache::constant_tensor_cache;
using primcache::constant_tensor_caches;

namespace {

void fill(constant_tensor_cache& cache, buffer_counter& buffers, const std::string& name,
          std::size_t size) {
  cache.get_or_add(1, name, size, [&] { return buffers.make(size, 1); });
}

capacity_preview preview(primcache::control_registry& r, const char* name, std::uint64_t mb) {
  const std::optional<capacity_preview> p = r.find_cache(name).preview_capacity(mb);
  REQUIRE(p.has_value());
  return *p;
}

}  // namespace

TEST_CASE("a capacity set through control on the kind's own cache sets the kind",
          "[const_cache][control]") {
  primcache::control_registry registry;
  constant_tensor_caches caches(registry);
  constant_tensor_cache& cpu = caches.device("cpu");
  constant_tensor_cache& gpu0 = caches.device("gpu.0");
  constant_tensor_cache& gpu1 = caches.device("gpu.1");

  registry.set_capacity("constant.cpu", 64);
  CHECK(caches.capacity("cpu") == 64);  // the kind follows (it was unlimited)
  CHECK(cpu.capacity() == 64);

  registry.set_capacity("constant.gpu.1", 32);  // an indexed device: alone
  CHECK(gpu1.capacity() == 32);
  CHECK(gpu0.capacity() == constant_tensor_cache::unlimited);
  CHECK(caches.capacity("gpu") == constant_tensor_cache::unlimited);
  CHECK_FALSE(gpu0.capacity_set());
}

TEST_CASE("control keeps the kind cache's own policy", "[const_cache][control]") {
  buffer_counter buffers;
  primcache::control_registry registry;
  constant_tensor_caches caches(registry);
  constant_tensor_cache& cpu = caches.device("cpu");
  cpu.set_capacity(8, cache_policy::lru);  // set alone, with a policy
  fill(cpu, buffers, "a", KiB);
  registry.set_capacity("constant.cpu", 16);  // an increase: keeps, policy stays
  CHECK(cpu.tensor_count() == 1);
  CHECK(cpu.policy() == cache_policy::lru);
  CHECK(caches.policy("cpu") == cache_policy::lru);
}

TEST_CASE("control's preview tells what each rule drops, and the change drops that",
          "[const_cache][control][preview]") {
  buffer_counter buffers;
  primcache::control_registry registry;
  constant_tensor_caches caches(registry);
  constant_tensor_cache& cpu = caches.device("cpu");
  constant_tensor_cache& gpu0 = caches.device("gpu.0");
  fill(cpu, buffers, "a", 3 * KiB);
  fill(cpu, buffers, "b", KiB);
  fill(gpu0, buffers, "c", 2 * KiB);

  SECTION("the first setting flushes, even to more") {
    CHECK(preview(registry, "constant.cpu", 1000) ==
          capacity_preview{.flushes = true, .entries = 2, .bytes = 4 * KiB});
    CHECK(cpu.tensor_count() == 2);  // a preview changes nothing
    CHECK_FALSE(cpu.capacity_set());
    registry.set_capacity("constant.cpu", 1000);
    CHECK(cpu.tensor_count() == 0);
    CHECK(buffers.live == 1);  // gpu.0's only
  }
  SECTION("after it, an increase or the same keeps, a decrease and 0 flush") {
    registry.set_capacity("constant.cpu", 100);
    fill(cpu, buffers, "a", 3 * KiB);
    fill(cpu, buffers, "b", KiB);
    CHECK(preview(registry, "constant.cpu", 200) == capacity_preview{});
    CHECK(preview(registry, "constant.cpu", 100) == capacity_preview{});
    CHECK(preview(registry, "constant.cpu", primcache::unlimited_capacity) == capacity_preview{});
    CHECK(preview(registry, "constant.cpu", 99) ==
          capacity_preview{.flushes = true, .entries = 2, .bytes = 4 * KiB});
    CHECK(preview(registry, "constant.cpu", 0) ==
          capacity_preview{.flushes = true, .entries = 2, .bytes = 4 * KiB});
    registry.set_capacity("constant.cpu", 200);
    CHECK(cpu.tensor_count() == 2);
    registry.set_capacity("constant.cpu", 0);
    CHECK(cpu.tensor_count() == 0);
    CHECK(caches.capacity("cpu") == 0);
  }
  SECTION("an indexed device's preview covers that device only") {
    CHECK(preview(registry, "constant.gpu.0", 10) ==
          capacity_preview{.flushes = true, .entries = 1, .bytes = 2 * KiB});
  }
  SECTION("a kind's preview sums its devices") {
    constant_tensor_cache& gpu1 = caches.device("gpu.1");
    fill(gpu1, buffers, "d", MiB);
    const auto e = caches.preview_capacity("gpu", 10);
    CHECK(e.flushes);
    CHECK(e.tensors == 2);
    CHECK(e.bytes == 2 * KiB + MiB);
    CHECK(gpu1.tensor_count() == 1);
  }
  SECTION("a value the change would refuse is refused by the preview") {
    CHECK_THROWS_AS(preview(registry, "constant.cpu", constant_tensor_cache::max_megabytes + 1),
                    primcache::error);
    CHECK_THROWS_AS(caches.preview_capacity("gpu.0", 1), primcache::error);
    CHECK(cpu.tensor_count() == 2);
  }
}
