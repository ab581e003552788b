#include <catch2/catch.hpp>
#include <limits>
#include <string>

#include "fake_backend.hpp"
#include "primcache/base/error.hpp"
#include "primcache/runtime/runtime.hpp"

using namespace primcache;
using Catch::Matchers::Contains;

namespace {
memory::desc md(memory::dims dims, format_tag tag) {
  return {dims, data_type::f32, tag};
}
}  // namespace

TEST_CASE("engines come from backends", "[runtime][engine]") {
  fake::install();
  SECTION("a kind no linked backend serves is unimplemented, with a hint") {
    CHECK_THROWS_MATCHES(engine(engine_kind::cpu, 0), error,
                         Catch::Matchers::Predicate<error>([](const error& e) {
                           return e.code() == status::unimplemented &&
                                  e.message().find("link primcache::cpu") != std::string::npos;
                         }));
    CHECK(engine::get_count(engine_kind::cpu) == 0);
  }
  SECTION("indices are checked") {
    CHECK(engine::get_count(engine_kind::gpu) == 2);
    CHECK_THROWS_WITH(engine(engine_kind::gpu, 2), Contains("out of range (2 available)"));
    engine e(engine_kind::gpu, 1);
    CHECK(e.get_kind() == engine_kind::gpu);
    CHECK(e.get_index() == 1);
  }
}

TEST_CASE("memory objects allocate, wrap and check their descriptors", "[runtime][memory]") {
  fake::install();
  engine eng(engine_kind::gpu, 0);
  SECTION("allocating") {
    memory m(md({4, 4}, format_tag::ab), eng);
    CHECK(m.get_data_handle() != nullptr);
    CHECK(m.get_desc().size_bytes() == 64);
  }
  SECTION("wrapping, then swapping the handle") {
    float buf[16] = {};
    memory m(md({4, 4}, format_tag::ab), eng, buf);
    CHECK(m.get_data_handle() == buf);
    float other[16] = {};
    m.set_data_handle(other);
    CHECK(m.get_data_handle() == other);
  }
  SECTION("format any cannot back a buffer") {
    CHECK_THROWS_WITH(memory(md({4, 4}, format_tag::any), eng), Contains("format any"));
  }
  SECTION("an empty memory says so") {
    memory empty;
    CHECK_FALSE(empty);
    CHECK_THROWS_WITH(empty.get_data_handle(), Contains("empty"));
  }
}

TEST_CASE("attributes validate what they are given", "[runtime][attr]") {
  post_ops ops;
  CHECK_THROWS_WITH(ops.append_eltwise(1.f, algorithm::binary_add, 0, 0),
                    Contains("not an eltwise algorithm"));
  CHECK_THROWS_WITH(ops.append_binary(algorithm::eltwise_relu, md({1, 4}, format_tag::ab)),
                    Contains("not supported"));
  CHECK_THROWS_WITH(ops.append_binary(algorithm::binary_add, memory::desc()),
                    Contains("concrete memory descriptor"));
  CHECK_THROWS_AS(ops.at(0), error);
  ops.append_eltwise(2.f, algorithm::eltwise_clip, -1.f, 1.f);
  CHECK(ops.len() == 1);
  CHECK(ops.kind(0) == post_ops::kind::eltwise);

  primitive_attr attr;
  CHECK_THROWS_WITH(attr.set_output_scales(0, {1.f, 2.f}), Contains("exactly one value"));
  CHECK_THROWS_WITH(attr.set_output_scales(3, {1.f}), Contains("not supported"));
  CHECK_THROWS_WITH(attr.set_output_scales(-1, {1.f}), Contains("not supported"));
  CHECK_THROWS_WITH(attr.set_output_scales(0, {}), Contains("empty"));
  attr.set_output_scales(2, {1.f, 2.f, 3.f});
  CHECK(attr.get_output_scales_mask() == 2);
}

