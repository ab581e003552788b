#include <string>

#include <catch2/catch.hpp>

#include "config.hpp"
#include "embedded_defaults.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/runtime/runtime.hpp"

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

TEST_CASE("A malformed config is refused with a message naming the field", "[services][config]") {
  SECTION("a port out of range") {
    CHECK(refusal(R"({"admin": {"port": 70000}})") ==
          "primcached.json: admin.port: expected an integer in [0, 65535]");
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
}
