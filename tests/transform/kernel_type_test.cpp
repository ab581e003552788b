#include <catch2/catch.hpp>
#include <cstddef>
#include <limits>
#include <string>
#include <unordered_set>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/transform/kernel_type.hpp"

using namespace primcache;

TEST_CASE("kernel types print and parse back", "[transform][kernel_type]") {
  const std::string text =
      GENERATE(as<std::string>{}, "cpu/f32/abcd/jit", "gpu:0/bf16/aBcd16b/jit",
               "gpu:3/s8/acdb/reference", "cpu/u8/s64,1/generic", "cpu/s32/ABcd16b16a/my-lib",
               "cpu:1/f16/a/reference", "cpu/s8*0.05/abcd/jit", "gpu:0/u8*2/acdb/jit",
               "cpu/s32*1e-05/ab/jit", "cpu/u8*0.1/a/reference");
  const kernel_type t = kernel_type::parse(text);
  CHECK(t.to_string() == text);
  CHECK(kernel_type::parse(t.to_string()) == t);
}

TEST_CASE("kernel types compare and hash by every field", "[transform][kernel_type]") {
  const kernel_type a{place::cpu(), data_type::f32, layout(format_tag::nchw), library::jit()};
  SECTION("an alias is the same layout") {
    kernel_type b = a;
    b.layout = layout(format_tag::abcd);
    CHECK(a == b);
    CHECK(a.hash() == b.hash());
    CHECK(a.to_string() == "cpu/f32/abcd/jit");
  }
  SECTION("each field tells kernel types apart") {
    std::unordered_set<kernel_type> set{a};
    kernel_type p = a, d = a, l = a, lib = a, s8 = a, s8_scaled = a;
    p.place = place::gpu(0);
    d.data_type = data_type::bf16;
    l.layout = layout(format_tag::nhwc);
    lib.library = library::reference();
    s8.data_type = data_type::s8;
    s8_scaled.data_type = data_type::s8;
    s8_scaled.scale = 0.25f;
    for (const auto& t : {p, d, l, lib, s8, s8_scaled}) {
      CHECK_FALSE(t == a);
      CHECK(set.insert(t).second);
    }
    CHECK(set.size() == 7);
    CHECK(s8.to_string() == "cpu/s8/abcd/jit");
    CHECK(s8_scaled.to_string() == "cpu/s8*0.25/abcd/jit");
    CHECK(set.count(kernel_type::parse("cpu/f32/abcd/jit")) == 1);
  }
}

TEST_CASE("kernel types come from memory descriptors", "[transform][kernel_type]") {
  SECTION("a tag the descriptor matches") {
    CHECK(layout::of(memory_desc({2, 17, 3, 3}, data_type::f32, format_tag::nChw16c)) ==
          layout(format_tag::aBcd16b));
    CHECK(layout::of(memory_desc({2, 3, 4, 5}, data_type::s8, format_tag::nhwc)) ==
          layout(format_tag::acdb));
  }
  SECTION("strides when no tag names the layout") {
    const memory_desc md({2, 3}, data_type::f32, {8, 1});
    const layout l = layout::of(md);
    CHECK_FALSE(l.is_tag());
    CHECK(l.to_string() == "s8,1");
    CHECK(l.desc_for(md.dims(), data_type::f32) == md);
  }
}

TEST_CASE("malformed kernel types are refused with the text", "[transform][kernel_type]") {
  const std::string text = GENERATE(
      as<std::string>{}, "cpu/f32/abcd", "tpu/f32/abcd/jit", "cpu/f64/abcd/jit",
      "cpu/f32/nchw17/jit", "cpu/f32/abcd/", "gpu:x/f32/abcd/jit", "cpu/f32/s1,,2/jit",
      "cpu/f32/abcd/jit/x", "cpu/s8*/abcd/jit", "cpu/s8*x/abcd/jit", "cpu/s8*0.5x/abcd/jit",
      "cpu/s8*0/abcd/jit", "cpu/s8*-1/abcd/jit", "cpu/s8*inf/abcd/jit", "cpu/s8*nan/abcd/jit",
      "cpu/f32*0.5/abcd/jit", "cpu/bf16*2/abcd/jit");
  try {
    (void)kernel_type::parse(text);
    FAIL("parsed " << text);
  } catch (const error& e) {
    CHECK(e.code() == status::invalid_arguments);
    CHECK_THAT(e.what(), Catch::Contains("kernel type '" + text + "'"));
  }
}