TEST_CASE("matmul descriptors reject shapes that do not agree", "[runtime][matmul]") {
  auto a = md({4, 8}, format_tag::ab), b = md({8, 5}, format_tag::ab),
       c = md({4, 5}, format_tag::ab);
  CHECK_NOTHROW(matmul::desc(a, b, c));
  CHECK_NOTHROW(matmul::desc(a, b, md({1, 5}, format_tag::ab), c));
  CHECK_THROWS_WITH(matmul::desc(a, md({7, 5}, format_tag::ab), c), Contains("disagree on K"));
  CHECK_THROWS_WITH(matmul::desc(a, b, md({4, 6}, format_tag::ab)), Contains("is not M x N"));
  CHECK_THROWS_WITH(matmul::desc(a, b, md({4, 5}, format_tag::ab), c), Contains("bias"));
  CHECK_THROWS_WITH(matmul::desc(md({8}, format_tag::a), b, c), Contains("2-D or 3-D"));
  CHECK_THROWS_WITH(matmul::desc(a, md({2, 8, 5}, format_tag::abc), c),
                    Contains("same number of dimensions"));
  CHECK_THROWS_WITH(matmul::desc(memory::desc(), b, c), Contains("src descriptor is empty"));
  auto a3 = md({3, 4, 8}, format_tag::abc), c3 = md({3, 4, 5}, format_tag::abc);
  CHECK_NOTHROW(matmul::desc(a3, md({1, 8, 5}, format_tag::abc), c3));
  CHECK_THROWS_WITH(matmul::desc(a3, md({2, 8, 5}, format_tag::abc), c3),
                    Contains("weights batch 2 is neither 1 nor dst batch 3"));
  CHECK_THROWS_WITH(
      matmul::desc(a3, md({3, 8, 5}, format_tag::abc), md({2, 4, 5}, format_tag::abc)),
      Contains("src batch 3 is neither 1 nor dst batch 2"));
  SECTION("a source batch of 1 broadcasts over the weights' and the destination's batch") {
    CHECK_NOTHROW(matmul::desc(md({1, 4, 8}, format_tag::abc), md({3, 8, 5}, format_tag::abc), c3));
  }
}

TEST_CASE("convolution descriptors check channels, sizes and parameters",
          "[runtime][convolution]") {
  auto src = md({1, 8, 10, 10}, format_tag::nchw);
  auto wei = md({16, 8, 3, 3}, format_tag::oihw);
  auto dst = md({1, 16, 10, 10}, format_tag::nchw);
  auto make = [&](memory::desc s, memory::desc w, memory::desc d, memory::dims strides,
                  memory::dims dil, memory::dims pl, memory::dims pr, memory::desc bias = {}) {
    return convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, s,
                                     w, bias, d, strides, dil, pl, pr);
  };
  CHECK_NOTHROW(make(src, wei, dst, {1, 1}, {0, 0}, {1, 1}, {1, 1}));
  CHECK_NOTHROW(
      make(src, wei, md({1, 16, 6, 6}, format_tag::nchw), {1, 1}, {1, 1}, {0, 0}, {0, 0}));
  CHECK_THROWS_WITH(make(src, wei, dst, {1, 1}, {0, 0}, {0, 0}, {0, 0}),
                    Contains("output height 10 should be 8"));
  CHECK_THROWS_WITH(make(src, wei, dst, {0, 1}, {0, 0}, {1, 1}, {1, 1}), Contains("stride 0"));
  CHECK_THROWS_WITH(make(src, wei, dst, {1, 1}, {-1, 0}, {1, 1}, {1, 1}), Contains("negative"));
  CHECK_THROWS_WITH(make(src, wei, dst, {1, 1}, {0, 0}, {-1, 1}, {1, 1}),
                    Contains("start padding -1 is negative"));
  SECTION("negative end padding leaves the last input rows unread, as a strided 1x1 layer does") {
    // 56x56, 1x1, stride 2: (56 - 1 + 0 + pr) / 2 + 1 = 28 with pr = -1.
    auto s56 = md({1, 8, 56, 56}, format_tag::nchw), d28 = md({1, 16, 28, 28}, format_tag::nchw);
    auto w1 = md({16, 8, 1, 1}, format_tag::oihw);
    CHECK_NOTHROW(make(s56, w1, d28, {2, 2}, {0, 0}, {0, 0}, {-1, -1}));
    CHECK_NOTHROW(make(s56, w1, d28, {2, 2}, {0, 0}, {0, 0}, {0, 0}));
    CHECK_THROWS_WITH(make(s56, w1, d28, {2, 2}, {0, 0}, {0, 0}, {-3, -3}),
                      Contains("should be 27"));
  }
  SECTION("parameters whose arithmetic overflows are refused, never undefined behaviour") {
    constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max() / 2;
    CHECK_THROWS_WITH(make(src, wei, dst, {1, 1}, {big, 0}, {1, 1}, {1, 1}),
                      Contains("overflows 64 bits"));
    CHECK_THROWS_WITH(make(src, wei, dst, {1, 1}, {0, 0}, {big, 1}, {big, 1}),
                      Contains("overflows 64 bits"));
    CHECK_THROWS_WITH(make(src, wei, dst, {1, 1}, {0, 0}, {1, 1},
                           {std::numeric_limits<std::int64_t>::min() + 1, 1}),
                      Contains("overflows 64 bits"));
  }
  CHECK_THROWS_WITH(
      make(src, md({16, 4, 3, 3}, format_tag::oihw), dst, {1, 1}, {0, 0}, {1, 1}, {1, 1}),
      Contains("input channels"));
  CHECK_THROWS_WITH(
      make(src, wei, md({1, 12, 10, 10}, format_tag::nchw), {1, 1}, {0, 0}, {1, 1}, {1, 1}),
      Contains("output channels"));
  CHECK_THROWS_WITH(make(src, wei, dst, {1, 1}, {0, 0}, {1, 1}, {1, 1}, md({15}, format_tag::a)),
                    Contains("bias"));
  CHECK_THROWS_WITH(
      make(src, md({16, 8, 30, 3}, format_tag::oihw), dst, {1, 1}, {0, 0}, {1, 1}, {1, 1}),
      Contains("larger than the padded input"));
  CHECK_THROWS_WITH(make(src, wei, dst, {1}, {0, 0}, {1, 1}, {1, 1}), Contains("2 values"));
  CHECK_THROWS_WITH(
      make(md({8, 10, 10}, format_tag::abc), wei, dst, {1, 1}, {0, 0}, {1, 1}, {1, 1}),
      Contains("4-D"));
  // Grouped: 2 groups of 4 input and 8 output channels.
  CHECK_NOTHROW(
      make(src, md({2, 8, 4, 3, 3}, format_tag::goihw), dst, {1, 1}, {0, 0}, {1, 1}, {1, 1}));
  CHECK_THROWS_WITH(convolution_forward::desc(prop_kind::forward_inference, algorithm::eltwise_relu,
                                              src, wei, {}, dst, {1, 1}, {1, 1}, {1, 1}),
                    Contains("not a convolution algorithm"));
}

