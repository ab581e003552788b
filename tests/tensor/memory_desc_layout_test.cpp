#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/tensor/memory_desc.hpp"

using primcache::data_type;
using primcache::format_kind;
using primcache::format_tag;
using primcache::memory_desc;

namespace {

using i64s = std::vector<std::int64_t>;

i64s to_vec(std::span<const std::int64_t> s) {
  return i64s(s.begin(), s.end());
}

struct strides_case {
  format_tag tag;
  i64s dims;
  i64s strides;
};

}  // namespace

TEST_CASE("a plain tag gives the strides of its dimension order", "[tensor][memory_desc]") {
  const auto c = GENERATE(values<strides_case>({
      {format_tag::a, {7}, {1}},
      {format_tag::ab, {2, 3}, {3, 1}},
      {format_tag::ba, {2, 3}, {1, 2}},
      {format_tag::abc, {2, 3, 4}, {12, 4, 1}},
      {format_tag::acb, {2, 3, 4}, {12, 1, 3}},
      {format_tag::bac, {2, 3, 4}, {4, 8, 1}},
      {format_tag::cba, {2, 3, 4}, {1, 2, 6}},
      {format_tag::nchw, {2, 3, 4, 5}, {60, 20, 5, 1}},
      {format_tag::nhwc, {2, 3, 4, 5}, {60, 1, 15, 3}},
      {format_tag::chwn, {2, 3, 4, 5}, {1, 40, 10, 2}},
      {format_tag::oihw, {2, 3, 4, 5}, {60, 20, 5, 1}},
      {format_tag::hwio, {2, 3, 4, 5}, {1, 2, 30, 6}},
      {format_tag::ohwi, {2, 3, 4, 5}, {60, 1, 15, 3}},
      {format_tag::iohw, {2, 3, 4, 5}, {20, 40, 5, 1}},
      {format_tag::goihw, {2, 3, 4, 5, 6}, {360, 120, 30, 6, 1}},
      {format_tag::ndhwc, {2, 3, 4, 5, 6}, {360, 1, 90, 18, 3}},
      {format_tag::goidhw, {1, 2, 3, 4, 5, 6}, {720, 360, 120, 30, 6, 1}},
  }));
  CAPTURE(primcache::to_string(c.tag), c.dims);
  const memory_desc md(c.dims, data_type::f32, c.tag);
  CHECK(md.format_kind() == format_kind::blocked);
  CHECK(md.ndims() == static_cast<int>(c.dims.size()));
  CHECK(to_vec(md.dims()) == c.dims);
  CHECK(to_vec(md.padded_dims()) == c.dims);
  CHECK(to_vec(md.strides()) == c.strides);
  CHECK(md.inner_nblks() == 0);
  CHECK(md.is_plain());
  CHECK(md.is_dense());
  CHECK(md.matches(c.tag));
  CHECK(md.offset0() == 0);
  CHECK(to_vec(md.padded_offsets()) == i64s(c.dims.size(), 0));
}

TEST_CASE("nChw16c pads C to whole blocks of 16", "[tensor][memory_desc]") {
  const memory_desc md({2, 17, 4, 5}, data_type::f32, format_tag::nChw16c);

  SECTION("padded dims, strides and blocks") {
    CHECK(to_vec(md.padded_dims()) == i64s{2, 32, 4, 5});
    CHECK(to_vec(md.strides()) == i64s{640, 320, 80, 16});
    CHECK(md.inner_nblks() == 1);
    CHECK(to_vec(md.inner_blks()) == i64s{16});
    CHECK(to_vec(md.inner_idxs()) == i64s{1});
    CHECK_FALSE(md.is_plain());
  }
  SECTION("sizes count the padding, element counts by request") {
    CHECK(md.nelems() == 2 * 17 * 4 * 5);
    CHECK(md.nelems(true) == 2 * 32 * 4 * 5);
    CHECK(md.size_bytes() == 2 * 32 * 4 * 5 * 4);
    CHECK(md.with_data_type(data_type::s8).size_bytes() == 2 * 32 * 4 * 5);
  }
  SECTION("dense only when padding counts") {
    CHECK_FALSE(md.is_dense());
    CHECK(md.is_dense(true));
  }
  SECTION("offset_of follows n, C/16, h, w, C%16, padding included") {
    for (std::int64_t n = 0; n < 2; ++n) {
      for (std::int64_t c = 0; c < 32; ++c) {
        for (std::int64_t h = 0; h < 4; ++h) {
          for (std::int64_t w = 0; w < 5; ++w) {
            const std::int64_t expected = n * 640 + (c / 16) * 320 + h * 80 + w * 16 + c % 16;
            REQUIRE(md.offset_of({n, c, h, w}) == expected);
          }
        }
      }
    }
  }
  SECTION("the offsets of all padded indices fill the buffer exactly once") {
    std::vector<int> hits(md.nelems(true), 0);
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 0; c < 32; ++c)
        for (std::int64_t h = 0; h < 4; ++h)
          for (std::int64_t w = 0; w < 5; ++w) ++hits.at(md.offset_of({n, c, h, w}));
    CHECK(std::count(hits.begin(), hits.end(), 1) == static_cast<long>(hits.size()));
  }
}

