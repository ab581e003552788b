#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "error_from.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"

using primcache::cache_counters;
using primcache::cache_info;
using primcache::cache_registration;
using primcache::capacity_unit;
using primcache::control_registry;
using primcache::status;
using primcache::test::error_from;

namespace {

// The least a cache's statistics must offer.
struct minimal_stats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t evictions = 0;
};

// Every field control reads, some of other integer types and atomics.
struct full_stats {
  std::atomic<std::uint64_t> hits{1};
  std::uint32_t misses = 2;
  std::uint64_t waits = 3;
  std::atomic<std::size_t> evictions{4};
  int refusals = 5;
  std::uint64_t failures = 6;
  std::uint64_t creation_ns_total = 7;
};

// A single-threaded stand-in for a cache that records what reaches it.
template <typename Stats = minimal_stats>
class toy_cache {
 public:
  std::uint64_t capacity() const {
    ++calls;
    return capacity_;
  }
  void set_capacity(std::uint64_t n) {
    ++calls;
    if (n == refused_capacity) {
      throw primcache::error(status::invalid_arguments, "capacity 13 is refused");
    }
    capacity_ = n;
    if (size_ > n) size_ = n;
  }
  std::size_t size() const {
    ++calls;
    return size_;
  }
  const Stats& stats() const {
    ++calls;
    return stats_;
  }
  void clear() {
    ++calls;
    ++clears;
    size_ = 0;
  }

  static constexpr std::uint64_t refused_capacity = 13;
  mutable int calls = 0;
  int clears = 0;
  std::uint64_t capacity_ = 100;
  std::size_t size_ = 40;
  Stats stats_;
};

// What primcache::error a callable throws (status::success when none).

// The creation time as a std::chrono duration rather than an integer.
struct chrono_stats {
  std::uint64_t hits = 8;
  std::uint64_t misses = 9;
  std::uint64_t evictions = 10;
  std::chrono::microseconds creation_time{3};
};

struct missing_clear {
  std::uint64_t capacity();
  void set_capacity(std::uint64_t);
  std::uint64_t size();
  minimal_stats stats();
};
struct stats_without_evictions {
  std::uint64_t hits, misses;
};
struct wrong_stats {
  std::uint64_t capacity();
  void set_capacity(std::uint64_t);
  std::uint64_t size();
  stats_without_evictions stats();
  void clear();
};
struct string_capacity {
  std::string capacity();
  void set_capacity(std::uint64_t);
  std::uint64_t size();
  minimal_stats stats();
  void clear();
};

}  // namespace

TEST_CASE("an object with capacity, set_capacity, size, stats and clear is a controllable cache",
          "[control][concept]") {
  STATIC_REQUIRE(primcache::controllable_cache<toy_cache<>>);
  STATIC_REQUIRE(primcache::controllable_cache<toy_cache<full_stats>>);
  STATIC_REQUIRE_FALSE(primcache::controllable_cache<missing_clear>);
  STATIC_REQUIRE_FALSE(primcache::controllable_cache<wrong_stats>);
  STATIC_REQUIRE_FALSE(primcache::controllable_cache<string_capacity>);
  STATIC_REQUIRE_FALSE(primcache::controllable_cache<const toy_cache<>>);
  STATIC_REQUIRE(primcache::cache_stats_like<minimal_stats>);
  STATIC_REQUIRE_FALSE(primcache::cache_stats_like<stats_without_evictions>);
}

TEST_CASE("a cache's own statistics convert field by field, absent fields reading 0",
          "[control][stats]") {
  SECTION("only the required fields") {
    const cache_counters s = primcache::to_cache_counters(minimal_stats{10, 20, 30});
    CHECK(s == cache_counters{.hits = 10, .misses = 20, .evictions = 30});
  }
  SECTION("every field, from atomics and other integer types") {
    const full_stats full;
    const cache_counters s = primcache::to_cache_counters(full);
    CHECK(s == cache_counters{.hits = 1,
                              .misses = 2,
                              .waits = 3,
                              .evictions = 4,
                              .refusals = 5,
                              .failures = 6,
                              .creation_ns_total = 7});
  }
  SECTION("a creation time given as a std::chrono duration, in nanoseconds") {
    const cache_counters s = primcache::to_cache_counters(chrono_stats{});
    CHECK(s == cache_counters{.hits = 8, .misses = 9, .evictions = 10, .creation_ns_total = 3000});
  }
}

