#include <string>

#include <catch2/catch.hpp>

#include "config.hpp"
#include "embedded_defaults.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/runtime/runtime.hpp"
#include "tune_mode.hpp"

namespace {

using namespace primcache;
using namespace primcache::primcached;

std::string refusal(const std::string& text) {
  try {
    const daemon_config c = load_config(text, "primcached.json", "/etc/primcache");
    apply_capacities(c);
  } catch (const error& e) {
    CHECK(e.code() == status::invalid_arguments);
    return e.message();
  }
  FAIL("the config was accepted: " << text);
  return "";
}

}  // namespace

TEST_CASE("The embedded default config loads", "[services][config]") {
  const daemon_config c = load_config(embedded_config(), "primcached.json", "");
  CHECK(c.admin_address == "127.0.0.1");
  CHECK(c.admin_port == 8477);
  CHECK(c.threads >= 1);
  CHECK(c.workload.empty());
  REQUIRE(!c.caches.empty());
  CHECK(c.caches[0].first == "primitive");
}

TEST_CASE("A config reads every field; a relative workload is found beside it",
          "[services][config]") {
  const daemon_config c = load_config(R"({"admin": {"address": "127.0.0.1", "port": 0,
      "token_file": "/tmp/t", "threads": 2}, "threads": 3, "summary_interval_seconds": 0.5,
      "caches": {"primitive": 7}, "workload": "w/x.json"})",
                                      "primcached.json", "/etc/primcache");
  CHECK(c.admin_port == 0);
  CHECK(c.token_file == "/tmp/t");
  CHECK(c.admin_threads == 2);
  CHECK(c.threads == 3);
  CHECK(c.summary_interval_seconds == 0.5);
  CHECK(c.workload == "/etc/primcache/w/x.json");
  get_primitive_cache_capacity();
  const int before = get_primitive_cache_capacity();
  apply_capacities(c);
  CHECK(get_primitive_cache_capacity() == 7);
  set_primitive_cache_capacity(before);
}

TEST_CASE("A config's tune section: every field, a relative table beside the config",
          "[services][config][tune]") {
  const daemon_config none = load_config("{}", "primcached.json", "/etc/primcache");
  CHECK_FALSE(none.tune.enabled);
  CHECK(none.tune.table.empty());
  CHECK_FALSE(none.tune.max_nconfigs);
  const daemon_config c =
      load_config(R"({"tune": {"enabled": true, "table": "tables/t.json", "max_nconfigs": 4}})",
                  "primcached.json", "/etc/primcache");
  CHECK(c.tune.enabled == true);
  CHECK(c.tune.table == "/etc/primcache/tables/t.json");
  CHECK(c.tune.max_nconfigs == 4u);
  const daemon_config absolute =
      load_config(R"({"tune": {"enabled": false, "table": "/var/t.json"}})", "primcached.json",
                  "/etc/primcache");
  CHECK(absolute.tune.enabled == false);
  CHECK(absolute.tune.table == "/var/t.json");
}

TEST_CASE("A malformed tune section is refused naming the field", "[services][config][tune]") {
  CHECK(refusal(R"({"tune": true})") == "primcached.json: tune: expected an object");
  CHECK(refusal(R"({"tune": {"enabled": "yes"}})") ==
        "primcached.json: tune.enabled: expected true or false");
  CHECK(refusal(R"({"tune": {"table": ""}})") ==
        "primcached.json: tune.table: expected a file path (leave the field out for none)");
  CHECK(refusal(R"({"tune": {"table": 3}})") == "primcached.json: tune.table: expected a string");
  for (const char* n : {"0", "1001", "2.5", "\"4\""}) {
    INFO(n);
    CHECK_THAT(refusal(std::string(R"({"tune": {"max_nconfigs": )") + n + "}}"),
               Catch::StartsWith("primcached.json: tune.max_nconfigs: expected an integer"));
  }
  CHECK(refusal(R"({"tune": {"max_nconfigs": 0}})") ==
        "primcached.json: tune.max_nconfigs: expected an integer in [1, 1000]");
  CHECK_THAT(refusal(R"({"tune": {"tabel": "t.json"}})"),
             Catch::StartsWith("primcached.json: tune.tabel: unknown field"));
}

