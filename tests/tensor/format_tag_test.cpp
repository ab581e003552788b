#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "primcache/tensor/format_tag.hpp"

using primcache::format_tag;

namespace {

struct alias_case {
  std::string_view alias;
  format_tag tag;
  std::string_view canonical;
  int ndims;
};

}  // namespace

TEST_CASE("every alias is its canonical tag", "[tensor][format_tag]") {
  const auto c = GENERATE(values<alias_case>({
      {"x", format_tag::x, "a", 1},
      {"nc", format_tag::nc, "ab", 2},
      {"cn", format_tag::cn, "ba", 2},
      {"ncw", format_tag::ncw, "abc", 3},
      {"nwc", format_tag::nwc, "acb", 3},
      {"ntc", format_tag::ntc, "bac", 3},
      {"nchw", format_tag::nchw, "abcd", 4},
      {"nhwc", format_tag::nhwc, "acdb", 4},
      {"chwn", format_tag::chwn, "bcda", 4},
      {"oihw", format_tag::oihw, "abcd", 4},
      {"hwio", format_tag::hwio, "cdba", 4},
      {"ohwi", format_tag::ohwi, "acdb", 4},
      {"iohw", format_tag::iohw, "bacd", 4},
      {"goihw", format_tag::goihw, "abcde", 5},
      {"ncdhw", format_tag::ncdhw, "abcde", 5},
      {"ndhwc", format_tag::ndhwc, "acdeb", 5},
      {"goidhw", format_tag::goidhw, "abcdef", 6},
      {"nCw16c", format_tag::nCw16c, "aBc16b", 3},
      {"nChw8c", format_tag::nChw8c, "aBcd8b", 4},
      {"nChw16c", format_tag::nChw16c, "aBcd16b", 4},
      {"nCdhw16c", format_tag::nCdhw16c, "aBcde16b", 5},
      {"Ohwi16o", format_tag::Ohwi16o, "Acdb16a", 4},
      {"OIhw8i8o", format_tag::OIhw8i8o, "ABcd8b8a", 4},
      {"OIhw16i16o", format_tag::OIhw16i16o, "ABcd16b16a", 4},
      {"OIhw16o16i", format_tag::OIhw16o16i, "ABcd16a16b", 4},
      {"Goihw16g", format_tag::Goihw16g, "Abcde16a", 5},
      {"gOIhw16i16o", format_tag::gOIhw16i16o, "aBCde16c16b", 5},
      {"gOIhw16o16i", format_tag::gOIhw16o16i, "aBCde16b16c", 5},
  }));
  CAPTURE(c.alias);
  CHECK(primcache::to_string(c.tag) == c.canonical);
  CHECK(primcache::ndims_of(c.tag) == c.ndims);
  CHECK(primcache::parse_format_tag(c.alias) == c.tag);
  CHECK(primcache::parse_format_tag(c.canonical) == c.tag);
}

TEST_CASE("every concrete tag's name parses back to the tag", "[tensor][format_tag]") {
  int count = 0;
  for (int v = static_cast<int>(format_tag::a);; ++v) {
    const auto tag = static_cast<format_tag>(v);
    const std::string_view name = primcache::to_string(tag);
    if (name == "unknown") break;
    CAPTURE(name);
    CHECK(primcache::parse_format_tag(name) == tag);
    CHECK(primcache::ndims_of(tag) >= 1);
    CHECK(primcache::ndims_of(tag) <= 6);
    // Blocked tags are exactly those with a digit in their name.
    CHECK(primcache::is_blocked(tag) == (name.find_first_of("0123456789") != name.npos));
    ++count;
  }
  CHECK(count == static_cast<int>(format_tag::aBCde16c16b) - static_cast<int>(format_tag::a) + 1);
}

TEST_CASE("undef, any and unknown tags lay out nothing", "[tensor][format_tag]") {
  SECTION("undef") {
    CHECK(primcache::to_string(format_tag::undef) == "undef");
    CHECK(primcache::ndims_of(format_tag::undef) == 0);
    CHECK_FALSE(primcache::is_blocked(format_tag::undef));
    CHECK_FALSE(primcache::parse_format_tag("undef").has_value());
  }
  SECTION("any") {
    CHECK(primcache::to_string(format_tag::any) == "any");
    CHECK(primcache::ndims_of(format_tag::any) == 0);
    CHECK(primcache::parse_format_tag("any") == format_tag::any);
  }
  SECTION("a value outside the enum") {
    const auto bogus = static_cast<format_tag>(9999);
    CHECK(primcache::to_string(bogus) == "unknown");
    CHECK(primcache::ndims_of(bogus) == 0);
    CHECK_FALSE(primcache::is_blocked(bogus));
  }
  SECTION("names are case-sensitive and exact") {
    CHECK_FALSE(primcache::parse_format_tag("NCHW").has_value());
    CHECK_FALSE(primcache::parse_format_tag("nchw16c").has_value());
    CHECK_FALSE(primcache::parse_format_tag("").has_value());
    CHECK_FALSE(primcache::parse_format_tag("abcdefg").has_value());
  }
}
