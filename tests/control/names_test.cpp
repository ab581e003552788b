#include <catch2/catch.hpp>

#include <string>

#include "primcache/base/error.hpp"
#include "primcache/control/capacity_unit.hpp"
#include "primcache/control/names.hpp"

using primcache::status;

namespace {
// The error check_control_name throws, or a default one when it throws none.
primcache::error name_error(std::string_view what, std::string_view name) {
  try {
    primcache::check_control_name(what, name);
  } catch (const primcache::error& e) {
    return e;
  }
  return primcache::error(status::success, "accepted");
}
}  // namespace

TEST_CASE("names of lowercase letters, digits, '_', '.' and '-' are accepted", "[control][names]") {
  const std::string name = GENERATE(as<std::string>{}, "a", "0", "primitive", "const_cache.cpu.0",
                                    "persist-redis", "a.b-c_d9", std::string(128, 'x'));
  INFO("name: " << name);
  CHECK(primcache::is_valid_control_name(name));
  CHECK_NOTHROW(primcache::check_control_name("cache", name));
}

TEST_CASE("other names are rejected with a message naming the problem", "[control][names]") {
  struct bad_name {
    std::string name;
    std::string message;
  };
  const bad_name bad = GENERATE(values<bad_name>({
      {"", "cache name is empty"},
      {"Primitive", "cache name 'Primitive' has 'P' at position 0; names use only [a-z0-9_.-]"},
      {"two words", "cache name 'two words' has ' ' at position 3; names use only [a-z0-9_.-]"},
      {"a/b", "cache name 'a/b' has '/' at position 1; names use only [a-z0-9_.-]"},
      {"caf\xc3\xa9",
       "cache name 'caf\\xc3\\xa9' has '\\xc3' at position 3; names use only "
       "[a-z0-9_.-]"},
      {"line\nbreak",
       "cache name 'line\\x0abreak' has '\\x0a' at position 4; names use only "
       "[a-z0-9_.-]"},
      {"quote'", "cache name 'quote\\x27' has '\\x27' at position 5; names use only [a-z0-9_.-]"},
      {std::string(129, 'x'),
       "cache name 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... is 129 characters "
       "long; the limit is 128"},
  }));
  INFO("name: " << bad.name);
  CHECK_FALSE(primcache::is_valid_control_name(bad.name));
  const primcache::error e = name_error("cache", bad.name);
  CHECK(e.code() == status::invalid_arguments);
  CHECK(e.message() == bad.message);
}

TEST_CASE("a capacity unit reads as the word metrics and the console show", "[control][unit]") {
  CHECK(primcache::to_string(primcache::capacity_unit::entries) == "entries");
  CHECK(primcache::to_string(primcache::capacity_unit::bytes) == "bytes");
  CHECK(primcache::to_string(primcache::capacity_unit::megabytes) == "MB");
  CHECK(primcache::to_string(static_cast<primcache::capacity_unit>(99)) == "unknown");
}
