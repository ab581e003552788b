// The optional preview_capacity hook: control passes it through, changes
// nothing, reports "no preview" for caches without it, and lets a cache's
// refusal reach the caller.
#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>

#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"

using primcache::capacity_preview;
using primcache::control_registry;

namespace {

struct plain_stats {
  std::uint64_t hits = 0, misses = 0, evictions = 0;
};

struct plain_cache {
  std::uint64_t capacity() const { return capacity_; }
  void set_capacity(std::uint64_t n) { capacity_ = n; }
  std::uint64_t size() const { return 4; }
  plain_stats stats() const { return {}; }
  void clear() {}
  std::uint64_t capacity_ = 10;
};

// A cache whose rule is "any decrease empties it", which a reader could not
// guess from its size and capacity; refuses capacities above 1000.
struct flushing_cache : plain_cache {
  capacity_preview preview_capacity(std::uint64_t n) const {
    ++previews;
    if (n > 1000) throw primcache::error(primcache::status::invalid_arguments, "too large");
    if (n >= capacity_) return {};
    return {.flushes = true, .entries = 4, .bytes = 4096};
  }
  mutable int previews = 0;
};

}  // namespace

static_assert(!primcache::cache_with_preview<plain_cache>);
static_assert(primcache::cache_with_preview<flushing_cache>);

TEST_CASE("a cache's preview reaches the handle and changes nothing", "[control][preview]") {
  control_registry r;
  flushing_cache c;
  auto reg = r.register_cache("flushing", c, primcache::capacity_unit::megabytes);
  const auto h = r.find_cache("flushing");
  const std::optional<capacity_preview> lower = h.preview_capacity(5);
  REQUIRE(lower.has_value());
  CHECK(*lower == capacity_preview{.flushes = true, .entries = 4, .bytes = 4096});
  CHECK(h.capacity() == 10);  // nothing changed
  const std::optional<capacity_preview> higher = h.preview_capacity(20);
  REQUIRE(higher.has_value());
  CHECK(*higher == capacity_preview{});
  CHECK(c.previews == 2);
  CHECK_THROWS_AS(h.preview_capacity(5000), primcache::error);
  CHECK(h.capacity() == 10);
}

TEST_CASE("a cache without a preview says so", "[control][preview]") {
  control_registry r;
  plain_cache c;
  auto reg = r.register_cache("plain", c);
  CHECK_FALSE(r.find_cache("plain").preview_capacity(1).has_value());
  CHECK(c.capacity() == 10);
}

TEST_CASE("a preview of an unregistered cache is not_found", "[control][preview]") {
  control_registry r;
  flushing_cache c;
  auto reg = r.register_cache("flushing", c);
  const auto h = r.find_cache("flushing");
  reg.reset();
  try {
    (void)h.preview_capacity(1);
    FAIL("no exception");
  } catch (const primcache::error& e) {
    CHECK(e.code() == primcache::status::not_found);
  }
  CHECK(c.previews == 0);
}
