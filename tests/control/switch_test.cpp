#include <catch2/catch.hpp>

#include <string>
#include <utility>

#include "error_from.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"

using primcache::control_registry;
using primcache::status;
using primcache::switch_registration;
using primcache::test::error_from;

TEST_CASE("a registered switch starts in its initial state and is flipped by name",
          "[control][switch]") {
  control_registry registry;
  const bool initial = GENERATE(false, true);
  auto tune = registry.register_switch("tune", "measure kernel configurations", initial);
  REQUIRE(tune);
  CHECK(tune.name() == "tune");
  CHECK(tune.on() == initial);
  CHECK(registry.get_switch("tune") == initial);

  SECTION("set_switch through the registry is what the owner reads") {
    registry.set_switch("tune", !initial);
    CHECK(tune.on() == !initial);
    CHECK(registry.get_switch("tune") == !initial);
  }
  SECTION("the owner may set it too") {
    tune.set(!initial);
    CHECK(registry.get_switch("tune") == !initial);
  }
  SECTION("list_switches reports name, description, state and initial state") {
    registry.set_switch("tune", !initial);
    const auto switches = registry.list_switches();
    REQUIRE(switches.size() == 1);
    CHECK(switches[0].name == "tune");
    CHECK(switches[0].description == "measure kernel configurations");
    CHECK(switches[0].on == !initial);
    CHECK(switches[0].initial == initial);
  }
}

TEST_CASE("switches are listed in name order", "[control][switch]") {
  control_registry registry;
  auto b = registry.register_switch("verbose", "trace creation", false);
  auto a = registry.register_switch("tune", "", true);
  const auto switches = registry.list_switches();
  REQUIRE(switches.size() == 2);
  CHECK(switches[0].name == "tune");
  CHECK(switches[0].on);
  CHECK(switches[1].name == "verbose");
  CHECK_FALSE(switches[1].on);
}

TEST_CASE("a switch name is registered once at a time and must be valid",
          "[control][switch][error]") {
  control_registry registry;
  auto tune = registry.register_switch("tune", "first", false);

  SECTION("a second registration fails with already_exists and changes nothing") {
    const auto e = error_from([&] { (void)registry.register_switch("tune", "second", true); });
    CHECK(e.code() == status::already_exists);
    CHECK(e.message() == "switch 'tune' is already registered");
    CHECK_FALSE(registry.get_switch("tune"));
    CHECK(registry.list_switches().at(0).description == "first");
  }
  SECTION("after unregistration the name may be registered anew") {
    tune.reset();
    auto again = registry.register_switch("tune", "second", true);
    CHECK(registry.get_switch("tune"));
  }
  SECTION("an invalid name fails with invalid_arguments") {
    const auto e = error_from([&] { (void)registry.register_switch("Tune", "", false); });
    CHECK(e.code() == status::invalid_arguments);
    CHECK(e.message() == "switch name 'Tune' has 'T' at position 0; names use only [a-z0-9_.-]");
    CHECK(registry.list_switches().size() == 1);
  }
  SECTION("a cache and a switch may share a name") {
    struct noop_cache {
      std::uint64_t capacity() { return 0; }
      void set_capacity(std::uint64_t) {}
      std::uint64_t size() { return 0; }
      primcache::cache_counters stats() { return {}; }
      void clear() {}
    } cache;
    auto reg = registry.register_cache("tune", cache);
    CHECK(registry.find_cache("tune").name() == "tune");
  }
}

TEST_CASE("a switch that is not registered is not found", "[control][switch][error]") {
  control_registry registry;
  SECTION("set_switch") {
    const auto e = error_from([&] { registry.set_switch("tune", true); });
    CHECK(e.code() == status::not_found);
    CHECK(e.message() == "switch 'tune' is not registered");
  }
  SECTION("get_switch") {
    const auto e = error_from([&] { (void)registry.get_switch("tune"); });
    CHECK(e.code() == status::not_found);
    CHECK(e.message() == "switch 'tune' is not registered");
  }
  SECTION("after its registration is gone") {
    { auto tune = registry.register_switch("tune", "", true); }
    CHECK(error_from([&] { registry.set_switch("tune", true); }).code() == status::not_found);
    CHECK(registry.list_switches().empty());
  }
}

TEST_CASE("a switch registration is a movable owner", "[control][switch][registration]") {
  control_registry registry;
  SECTION("an empty registration reads off") {
    switch_registration none;
    CHECK_FALSE(none);
    CHECK_FALSE(none.on());
    none.reset();
  }
  SECTION("moving hands the switch over; the source is empty and reads off") {
    auto first = registry.register_switch("tune", "", true);
    switch_registration moved = std::move(first);
    CHECK_FALSE(first);  // NOLINT(bugprone-use-after-move): specified state
    CHECK_FALSE(first.on());
    CHECK(moved.on());
    registry.set_switch("tune", false);
    CHECK_FALSE(moved.on());
  }
  SECTION("move assignment unregisters what the target held") {
    auto a = registry.register_switch("a", "", false);
    auto b = registry.register_switch("b", "", true);
    a = std::move(b);
    CHECK(a.name() == "b");
    CHECK(a.on());
    const auto switches = registry.list_switches();
    REQUIRE(switches.size() == 1);
    CHECK(switches[0].name == "b");
  }
  SECTION("reset unregisters and leaves the registration reading off") {
    auto a = registry.register_switch("a", "", true);
    a.reset();
    CHECK_FALSE(a);
    CHECK_FALSE(a.on());
    CHECK(registry.list_switches().empty());
  }
  SECTION("a registration may outlive its registry") {
    switch_registration kept;
    {
      control_registry local;
      kept = local.register_switch("tune", "", true);
    }
    CHECK(kept.on());
    kept.set(false);
    CHECK_FALSE(kept.on());
  }
}

TEST_CASE("the free register_switch registers with the process-wide registry",
          "[control][switch][global]") {
  auto reg = primcache::register_switch("control_test.switch", "a test switch", false);
  primcache::control().set_switch("control_test.switch", true);
  CHECK(reg.on());
  reg.reset();
  CHECK(error_from([] { (void)primcache::control().get_switch("control_test.switch"); }).code() ==
        status::not_found);
}