TEST_CASE("a registered cache is listed and turned by name", "[control][cache]") {
  control_registry registry;
  toy_cache<full_stats> cache;
  auto reg = registry.register_cache("primitive", cache, capacity_unit::entries);
  REQUIRE(reg);
  CHECK(reg.name() == "primitive");

  SECTION("list_caches reports its name, unit, capacity, size and stats") {
    const auto caches = registry.list_caches();
    REQUIRE(caches.size() == 1);
    CHECK(caches[0].name == "primitive");
    CHECK(caches[0].unit == capacity_unit::entries);
    CHECK(caches[0].capacity == 100);
    CHECK(caches[0].size == 40);
    CHECK(caches[0].stats == primcache::to_cache_counters(cache.stats_));
  }
  SECTION("set_capacity through the registry reaches the cache") {
    registry.set_capacity("primitive", 30);
    CHECK(cache.capacity_ == 30);
    CHECK(cache.size_ == 30);
    CHECK(registry.find_cache("primitive").capacity() == 30);
  }
  SECTION("flush through the registry clears the cache") {
    registry.flush("primitive");
    CHECK(cache.clears == 1);
    CHECK(cache.size_ == 0);
  }
  SECTION("a handle found by name reads and turns the same cache") {
    const primcache::cache_handle h = registry.find_cache("primitive");
    CHECK(h.name() == "primitive");
    CHECK(h.unit() == capacity_unit::entries);
    CHECK(h.capacity() == 100);
    CHECK(h.size() == 40);
    CHECK(h.stats().failures == 6);
    h.set_capacity(7);
    CHECK(cache.capacity_ == 7);
    h.flush();
    CHECK(cache.clears == 1);
    const cache_info info = h.info();
    CHECK(info.name == "primitive");
    CHECK(info.capacity == 7);
    CHECK(info.size == 0);
    CHECK(info.stats.creation_ns_total == 7);
  }
  SECTION("the registration hands out the same handle") {
    reg.handle().set_capacity(55);
    CHECK(cache.capacity_ == 55);
  }
}

TEST_CASE("caches are listed in name order with the unit each registered", "[control][cache]") {
  control_registry registry;
  toy_cache<> a, b, c;
  auto rb = registry.register_cache("persist.directory", b, capacity_unit::megabytes);
  auto ra = registry.register_cache("const_cache.cpu", a, capacity_unit::bytes);
  auto rc = registry.register_cache("primitive", c);  // entries by default
  const auto caches = registry.list_caches();
  REQUIRE(caches.size() == 3);
  CHECK(caches[0].name == "const_cache.cpu");
  CHECK(caches[0].unit == capacity_unit::bytes);
  CHECK(caches[1].name == "persist.directory");
  CHECK(caches[1].unit == capacity_unit::megabytes);
  CHECK(caches[2].name == "primitive");
  CHECK(caches[2].unit == capacity_unit::entries);
}

TEST_CASE("an exception from the cache reaches the caller and leaves the entry usable",
          "[control][cache][error]") {
  control_registry registry;
  toy_cache<> cache;
  auto reg = registry.register_cache("primitive", cache);
  const auto e =
      error_from([&] { registry.set_capacity("primitive", toy_cache<>::refused_capacity); });
  CHECK(e.code() == status::invalid_arguments);
  CHECK(e.message() == "capacity 13 is refused");
  CHECK(cache.capacity_ == 100);
  registry.set_capacity("primitive", 20);
  CHECK(cache.capacity_ == 20);
  reg.reset();  // returns: the failed call is no longer counted as in flight
  CHECK(registry.list_caches().empty());
}