TEST_CASE("nChw8c pads C to whole blocks of 8", "[tensor][memory_desc]") {
  const memory_desc md({1, 17, 3, 3}, data_type::bf16, format_tag::nChw8c);
  CHECK(to_vec(md.padded_dims()) == i64s{1, 24, 3, 3});
  CHECK(to_vec(md.strides()) == i64s{216, 72, 24, 8});
  CHECK(md.size_bytes() == 24 * 9 * 2);
  CHECK(md.offset_of({0, 9, 1, 2}) == 1 * 72 + 1 * 24 + 2 * 8 + 1);
}

TEST_CASE("OIhw16i16o blocks both channels, input outer, output inner", "[tensor][memory_desc]") {
  const memory_desc md({17, 33, 3, 3}, data_type::f32, format_tag::OIhw16i16o);
  CHECK(to_vec(md.padded_dims()) == i64s{32, 48, 3, 3});
  CHECK(to_vec(md.strides()) == i64s{6912, 2304, 768, 256});
  CHECK(to_vec(md.inner_blks()) == i64s{16, 16});
  CHECK(to_vec(md.inner_idxs()) == i64s{1, 0});
  CHECK(md.size_bytes() == 32 * 48 * 9 * 4);
  CHECK(md.is_dense(true));
  CHECK_FALSE(md.is_dense());
  for (std::int64_t o = 0; o < 32; ++o) {
    for (std::int64_t i = 0; i < 48; ++i) {
      for (std::int64_t h = 0; h < 3; ++h) {
        for (std::int64_t w = 0; w < 3; ++w) {
          const std::int64_t expected =
              (o / 16) * 6912 + (i / 16) * 2304 + h * 768 + w * 256 + (i % 16) * 16 + o % 16;
          REQUIRE(md.offset_of({o, i, h, w}) == expected);
        }
      }
    }
  }
}

TEST_CASE("OIhw16o16i puts input channels innermost", "[tensor][memory_desc]") {
  const memory_desc md({32, 16, 1, 1}, data_type::f32, format_tag::OIhw16o16i);
  CHECK(to_vec(md.inner_idxs()) == i64s{0, 1});
  CHECK(md.offset_of({17, 5, 0, 0}) == 1 * 256 + (17 % 16) * 16 + 5);
}

TEST_CASE("grouped blocked weights keep the group outermost", "[tensor][memory_desc]") {
  const memory_desc md({2, 32, 48, 3, 3}, data_type::f32, format_tag::gOIhw16i16o);
  CHECK(to_vec(md.strides()) == i64s{13824, 6912, 2304, 768, 256});
  CHECK(md.size_bytes() == 2 * 32 * 48 * 9 * 4);
  CHECK(md.offset_of({1, 17, 20, 2, 1}) ==
        13824 + 1 * 6912 + 1 * 2304 + 2 * 768 + 256 + (20 % 16) * 16 + 17 % 16);
  CHECK(md.is_dense());
}

TEST_CASE("a plain offset is the dot product of index and strides", "[tensor][memory_desc]") {
  const memory_desc md({2, 3, 4, 5}, data_type::f32, format_tag::nhwc);
  CHECK(md.offset_of({1, 2, 3, 4}) == 60 + 2 + 45 + 12);
  CHECK(md.offset_of({0, 0, 0, 0}) == 0);
}