TEST_CASE("eltwise and reorder descriptors check their arguments", "[runtime][eltwise][reorder]") {
  auto a = md({2, 3}, format_tag::ab);
  CHECK_THROWS_WITH(eltwise_forward::desc(prop_kind::forward_inference, algorithm::binary_add, a),
                    Contains("not an eltwise algorithm"));
  CHECK_THROWS_WITH(eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_relu, a,
                                          md({3, 2}, format_tag::ab)),
                    Contains("differ in shape"));
  fake::install();
  engine eng(engine_kind::gpu, 0);
  CHECK_THROWS_WITH(reorder::primitive_desc(eng, a, eng, md({3, 2}, format_tag::ab)),
                    Contains("differ in shape"));
  CHECK_THROWS_WITH(reorder::primitive_desc(eng, a, eng, md({2, 3}, format_tag::any)),
                    Contains("concrete layouts"));
  SECTION("no implementation accepting the op is an unimplemented error listing why") {
    memory::desc s8({2, 3}, data_type::s8, format_tag::ab);
    CHECK_THROWS_MATCHES(reorder::primitive_desc(eng, s8, eng, s8), error,
                         Catch::Matchers::Predicate<error>([](const error& e) {
                           return e.code() == status::unimplemented &&
                                  e.message().find("fake:copy: fake copy only copies f32") !=
                                      std::string::npos;
                         }));
  }
  SECTION("a missing execution argument is named") {
    reorder r(reorder::primitive_desc(eng, a, eng, a));
    memory src(a, eng);
    CHECK_THROWS_WITH(r.execute(stream(eng), {{PRIMCACHE_ARG_FROM, src}}), Contains("missing"));
  }
  SECTION("empty handles say so") {
    CHECK_THROWS_WITH(primitive().execute(stream(eng), {}), Contains("empty"));
    CHECK_THROWS_WITH(primitive_desc().impl_info_str(), Contains("empty"));
  }
}