TEST_CASE("a cache name is registered once at a time", "[control][cache][error]") {
  control_registry registry;
  toy_cache<> first, second;
  auto reg = registry.register_cache("primitive", first);

  SECTION("a second registration of the name fails with already_exists") {
    const auto e = error_from([&] { (void)registry.register_cache("primitive", second); });
    CHECK(e.code() == status::already_exists);
    CHECK(e.message() == "cache 'primitive' is already registered");
    registry.set_capacity("primitive", 1);  // still the first
    CHECK(first.capacity_ == 1);
    CHECK(second.calls == 0);
  }
  SECTION("after unregistration the name may be registered anew") {
    reg.reset();
    auto again = registry.register_cache("primitive", second);
    registry.set_capacity("primitive", 2);
    CHECK(second.capacity_ == 2);
    CHECK(first.capacity_ == 100);
  }
  SECTION("other registries have their own names") {
    control_registry other;
    auto elsewhere = other.register_cache("primitive", second);
    other.set_capacity("primitive", 3);
    CHECK(second.capacity_ == 3);
    CHECK(first.capacity_ == 100);
  }
}

TEST_CASE("a cache with an invalid name is refused", "[control][cache][error]") {
  control_registry registry;
  toy_cache<> cache;
  const auto e = error_from([&] { (void)registry.register_cache("Primitive Cache", cache); });
  CHECK(e.code() == status::invalid_arguments);
  CHECK(e.message() ==
        "cache name 'Primitive Cache' has 'P' at position 0; names use only [a-z0-9_.-]");
  const auto empty = error_from([&] { (void)registry.register_cache("", cache); });
  CHECK(empty.code() == status::invalid_arguments);
  CHECK(empty.message() == "cache name is empty");
  CHECK(registry.list_caches().empty());
}

TEST_CASE("operations on a name that is not registered fail with not_found",
          "[control][cache][error]") {
  control_registry registry;
  toy_cache<> cache;
  auto reg = registry.register_cache("primitive", cache);
  const std::string expected = "cache 'constant' is not registered";
  SECTION("find_cache") {
    const auto e = error_from([&] { (void)registry.find_cache("constant"); });
    CHECK(e.code() == status::not_found);
    CHECK(e.message() == expected);
  }
  SECTION("set_capacity") {
    const auto e = error_from([&] { registry.set_capacity("constant", 1); });
    CHECK(e.code() == status::not_found);
    CHECK(e.message() == expected);
  }
  SECTION("flush") {
    const auto e = error_from([&] { registry.flush("constant"); });
    CHECK(e.code() == status::not_found);
    CHECK(e.message() == expected);
  }
  SECTION("a name that could never be registered is simply not found") {
    const auto e = error_from([&] { registry.flush("Bad Name\n"); });
    CHECK(e.code() == status::not_found);
    CHECK(e.message() == "cache 'Bad Name\\x0a' is not registered");
  }
  CHECK(cache.calls == 0);
}

TEST_CASE("an unregistered cache is neither listed nor called", "[control][cache]") {
  control_registry registry;
  toy_cache<> cache;
  std::optional<primcache::cache_handle> handle;
  {
    auto reg = registry.register_cache("primitive", cache);
    handle = registry.find_cache("primitive");
  }  // unregistered here
  const int calls_before = cache.calls;
  CHECK(registry.list_caches().empty());
  CHECK(error_from([&] { (void)registry.find_cache("primitive"); }).code() == status::not_found);

  SECTION("an old handle keeps its name and unit but every call fails with not_found") {
    CHECK(handle->name() == "primitive");
    CHECK(handle->unit() == capacity_unit::entries);
    const std::string expected = "cache 'primitive' is no longer registered";
    for (const auto& call : std::vector<std::function<void()>>{
             [&] { (void)handle->capacity(); }, [&] { (void)handle->size(); },
             [&] { (void)handle->stats(); }, [&] { (void)handle->info(); },
             [&] { handle->set_capacity(1); }, [&] { handle->flush(); }}) {
      const auto e = error_from(call);
      CHECK(e.code() == status::not_found);
      CHECK(e.message() == expected);
    }
  }
  CHECK(cache.calls == calls_before);
}

