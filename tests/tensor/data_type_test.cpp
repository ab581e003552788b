#include <catch2/catch.hpp>

#include <cstddef>
#include <string_view>

#include "primcache/tensor/data_type.hpp"

using primcache::data_type;

namespace {

struct type_case {
  data_type dt;
  std::size_t size;
  std::string_view name;
  bool integral;
};

}  // namespace

TEST_CASE("each data type has its size, name and integrality", "[tensor][data_type]") {
  const auto c = GENERATE(values<type_case>({
      {data_type::f32, 4, "f32", false},
      {data_type::f16, 2, "f16", false},
      {data_type::bf16, 2, "bf16", false},
      {data_type::s8, 1, "s8", true},
      {data_type::u8, 1, "u8", true},
      {data_type::s32, 4, "s32", true},
  }));
  CAPTURE(c.name);
  CHECK(primcache::size_of(c.dt) == c.size);
  CHECK(primcache::to_string(c.dt) == c.name);
  CHECK(primcache::is_integral(c.dt) == c.integral);
  CHECK(primcache::is_known(c.dt));
  CHECK(primcache::parse_data_type(c.name) == c.dt);
}

TEST_CASE("data type values are stable, since keys hold them", "[tensor][data_type]") {
  CHECK(static_cast<int>(data_type::undef) == 0);
  CHECK(static_cast<int>(data_type::f32) == 1);
  CHECK(static_cast<int>(data_type::f16) == 2);
  CHECK(static_cast<int>(data_type::bf16) == 3);
  CHECK(static_cast<int>(data_type::s8) == 4);
  CHECK(static_cast<int>(data_type::u8) == 5);
  CHECK(static_cast<int>(data_type::s32) == 6);
}

TEST_CASE("undef and values outside the enum are no element type", "[tensor][data_type]") {
  SECTION("undef") {
    CHECK(primcache::size_of(data_type::undef) == 0);
    CHECK(primcache::to_string(data_type::undef) == "undef");
    CHECK_FALSE(primcache::is_known(data_type::undef));
    CHECK_FALSE(primcache::is_integral(data_type::undef));
  }
  SECTION("a value outside the enum") {
    const auto bogus = static_cast<data_type>(77);
    CHECK(primcache::size_of(bogus) == 0);
    CHECK(primcache::to_string(bogus) == "unknown");
    CHECK_FALSE(primcache::is_known(bogus));
  }
  SECTION("parsing rejects undef and unknown names") {
    CHECK_FALSE(primcache::parse_data_type("undef").has_value());
    CHECK_FALSE(primcache::parse_data_type("F32").has_value());
    CHECK_FALSE(primcache::parse_data_type("").has_value());
    CHECK_FALSE(primcache::parse_data_type("f64").has_value());
  }
}
