#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "primcache/base/env.hpp"

namespace {
constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();

// Sets an environment variable for the scope of a test.
struct scoped_env {
  scoped_env(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~scoped_env() { ::unsetenv(name_); }
  const char* name_;
};

bool reported(std::string_view name) {
  auto all = primcache::env_reports();
  return std::any_of(all.begin(), all.end(),
                     [&](const std::string& m) { return m.find(name) != std::string::npos; });
}
}  // namespace

TEST_CASE("parse_int accepts whole decimal integers within range", "[base][env]") {
  CHECK(primcache::parse_int("0", 0, 10).value() == 0);
  CHECK(primcache::parse_int("10", 0, 10).value() == 10);
  CHECK(primcache::parse_int("+7", 0, 10).value() == 7);
  CHECK(primcache::parse_int("-5", -10, 10).value() == -5);
  CHECK(primcache::parse_int("9223372036854775807", 0, std::numeric_limits<std::int64_t>::max())
            .value() == std::numeric_limits<std::int64_t>::max());
}

TEST_CASE("parse_int rejects anything but a whole in-range integer", "[base][env]") {
  auto text = GENERATE(as<std::string>{}, "", "-5", "1e3", "12x", " 12", "12 ", "0x10", "++1",
                       "99999999999999999999", "2147483648", "1.0", "+", "-", "+-5", "-+5", "--5");
  auto r = primcache::parse_int(text, 0, kIntMax);
  INFO("text: '" << text << "'");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.why().code == primcache::status::invalid_arguments);
  CHECK(r.why().message.find("'" + text + "'") != std::string::npos);
}

TEST_CASE("parse_size reads byte counts with binary suffixes", "[base][env]") {
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  CHECK(primcache::parse_size("4096", kMax).value() == 4096);
  CHECK(primcache::parse_size("64K", kMax).value() == 64u << 10);
  CHECK(primcache::parse_size("64M", kMax).value() == 64u << 20);
  CHECK(primcache::parse_size("2GiB", kMax).value() == 2ull << 30);
  CHECK(primcache::parse_size("1t", kMax).value() == 1ull << 40);
  CHECK_FALSE(primcache::parse_size("", kMax).has_value());
  CHECK_FALSE(primcache::parse_size("M", kMax).has_value());
  CHECK_FALSE(primcache::parse_size("10X", kMax).has_value());
  CHECK_FALSE(primcache::parse_size("-1", kMax).has_value());
  CHECK_FALSE(primcache::parse_size("99999999999T", kMax).has_value());
  CHECK_FALSE(primcache::parse_size("2K", 1000).has_value());
}

TEST_CASE("parse_bool reads the usual spellings", "[base][env]") {
  CHECK(primcache::parse_bool("1").value());
  CHECK(primcache::parse_bool("ON").value());
  CHECK_FALSE(primcache::parse_bool("0").value());
  CHECK_FALSE(primcache::parse_bool("false").value());
  CHECK_FALSE(primcache::parse_bool("2").has_value());
}

TEST_CASE("env helpers fall back silently when unset and report malformed values once",
          "[base][env]") {
  SECTION("unset: the fallback, nothing reported") {
    ::unsetenv("PRIMCACHE_TEST_UNSET");
    CHECK(primcache::env_int("PRIMCACHE_TEST_UNSET", 42, 0, 100) == 42);
    CHECK_FALSE(reported("PRIMCACHE_TEST_UNSET"));
    CHECK_FALSE(primcache::env_string("PRIMCACHE_TEST_UNSET").has_value());
  }
  SECTION("well-formed: the value") {
    scoped_env e("PRIMCACHE_TEST_GOOD", "17");
    CHECK(primcache::env_int("PRIMCACHE_TEST_GOOD", 42, 0, 100) == 17);
    CHECK_FALSE(reported("PRIMCACHE_TEST_GOOD"));
  }
  SECTION("malformed: the fallback, reported with the variable, the value and the reason") {
    scoped_env e("PRIMCACHE_TEST_BAD", "1e3");
    CHECK(primcache::env_int("PRIMCACHE_TEST_BAD", 42, 0, 100) == 42);
    auto all = primcache::env_reports();
    auto it = std::find_if(all.begin(), all.end(), [](const std::string& m) {
      return m.find("PRIMCACHE_TEST_BAD") != std::string::npos;
    });
    REQUIRE(it != all.end());
    CHECK(it->find("'1e3'") != std::string::npos);
    CHECK(it->find("not an integer") != std::string::npos);
    CHECK(it->find("using 42") != std::string::npos);
    // A second read reports nothing new.
    auto before = primcache::env_reports().size();
    CHECK(primcache::env_int("PRIMCACHE_TEST_BAD", 42, 0, 100) == 42);
    CHECK(primcache::env_reports().size() == before);
  }
  SECTION("size and bool variables") {
    scoped_env s("PRIMCACHE_TEST_SIZE", "3M");
    scoped_env b("PRIMCACHE_TEST_BOOL", "maybe");
    CHECK(primcache::env_size("PRIMCACHE_TEST_SIZE", 1, 1ull << 40) == 3u << 20);
    CHECK(primcache::env_bool("PRIMCACHE_TEST_BOOL", true));
    CHECK(reported("PRIMCACHE_TEST_BOOL"));
  }
}
