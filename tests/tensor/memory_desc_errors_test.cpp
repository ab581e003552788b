#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/tensor/memory_desc.hpp"

using primcache::data_type;
using primcache::format_tag;
using primcache::memory_desc;
using primcache::status;

namespace {

using i64s = std::vector<std::int64_t>;
constexpr std::int64_t i64_max = std::numeric_limits<std::int64_t>::max();

// The message of the primcache::error `fn` throws; fails the test when it
// throws nothing or something else, or with another status.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const primcache::error& e) {
    CHECK(e.code() == status::invalid_arguments);
    return e.message();
  }
  FAIL("no primcache::error was thrown");
  return {};
}

struct tag_error_case {
  std::string what;
  i64s dims;
  data_type dt;
  format_tag tag;
  std::string message;
};

struct strides_error_case {
  std::string what;
  i64s dims;
  data_type dt;
  i64s strides;
  std::string message;
};

}  // namespace

TEST_CASE("building from a tag rejects malformed arguments with a clear message",
          "[tensor][memory_desc][errors]") {
  const auto c = GENERATE(values<tag_error_case>({
      {"no dims",
       {},
       data_type::f32,
       format_tag::a,
       "memory_desc: 0 dimensions given; a descriptor has 1 to 6"},
      {"seven dims",
       {1, 1, 1, 1, 1, 1, 1},
       data_type::f32,
       format_tag::any,
       "memory_desc: 7 dimensions given; a descriptor has 1 to 6"},
      {"a zero dim",
       {2, 0, 3},
       data_type::f32,
       format_tag::abc,
       "memory_desc: dimension 1 of 2x0x3 is 0; dimensions must be positive"},
      {"a negative dim",
       {-4, 3},
       data_type::f32,
       format_tag::ab,
       "memory_desc: dimension 0 of -4x3 is -4; dimensions must be positive"},
      {"a zero dim with any",
       {0},
       data_type::f32,
       format_tag::any,
       "memory_desc: dimension 0 of 0 is 0; dimensions must be positive"},
      {"data type undef",
       {2, 3},
       data_type::undef,
       format_tag::ab,
       "memory_desc: data type undef is not an element type"},
      {"an unknown data type",
       {2, 3},
       static_cast<data_type>(77),
       format_tag::ab,
       "memory_desc: data type 77 is not a known data type"},
      {"tag undef",
       {2, 3},
       data_type::f32,
       format_tag::undef,
       "memory_desc: format tag undef does not give a layout"},
      {"an unknown tag",
       {2, 3},
       data_type::f32,
       static_cast<format_tag>(9999),
       "memory_desc: format tag 9999 is not a known tag"},
      {"a tag of another rank",
       {2, 3, 4},
       data_type::f32,
       format_tag::nchw,
       "memory_desc: format tag abcd lays out 4 dimensions, but dims 2x3x4 has 3"},
      {"a blocked tag of another rank",
       {8, 16},
       data_type::f32,
       format_tag::nChw16c,
       "memory_desc: format tag aBcd16b lays out 4 dimensions, but dims 8x16 has 2"},
      {"bytes past int64",
       {std::int64_t{1} << 31, std::int64_t{1} << 31},
       data_type::f32,
       format_tag::ab,
       "memory_desc: f32 tensor 2147483648x2147483648 with strides 2147483648,1 is too large: "
       "its size in bytes overflows int64"},
      {"bytes past int64 with any",
       {std::int64_t{1} << 62, 4},
       data_type::s8,
       format_tag::any,
       "memory_desc: s8 tensor 4611686018427387904x4 is too large: its size in bytes overflows "
       "int64"},
      {"padding past int64",
       {1, i64_max, 1, 1},
       data_type::u8,
       format_tag::nChw16c,
       "memory_desc: u8 tensor 1x9223372036854775807x1x1 in aBcd16b is too large: its size in "
       "bytes overflows int64"},
      {"strides past int64",
       {1 << 20, 1 << 20, 1 << 20, 1 << 5},
       data_type::s8,
       format_tag::acdb,
       "memory_desc: s8 tensor 1048576x1048576x1048576x32 in acdb is too large: its size in "
       "bytes overflows int64"},
  }));
  CAPTURE(c.what);
  CHECK(error_of([&] { memory_desc md(c.dims, c.dt, c.tag); }) == c.message);
  const auto r = memory_desc::make(c.dims, c.dt, c.tag);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.why().code == status::invalid_arguments);
  CHECK(r.why().message == c.message);
}

