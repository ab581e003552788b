#include <catch2/catch.hpp>

#include <string>

#include "primcache/base/error.hpp"
#include "primcache/base/result.hpp"

using primcache::error;
using primcache::failure;
using primcache::result;
using primcache::status;

TEST_CASE("an error carries its status and a message naming the reason", "[base][error]") {
  error e(status::permission_denied, "dir /x is writable by group");
  CHECK(e.code() == status::permission_denied);
  CHECK(e.message() == "dir /x is writable by group");
  CHECK(std::string(e.what()) == "permission_denied: dir /x is writable by group");
}

TEST_CASE("every status has a name, and values outside the enum say unknown", "[base][error]") {
  for (int s = 0; s <= static_cast<int>(status::runtime_error); ++s) {
    CHECK(primcache::to_string(static_cast<status>(s)) != "unknown");
  }
  CHECK(primcache::to_string(static_cast<status>(1000)) == "unknown");
}

TEST_CASE("a result holds either a value or a failure", "[base][result]") {
  SECTION("a value") {
    result<int> r = 7;
    REQUIRE(r.has_value());
    CHECK(static_cast<bool>(r));
    CHECK(r.value() == 7);
    CHECK(r.value_or(1) == 7);
  }
  SECTION("a failure throws primcache::error from value() and falls back in value_or") {
    result<int> r = failure{status::not_found, "blob 12 is missing"};
    REQUIRE_FALSE(r.has_value());
    CHECK(r.why().code == status::not_found);
    CHECK(r.value_or(3) == 3);
    try {
      (void)r.value();
      FAIL("value() did not throw");
    } catch (const error& e) {
      CHECK(e.code() == status::not_found);
      CHECK(e.message() == "blob 12 is missing");
    }
  }
  SECTION("a moved-out value") {
    result<std::string> r = std::string(100, 'x');
    std::string s = std::move(r).value();
    CHECK(s.size() == 100);
  }
}