TEST_CASE("explicit strides describe plain layouts, gaps included", "[tensor][memory_desc]") {
  SECTION("row-major strides equal the ab tag") {
    const memory_desc md({2, 3}, data_type::f32, {3, 1});
    CHECK(md.is_plain());
    CHECK(md.is_dense());
    CHECK(md.matches(format_tag::ab));
    CHECK(md.size_bytes() == 24);
  }
  SECTION("padded rows: not dense, sized to the last row's padding") {
    const memory_desc md({2, 3}, data_type::f32, {4, 1});
    CHECK_FALSE(md.is_dense());
    CHECK_FALSE(md.is_dense(true));
    CHECK_FALSE(md.matches(format_tag::ab));
    CHECK(md.size_bytes() == 8 * 4);
    CHECK(md.offset_of({1, 2}) == 6);
  }
  SECTION("column-major strides are dense and match ba") {
    const memory_desc md({2, 3}, data_type::f32, {1, 2});
    CHECK(md.is_dense());
    CHECK(md.matches(format_tag::ba));
    CHECK(md.size_bytes() == 24);
  }
  SECTION("overlapping strides are not dense and still cover every address") {
    const memory_desc md({2, 2, 2}, data_type::f32, {4, 1, 1});
    CHECK_FALSE(md.is_dense());
    CHECK(md.size_bytes() == 8 * 4);
    const memory_desc tight({2, 2}, data_type::f32, {1, 1});
    CHECK_FALSE(tight.is_dense());
    CHECK(tight.size_bytes() == 3 * 4);  // offsets 0, 1, 1, 2
  }
  SECTION("a size-1 dimension may have any stride, 0 included") {
    const memory_desc md({1, 3}, data_type::f32, {0, 1});
    CHECK(md.is_dense());
    CHECK(md.matches(format_tag::ab));
    CHECK(md.size_bytes() == 12);
    const memory_desc far({1, 3}, data_type::f32, {1000, 1});
    CHECK(far.is_dense());
    CHECK(far.size_bytes() == 12);  // that stride addresses nothing
    CHECK(far == md);
  }
  SECTION("vectors, arrays, spans and braced lists build the same descriptor, in any mix") {
    const std::vector<std::int64_t> dims{2, 3, 4};
    const std::vector<std::int64_t> strides{12, 4, 1};
    const std::array<std::int64_t, 3> strides_array{12, 4, 1};
    const primcache::dims_array padded_dims{2, 3, 4, 0, 0, 0};
    const memory_desc lists({2, 3, 4}, data_type::u8, {12, 4, 1});
    CHECK(memory_desc(dims, data_type::u8, strides) == lists);
    CHECK(memory_desc(dims, data_type::u8, {12, 4, 1}) == lists);
    CHECK(memory_desc({2, 3, 4}, data_type::u8, strides_array) == lists);
    CHECK(memory_desc(std::span<const std::int64_t>(padded_dims.data(), 3), data_type::u8,
                      format_tag::abc) == lists);
    CHECK(lists.offset_of(std::vector<std::int64_t>{1, 2, 3}) == 12 + 8 + 3);
  }
}

TEST_CASE("matches compares the layout a tag gives for the same dims", "[tensor][memory_desc]") {
  SECTION("a plain layout matches its own tag only") {
    const memory_desc md({2, 3, 4, 5}, data_type::f32, format_tag::nchw);
    CHECK(md.matches(format_tag::nchw));
    CHECK(md.matches(format_tag::oihw));  // the same tag
    CHECK_FALSE(md.matches(format_tag::nhwc));
    CHECK_FALSE(md.matches(format_tag::nChw16c));
  }
  SECTION("size-1 dimensions make several tags match") {
    const memory_desc md({1, 1, 5, 5}, data_type::f32, format_tag::nhwc);
    CHECK(md.matches(format_tag::nchw));
    CHECK(md.matches(format_tag::nhwc));
    CHECK(md.matches(format_tag::chwn));  // n = c = 1: chwn is nhwc
    CHECK_FALSE(md.matches(format_tag::abdc));
  }
  SECTION("blocked layouts") {
    const memory_desc md({2, 17, 4, 5}, data_type::f32, format_tag::nChw16c);
    CHECK(md.matches(format_tag::nChw16c));
    CHECK_FALSE(md.matches(format_tag::nChw8c));
    CHECK_FALSE(md.matches(format_tag::nchw));
  }
  SECTION("data type and offset0 do not count") {
    const memory_desc md = memory_desc({2, 3}, data_type::s8, format_tag::ab).with_offset0(7);
    CHECK(md.matches(format_tag::ab));
  }
  SECTION("tags of another rank, any, undef and unknown values never match") {
    const memory_desc md({2, 3, 4, 5}, data_type::f32, format_tag::nchw);
    CHECK_FALSE(md.matches(format_tag::abc));
    CHECK_FALSE(md.matches(format_tag::abcde));
    CHECK_FALSE(md.matches(format_tag::any));
    CHECK_FALSE(md.matches(format_tag::undef));
    CHECK_FALSE(md.matches(static_cast<format_tag>(9999)));
  }
  SECTION("any and empty descriptors match nothing") {
    CHECK_FALSE(memory_desc({2, 3}, data_type::f32, format_tag::any).matches(format_tag::ab));
    CHECK_FALSE(memory_desc().matches(format_tag::ab));
  }
}