TEST_CASE("building from strides rejects malformed arguments with a clear message",
          "[tensor][memory_desc][errors]") {
  const auto c = GENERATE(values<strides_error_case>({
      {"no dims",
       {},
       data_type::f32,
       {},
       "memory_desc: 0 dimensions given; a descriptor has 1 to 6"},
      {"a zero dim",
       {3, 0},
       data_type::f32,
       {1, 1},
       "memory_desc: dimension 1 of 3x0 is 0; dimensions must be positive"},
      {"data type undef",
       {3},
       data_type::undef,
       {1},
       "memory_desc: data type undef is not an element type"},
      {"too few strides",
       {2, 3, 4},
       data_type::f32,
       {12, 4},
       "memory_desc: 2 strides given for 3 dimensions (2x3x4)"},
      {"too many strides",
       {2},
       data_type::f32,
       {1, 1},
       "memory_desc: 2 strides given for 1 dimensions (2)"},
      {"a negative stride",
       {2, 3},
       data_type::f32,
       {3, -5},
       "memory_desc: stride 1 is -5; strides must not be negative"},
      {"a zero stride on a dimension of size > 1",
       {2, 3},
       data_type::f32,
       {0, 1},
       "memory_desc: stride 0 is 0 but dimension 0 has size 2; only a dimension of size 1 may "
       "have stride 0"},
      {"an extent past int64",
       {2, 2},
       data_type::s8,
       {i64_max / 2 + 1, 1},
       "memory_desc: s8 tensor 2x2 with strides 4611686018427387904,1 is too large: its size "
       "in bytes overflows int64"},
      {"bytes past int64",
       {2, 2},
       data_type::f32,
       {i64_max / 4, 1},
       "memory_desc: f32 tensor 2x2 with strides 2305843009213693951,1 is too large: its size "
       "in bytes overflows int64"},
  }));
  CAPTURE(c.what);
  CHECK(error_of([&] { memory_desc md(c.dims, c.dt, c.strides); }) == c.message);
  const auto r = memory_desc::make(c.dims, c.dt, c.strides);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.why().code == status::invalid_arguments);
  CHECK(r.why().message == c.message);
}

TEST_CASE("the largest sizes that fit are accepted", "[tensor][memory_desc][errors]") {
  const memory_desc md({i64_max}, data_type::s8, format_tag::a);
  CHECK(md.size_bytes() == static_cast<std::size_t>(i64_max));
  CHECK(error_of([&] { (void)md.with_data_type(data_type::f16); }) ==
        "memory_desc: f16 tensor 9223372036854775807 with strides 1 is too large: its size in "
        "bytes overflows int64");
  CHECK(error_of([&] { (void)md.with_offset0(1); }) ==
        "memory_desc: s8 tensor 9223372036854775807 with strides 1 at offset 1 is too large: its "
        "size in bytes overflows int64");
}

TEST_CASE("with_data_type and with_offset0 reject what construction would",
          "[tensor][memory_desc][errors]") {
  const memory_desc md({2, 3}, data_type::f32, format_tag::ab);
  SECTION("data type undef") {
    CHECK(error_of([&] { (void)md.with_data_type(data_type::undef); }) ==
          "memory_desc: data type undef is not an element type");
  }
  SECTION("the empty descriptor") {
    CHECK(error_of([&] { (void)memory_desc().with_data_type(data_type::f32); }) ==
          "memory_desc: the empty descriptor has no data type to change");
    CHECK(error_of([&] { (void)memory_desc().with_offset0(1); }) ==
          "memory_desc: offset0 needs a resolved layout, not undef");
  }
  SECTION("a negative offset") {
    CHECK(error_of([&] { (void)md.with_offset0(-1); }) ==
          "memory_desc: offset0 is -1; it must not be negative");
  }
  SECTION("an offset for an any descriptor") {
    const memory_desc any({2, 3}, data_type::f32, format_tag::any);
    CHECK(error_of([&] { (void)any.with_offset0(4); }) ==
          "memory_desc: offset0 needs a resolved layout, not f32:any:2x3");
  }
}

TEST_CASE("offset_of rejects indices it cannot place", "[tensor][memory_desc][errors]") {
  const memory_desc md({2, 17, 4, 5}, data_type::f32, format_tag::nChw16c);
  SECTION("an any descriptor") {
    const memory_desc any({2, 3}, data_type::f32, format_tag::any);
    CHECK(error_of([&] {
            (void)any.offset_of({0, 0});
          }) == "memory_desc::offset_of: descriptor f32:any:2x3 has no resolved layout");
  }
  SECTION("the empty descriptor") {
    CHECK(error_of([&] { (void)memory_desc().offset_of({}); }) ==
          "memory_desc::offset_of: descriptor undef has no resolved layout");
  }
  SECTION("an index of the wrong length") {
    CHECK(error_of([&] {
            (void)md.offset_of({0, 0, 0});
          }) == "memory_desc::offset_of: index has 3 entries for a 4-D descriptor");
  }
  SECTION("an entry past the padded dims") {
    CHECK(error_of([&] {
            (void)md.offset_of({0, 32, 0, 0});
          }) == "memory_desc::offset_of: index 32 of dimension 1 is outside [0, 32)");
  }
  SECTION("a negative entry") {
    CHECK(error_of([&] {
            (void)md.offset_of({0, 0, -1, 0});
          }) == "memory_desc::offset_of: index -1 of dimension 2 is outside [0, 4)");
  }
  SECTION("an entry inside the padding is fine") {
    CHECK(md.offset_of({0, 31, 0, 0}) == 320 + 15);
  }
}