TEST_CASE("a scale on floating-point data says why it does not fit", "[transform][kernel_type]") {
  kernel_type t = kernel_type::parse("cpu/s8*0.5/abcd/jit");
  CHECK(t.scale_problem().empty());
  t.data_type = data_type::f16;
  CHECK_THAT(t.scale_problem(), Catch::Contains("on f16 data"));
  t.scale = 1.f;
  CHECK(t.scale_problem().empty());
  t.data_type = data_type::u8;
  t.scale = -2.f;
  CHECK_THAT(t.scale_problem(), Catch::Contains("not a finite positive number"));
}

TEST_CASE("a layout refuses a tensor of another rank", "[transform][kernel_type]") {
  CHECK_THROWS_WITH(layout(format_tag::nchw).desc_for({2, 3}, data_type::f32),
                    Catch::Contains("abcd has 4 dimensions, the tensor 2"));
  CHECK_THROWS_WITH(layout::strided({3, 1}).desc_for({2, 3, 4}, data_type::f32),
                    Catch::Contains("s3,1 has 2 strides"));
}

TEST_CASE("every kernel type the API builds prints text that parses back",
          "[transform][kernel_type]") {
  std::vector<place> places{place::cpu(),
                            place::gpu(0),
                            place::gpu(7),
                            {engine_kind::cpu, 3},
                            place::gpu(std::numeric_limits<std::size_t>::max())};
  std::vector<layout> layouts{layout(), layout(format_tag::any), layout::strided({0, 1}),
                              layout::strided({64, 1}), layout::strided({1, 1, 1, 1, 1, 1})};
  for (int t = static_cast<int>(format_tag::a); t <= static_cast<int>(format_tag::aBCde16c16b);
       ++t) {
    layouts.emplace_back(static_cast<format_tag>(t));
  }
  const std::vector<library> libraries{
      library::jit(), library::generic(), library::reference(), {"my lib*2:x"}};
  const auto all = {data_type::undef, data_type::f32, data_type::f16, data_type::bf16,
                    data_type::s8,    data_type::u8,  data_type::s32};
  std::size_t checked = 0;
  for (const auto& p : places)
    for (const auto dt : all)
      for (const float scale : {1.f, 0.05f, 3e-7f, 1e30f})
        for (const auto& l : layouts)
          for (const auto& lib : libraries) {
            const kernel_type t{p, dt, l, lib, scale};
            if (!t.scale_problem().empty()) continue;  // parse refuses these (tested above)
            REQUIRE(lib.problem().empty());
            const std::string text = t.to_string();
            INFO(text);
            REQUIRE_NOTHROW(kernel_type::parse(text));
            REQUIRE(kernel_type::parse(text) == t);
            ++checked;
          }
  CHECK(checked > 1000);
}

TEST_CASE("a strided layout refuses a negative stride, as parse does", "[transform][kernel_type]") {
  try {
    (void)layout::strided({3, -1});
    FAIL("a negative stride was accepted");
  } catch (const error& e) {
    CHECK(e.code() == status::invalid_arguments);
    CHECK_THAT(e.what(), Catch::Contains("stride 1 is -1"));
  }
  CHECK_THROWS_AS(layout::parse("s3,-1"), error);
}

TEST_CASE("a library name that would not parse back says why", "[transform][kernel_type]") {
  CHECK(library::jit().problem().empty());
  CHECK(library{"my-lib v2"}.problem().empty());
  CHECK_THAT(library{}.problem(), Catch::Contains("empty"));
  CHECK_THAT(library{"a/b"}.problem(), Catch::Contains("'a/b' contains '/'"));
}