TEST_CASE("format_tag::any leaves the layout to be chosen", "[tensor][memory_desc]") {
  const memory_desc md({2, 17, 4, 5}, data_type::bf16, format_tag::any);
  CHECK(md.format_kind() == format_kind::any);
  CHECK(md.is_any());
  CHECK_FALSE(md.is_blocked());
  CHECK_FALSE(md.is_plain());
  CHECK_FALSE(md.is_dense());
  CHECK(md.strides().empty());
  CHECK(to_vec(md.padded_dims()) == i64s{2, 17, 4, 5});
  CHECK(md.nelems() == 680);
  CHECK(md.size_bytes() == 0);
  CHECK(md.data_type() == data_type::bf16);
}

TEST_CASE("the empty descriptor stands for an absent argument", "[tensor][memory_desc]") {
  const memory_desc md;
  CHECK(md.is_zero());
  CHECK(md.ndims() == 0);
  CHECK(md.dims().empty());
  CHECK(md.data_type() == data_type::undef);
  CHECK(md.format_kind() == format_kind::undef);
  CHECK(md.nelems() == 0);
  CHECK(md.size_bytes() == 0);
  CHECK_FALSE(md.is_dense());
  CHECK(md == memory_desc());
  CHECK_FALSE(memory_desc({1}, data_type::f32, format_tag::a).is_zero());
}

TEST_CASE("with_data_type and with_offset0 change one field", "[tensor][memory_desc]") {
  const memory_desc md({2, 3}, data_type::f32, format_tag::ab);
  SECTION("another data type") {
    const memory_desc h = md.with_data_type(data_type::f16);
    CHECK(h.data_type() == data_type::f16);
    CHECK(h.size_bytes() == 12);
    CHECK(to_vec(h.strides()) == i64s{3, 1});
    CHECK(md.data_type() == data_type::f32);
  }
  SECTION("an offset moves every element and grows the buffer") {
    const memory_desc o = md.with_offset0(5);
    CHECK(o.offset0() == 5);
    CHECK(o.offset_of({0, 0}) == 5);
    CHECK(o.offset_of({1, 2}) == 10);
    CHECK(o.size_bytes() == (5 + 6) * 4);
    CHECK(o.is_dense());
  }
  SECTION("an any descriptor may change data type") {
    const memory_desc a({4, 4}, data_type::f32, format_tag::any);
    CHECK(a.with_data_type(data_type::s8).data_type() == data_type::s8);
    CHECK(a.with_data_type(data_type::s8).is_any());
  }
}

TEST_CASE("make returns the descriptor the constructor builds", "[tensor][memory_desc]") {
  const std::vector<std::int64_t> dims{1, 17, 5, 5};
  SECTION("from a tag") {
    auto r = memory_desc::make(dims, data_type::f32, format_tag::nChw16c);
    REQUIRE(r.has_value());
    CHECK(r.value() == memory_desc(dims, data_type::f32, format_tag::nChw16c));
  }
  SECTION("from strides") {
    const std::vector<std::int64_t> strides{425, 25, 5, 1};
    auto r = memory_desc::make(dims, data_type::f32, strides);
    REQUIRE(r.has_value());
    CHECK(r.value() == memory_desc(dims, data_type::f32, format_tag::nchw));
  }
}

TEST_CASE("to_string names the data type, layout and dims", "[tensor][memory_desc]") {
  CHECK(memory_desc({1, 17, 5, 5}, data_type::f32, format_tag::nChw16c).to_string() ==
        "f32:aBcd16b:1x17x5x5");
  CHECK(memory_desc({2, 3, 4, 5}, data_type::f32, format_tag::nchw).to_string() ==
        "f32:abcd:2x3x4x5");
  CHECK(memory_desc({2, 3, 4, 5}, data_type::u8, format_tag::nhwc).to_string() ==
        "u8:acdb:2x3x4x5");
  CHECK(memory_desc({32, 48, 3, 3}, data_type::bf16, format_tag::OIhw16i16o).to_string() ==
        "bf16:ABcd16b16a:32x48x3x3");
  CHECK(memory_desc({2, 3}, data_type::f32, {4, 1}).to_string() == "f32:s4,1:2x3");
  CHECK(memory_desc({64, 64}, data_type::s8, format_tag::any).to_string() == "s8:any:64x64");
  CHECK(memory_desc({2, 3}, data_type::f32, format_tag::ab).with_offset0(5).to_string() ==
        "f32:ab:2x3:off5");
  // Size-1 dims: the first matching tag in enum order names the layout.
  CHECK(memory_desc({1, 1, 5, 5}, data_type::f32, format_tag::nhwc).to_string() ==
        "f32:abcd:1x1x5x5");
  CHECK(memory_desc().to_string() == "undef");
}