TEST_CASE("a cache registration is a movable owner", "[control][cache][registration]") {
  control_registry registry;
  toy_cache<> a, b;

  SECTION("a default registration is empty, and resetting it does nothing") {
    cache_registration none;
    CHECK_FALSE(none);
    none.reset();
    CHECK_FALSE(none);
  }
  SECTION("moving hands the registration over; the source is empty") {
    auto first = registry.register_cache("a", a);
    cache_registration moved = std::move(first);
    CHECK_FALSE(first);  // NOLINT(bugprone-use-after-move): specified state
    REQUIRE(moved);
    CHECK(moved.name() == "a");
    CHECK(registry.list_caches().size() == 1);
    first.reset();  // the empty source unregisters nothing
    CHECK(registry.list_caches().size() == 1);
  }
  SECTION("move assignment unregisters what the target held") {
    auto ra = registry.register_cache("a", a);
    auto rb = registry.register_cache("b", b);
    ra = std::move(rb);
    const auto caches = registry.list_caches();
    REQUIRE(caches.size() == 1);
    CHECK(caches[0].name == "b");
    CHECK(ra.name() == "b");
  }
  SECTION("reset unregisters at once and may be repeated") {
    auto ra = registry.register_cache("a", a);
    ra.reset();
    CHECK_FALSE(ra);
    CHECK(registry.list_caches().empty());
    ra.reset();
    CHECK(registry.list_caches().empty());
  }
}

TEST_CASE("a registration may outlive its registry", "[control][cache][registration]") {
  toy_cache<> cache;
  cache_registration reg;
  {
    control_registry registry;
    reg = registry.register_cache("primitive", cache);
  }
  REQUIRE(reg);
  CHECK(reg.handle().capacity() == 100);
  reg.reset();
  CHECK_FALSE(reg);
}

namespace {

// A cache whose members call back into the registry, as a cache that reports
// through control, or unregisters itself, might.
class reentrant_cache {
 public:
  explicit reentrant_cache(control_registry& r) : registry_(r) {}
  std::uint64_t capacity() const { return capacity_; }
  void set_capacity(std::uint64_t n) {
    capacity_ = n;
    seen_from_inside = registry_.list_caches();  // calls this cache again
    registry_.set_switch("reentrant.flag", true);
  }
  std::uint64_t size() const { return 0; }
  minimal_stats stats() const { return {}; }
  void clear() { registration.reset(); }  // unregisters itself from inside a call

  control_registry& registry_;
  std::uint64_t capacity_ = 1;
  std::vector<cache_info> seen_from_inside;
  cache_registration registration;
};

}  // namespace

TEST_CASE("a cache may call back into the registry from its members", "[control][cache]") {
  control_registry registry;
  reentrant_cache cache(registry);
  auto flag = registry.register_switch("reentrant.flag", "set by the cache", false);
  cache.registration = registry.register_cache("reentrant", cache);

  SECTION("set_capacity lists the caches (itself included) and flips a switch") {
    registry.set_capacity("reentrant", 9);
    REQUIRE(cache.seen_from_inside.size() == 1);
    CHECK(cache.seen_from_inside[0].capacity == 9);
    CHECK(flag.on());
  }
  SECTION("a member that unregisters its own cache returns, and the cache is gone") {
    registry.flush("reentrant");
    CHECK_FALSE(cache.registration);
    CHECK(registry.list_caches().empty());
  }
}

namespace {
toy_cache<> process_cache;
}  // namespace

TEST_CASE("the process-wide registry is one object that the free functions use",
          "[control][cache][global]") {
  CHECK(&primcache::control() == &primcache::control());
  auto reg = primcache::register_cache("control_test.process", process_cache, capacity_unit::bytes);
  primcache::control().set_capacity("control_test.process", 64);
  CHECK(process_cache.capacity_ == 64);
  CHECK(primcache::control().find_cache("control_test.process").unit() == capacity_unit::bytes);
  reg.reset();
  CHECK(error_from([] { (void)primcache::control().find_cache("control_test.process"); }).code() ==
        status::not_found);
}