TEST_CASE("Tune settings: the command line over the config", "[services][config][tune]") {
  const daemon_config c = load_config(
      R"({"tune": {"enabled": true, "table": "/c/t.json", "max_nconfigs": 4}})", "c.json", "/c");
  const tune_settings from_config = resolve_tune_settings({}, c);
  CHECK(from_config.enabled == true);
  CHECK(from_config.table == "/c/t.json");
  CHECK(from_config.max_nconfigs == 4u);
  tune_flags flags;
  flags.enabled = false;
  flags.table = "flag.json";
  flags.max_nconfigs = 2;
  const tune_settings s = resolve_tune_settings(flags, c);
  CHECK(s.enabled == false);
  CHECK(s.table == "flag.json");
  CHECK(s.max_nconfigs == 2u);
  const tune_settings neither = resolve_tune_settings({}, load_config("{}", "c.json", "/c"));
  CHECK_FALSE(neither.enabled);
  CHECK(neither.table.empty());
  CHECK_FALSE(neither.max_nconfigs);
}

TEST_CASE("A malformed config is refused with a message naming the field", "[services][config]") {
  SECTION("a port out of range") {
    CHECK(refusal(R"({"admin": {"port": 70000}})") ==
          "primcached.json: admin.port: expected an integer in [0, 65535]");
  }
  SECTION("an admin address that is a host name, or empty") {
    // Refused here, naming the field, not when the admin server starts
    // after the workload has loaded.
    for (const char* address : {"localhost", "", "127.0.0.1:8477"}) {
      CHECK(refusal(std::string(R"({"admin": {"address": ")") + address + "\"}}") ==
            "primcached.json: admin.address: expected an IP address such as 127.0.0.1 or ::1 "
            "(primcached resolves no names)");
    }
    CHECK(load_config(R"({"admin": {"address": "::1"}})", "c.json", "").admin_address == "::1");
    CHECK(load_config(R"({"admin": {"address": "0.0.0.0"}})", "c.json", "").admin_address ==
          "0.0.0.0");
  }
  SECTION("threads that are not an integer") {
    CHECK(refusal(R"({"threads": "four"})") == "primcached.json: threads: expected an integer");
  }
  SECTION("a negative capacity") {
    CHECK(refusal(R"({"caches": {"primitive": -1}})") ==
          "primcached.json: caches.primitive: expected an integer in [0, 9007199254740992]");
  }
  SECTION("a cache that is not registered") {
    CHECK_THAT(refusal(R"({"caches": {"kernels": 4}})"),
               Catch::StartsWith("primcached.json: caches.kernels: no cache of that name "
                                 "(registered: ") &&
                   Catch::Contains("primitive"));
  }
  SECTION("an unknown field") {
    CHECK_THAT(refusal(R"({"admin": {"prot": 1}})"),
               Catch::StartsWith("primcached.json: admin.prot: unknown field"));
  }
  SECTION("a top level that is not an object") {
    CHECK(refusal("[1]") == "primcached.json: (top level): expected an object");
  }
  SECTION("a key given twice: refused, not the last one taken") {
    CHECK(refusal(R"({"threads": 1, "threads": 1024})") ==
          "primcached.json: line 1: duplicate key \"threads\" (a key may appear once in an "
          "object)");
    CHECK(refusal("{\"admin\": {\"port\": 1,\n  \"threads\": 1, \"port\": 2}}") ==
          "primcached.json: line 2: duplicate key \"port\" (a key may appear once in an object)");
    // The empty string is a key like another.
    CHECK(refusal(R"({"": 1, "": 2})") ==
          "primcached.json: line 1: duplicate key \"\" (a key may appear once in an object)");
  }
}
