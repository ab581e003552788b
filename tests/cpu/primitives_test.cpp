// The CPU backend through the public API: every primitive against plain
// loops written here (independent of the kernels' own references), the
// choice of implementation, the primitive cache and nested primitives.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "jit/process_jit.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/tensor/numeric.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

// Fills a memory's logical elements with values in [-1, 1]; padding stays 0.
void fill(memory& m, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  const auto& md = m.get_desc();
  std::memset(m.get_data_handle(), 0, md.size_bytes());
  auto* p = static_cast<float*>(m.get_data_handle());
  std::vector<std::int64_t> idx(md.ndims(), 0);
  const std::int64_t n = md.nelems();
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t rest = i;
    for (int d = md.ndims() - 1; d >= 0; --d) {
      idx[d] = rest % md.dims()[d];
      rest /= md.dims()[d];
    }
    p[md.offset_of(idx)] = dist(rng);
  }
}

float at(const memory& m, std::initializer_list<std::int64_t> idx) {
  return static_cast<const float*>(m.get_data_handle())[m.get_desc().offset_of(idx)];
}

memory make(memory::dims dims, tag t, unsigned seed) {
  memory m(memory::desc(dims, data_type::f32, t), cpu());
  fill(m, seed);
  return m;
}

}  // namespace

TEST_CASE("matmul matches plain loops, with bias and post-ops", "[cpu][primitive][matmul]") {
  auto [m, n, k] =
      GENERATE(std::tuple<int, int, int>{1, 1, 1}, std::tuple<int, int, int>{17, 31, 13},
               std::tuple<int, int, int>{64, 48, 100}, std::tuple<int, int, int>{5, 97, 257});
  memory src = make({m, k}, tag::ab, 1), wei = make({k, n}, tag::ab, 2);
  memory bias = make({1, n}, tag::ab, 3), addend = make({1, n}, tag::ab, 4);
  memory dst(memory::desc({m, n}, data_type::f32, tag::ab), cpu());
  post_ops ops;
  ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  ops.append_binary(algorithm::binary_add, addend.get_desc());
  primitive_attr attr;
  attr.set_post_ops(ops);
  matmul::primitive_desc pd(
      matmul::desc(src.get_desc(), wei.get_desc(), bias.get_desc(), dst.get_desc()), attr, cpu());
  if (effective_isa() >= cpu_isa::avx2) CHECK(pd.impl_info_str() == "jit:matmul");
  matmul(pd).execute(stream(cpu()),
                     {{PRIMCACHE_ARG_SRC, src},
                      {PRIMCACHE_ARG_WEIGHTS, wei},
                      {PRIMCACHE_ARG_BIAS, bias},
                      {PRIMCACHE_ARG_DST, dst},
                      {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1, addend}});
  int bad = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = at(bias, {0, j});
      for (int x = 0; x < k; ++x) acc += double(at(src, {i, x})) * at(wei, {x, j});
      const double expected = std::max(acc, 0.0) + at(addend, {0, j});
      // f32 accumulation of k products of values in [-1, 1]: error grows
      // like k * eps in the worst case.
      if (std::abs(at(dst, {i, j}) - expected) > 1e-5 * (k + 1)) ++bad;
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("batched matmul broadcasts weights of batch 1", "[cpu][primitive][matmul]") {
  memory src = make({3, 7, 9}, tag::abc, 5), wei = make({1, 9, 11}, tag::abc, 6);
  memory dst(memory::desc({3, 7, 11}, data_type::f32, tag::abc), cpu());
  matmul(
      matmul::primitive_desc(matmul::desc(src.get_desc(), wei.get_desc(), dst.get_desc()), cpu()))
      .execute(stream(cpu()),
               {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}});
  int bad = 0;
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 7; ++i)
      for (int j = 0; j < 11; ++j) {
        double acc = 0;
        for (int x = 0; x < 9; ++x) acc += double(at(src, {b, i, x})) * at(wei, {0, x, j});
        if (std::abs(at(dst, {b, i, j}) - acc) > 1e-4) ++bad;
      }
  CHECK(bad == 0);
}

TEST_CASE("convolution matches plain loops across layouts and parameters",
          "[cpu][primitive][convolution]") {
  struct shape {
    int n, ic, ih, iw, oc, kh, kw, stride, pad, dil, groups;
  };
  auto s =
      GENERATE(shape{1, 16, 8, 8, 32, 3, 3, 1, 1, 0, 1}, shape{2, 3, 11, 9, 5, 3, 3, 2, 1, 0, 1},
               shape{1, 16, 9, 9, 16, 3, 3, 1, 2, 1, 1}, shape{1, 32, 7, 7, 32, 3, 3, 1, 1, 0, 32},
               shape{1, 8, 6, 6, 12, 1, 1, 1, 0, 0, 2});
  auto layout = GENERATE(tag::nchw, tag::nhwc, tag::nChw16c);
  const int ext_h = (s.kh - 1) * (s.dil + 1) + 1, ext_w = (s.kw - 1) * (s.dil + 1) + 1;
  const int oh = (s.ih + 2 * s.pad - ext_h) / s.stride + 1,
            ow = (s.iw + 2 * s.pad - ext_w) / s.stride + 1;
  memory src = make({s.n, s.ic, s.ih, s.iw}, layout, 7);
  memory wei = s.groups == 1
                   ? make({s.oc, s.ic, s.kh, s.kw}, tag::oihw, 8)
                   : make({s.groups, s.oc / s.groups, s.ic / s.groups, s.kh, s.kw}, tag::goihw, 8);
  memory bias = make({s.oc}, tag::a, 9);
  memory dst(memory::desc({s.n, s.oc, oh, ow}, data_type::f32, layout), cpu());
  post_ops ops;
  ops.append_eltwise(1.f, algorithm::eltwise_linear, 0.5f, 0.25f);
  primitive_attr attr;
  attr.set_post_ops(ops);
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                              src.get_desc(), wei.get_desc(), bias.get_desc(), dst.get_desc(),
                              {s.stride, s.stride}, {s.dil, s.dil}, {s.pad, s.pad}, {s.pad, s.pad});
  convolution_forward::primitive_desc pd(d, attr, cpu());
  convolution_forward(pd).execute(stream(cpu()), {{PRIMCACHE_ARG_SRC, src},
                                                  {PRIMCACHE_ARG_WEIGHTS, wei},
                                                  {PRIMCACHE_ARG_BIAS, bias},
                                                  {PRIMCACHE_ARG_DST, dst}});
  const int icg = s.ic / s.groups, ocg = s.oc / s.groups;
  int bad = 0;
  for (int n = 0; n < s.n; ++n)
    for (int o = 0; o < s.oc; ++o)
      for (int y = 0; y < oh; ++y)
        for (int x = 0; x < ow; ++x) {
          const int g = o / ocg;
          double acc = at(bias, {o});
          for (int c = 0; c < icg; ++c)
            for (int ky = 0; ky < s.kh; ++ky)
              for (int kx = 0; kx < s.kw; ++kx) {
                const int iy = y * s.stride - s.pad + ky * (s.dil + 1);
                const int ix = x * s.stride - s.pad + kx * (s.dil + 1);
                if (iy < 0 || iy >= s.ih || ix < 0 || ix >= s.iw) continue;
                const float w =
                    s.groups == 1 ? at(wei, {o, c, ky, kx}) : at(wei, {g, o % ocg, c, ky, kx});
                acc += double(at(src, {n, g * icg + c, iy, ix})) * w;
              }
          const double expected = 0.5 * acc + 0.25;
          if (std::abs(at(dst, {n, o, y, x}) - expected) > 1e-4) ++bad;
        }
  INFO("layout " << to_string(layout) << " impl " << pd.impl_info_str());
  CHECK(bad == 0);
}

TEST_CASE("reorders convert layouts and data types", "[cpu][primitive][reorder]") {
  memory src = make({2, 19, 5, 3}, tag::nchw, 10);
  SECTION("nchw to nChw16c and back is exact, with zero padding") {
    memory blocked(memory::desc({2, 19, 5, 3}, data_type::f32, tag::nChw16c), cpu());
    std::memset(blocked.get_data_handle(), 0x7f, blocked.get_desc().size_bytes());
    reorder(src, blocked).execute(stream(cpu()), src, blocked);
    memory back(src.get_desc(), cpu());
    reorder(blocked, back).execute(stream(cpu()), blocked, back);
    CHECK(std::memcmp(src.get_data_handle(), back.get_data_handle(), src.get_desc().size_bytes()) ==
          0);
    // channels 19..31 of the second block are padding
    CHECK(at(blocked, {0, 19, 0, 0}) == 0.f);
  }
  SECTION("f32 to bf16 rounds to nearest even") {
    memory bf(memory::desc({2, 19, 5, 3}, data_type::bf16, tag::nhwc), cpu());
    reorder(src, bf).execute(stream(cpu()), src, bf);
    const auto* b = static_cast<const std::uint16_t*>(bf.get_data_handle());
    int bad = 0;
    for (int c = 0; c < 19; ++c)
      if (b[bf.get_desc().offset_of({1, c, 4, 2})] != f32_to_bf16(at(src, {1, c, 4, 2}))) ++bad;
    CHECK(bad == 0);
  }
  SECTION("f32 to s8 with a scale rounds half to even and saturates") {
    memory s8(memory::desc({2, 19, 5, 3}, data_type::s8, tag::nchw), cpu());
    primitive_attr attr;
    attr.set_output_scales(0, {200.f});
    reorder(src, s8, attr).execute(stream(cpu()), src, s8);
    const auto* q = static_cast<const std::int8_t*>(s8.get_data_handle());
    int bad = 0;
    for (std::int64_t i = 0; i < src.get_desc().nelems(); ++i) {
      const float v = static_cast<const float*>(src.get_data_handle())[i] * 200.f;
      if (q[i] != f32_to_s8(v)) ++bad;
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("eltwise runs in one layout, and across layouts through nested primitives",
          "[cpu][primitive][eltwise][nested]") {
  memory src = make({1, 20, 4, 4}, tag::nchw, 11);
  SECTION("same layout: the kernel") {
    memory dst(src.get_desc(), cpu());
    eltwise_forward::primitive_desc pd(
        eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_tanh,
                              src.get_desc()),
        cpu());
    if (effective_isa() >= cpu_isa::avx2) CHECK(pd.impl_info_str() == "jit:eltwise");
    eltwise_forward(pd).execute(stream(cpu()),
                                {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
    CHECK(std::abs(at(dst, {0, 7, 1, 2}) - std::tanh(at(src, {0, 7, 1, 2}))) < 1e-6);
  }
  SECTION("different layouts: a nested reorder, then the eltwise in place") {
    set_primitive_cache_capacity(0);
    set_primitive_cache_capacity(1024);
    memory::desc blocked({1, 20, 4, 4}, data_type::f32, tag::nChw16c);
    memory dst(blocked, cpu());
    eltwise_forward::desc d(prop_kind::forward_inference, algorithm::eltwise_relu, src.get_desc(),
                            blocked);
    eltwise_forward::primitive_desc pd(d, cpu());
    CHECK(pd.impl_info_str() == "jit:eltwise:via_reorder");
    eltwise_forward prim(pd);
    CHECK(prim.creation_outcome() == lookup_outcome::miss);
    // The nested reorder is in the cache under its own key.
    CHECK(primitive_cache_contains(reorder::primitive_desc(cpu(), src.get_desc(), cpu(), blocked)));
    prim.execute(stream(cpu()), {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
    int bad = 0;
    for (int c = 0; c < 20; ++c)
      if (at(dst, {0, c, 3, 1}) != std::max(at(src, {0, c, 3, 1}), 0.f)) ++bad;
    CHECK(bad == 0);
    CHECK(at(dst, {0, 20, 0, 0}) == 0.f);  // padding
    eltwise_forward again(pd);
    CHECK(again.creation_outcome() == lookup_outcome::hit);
  }
}

TEST_CASE("the ISA cap chooses the implementation and is part of the key",
          "[cpu][primitive][isa]") {
  memory src = make({33, 20}, tag::ab, 12), wei = make({20, 18}, tag::ab, 13);
  memory dst_jit(memory::desc({33, 18}, data_type::f32, tag::ab), cpu());
  memory dst_ref(dst_jit.get_desc(), cpu());
  matmul::desc d(src.get_desc(), wei.get_desc(), dst_jit.get_desc());
  matmul::primitive_desc jit_pd(d, cpu());
  set_max_cpu_isa(cpu_isa::sse41);
  matmul::primitive_desc ref_pd(d, cpu());
  clear_max_cpu_isa();
  CHECK(ref_pd.impl_info_str() == "ref:matmul");
  matmul(jit_pd).execute(
      stream(cpu()),
      {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst_jit}});
  matmul(ref_pd).execute(
      stream(cpu()),
      {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst_ref}});
  int bad = 0;
  for (int i = 0; i < 33 * 18; ++i) {
    if (std::abs(static_cast<float*>(dst_jit.get_data_handle())[i] -
                 static_cast<float*>(dst_ref.get_data_handle())[i]) > 1e-4)
      ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("the thread count at creation is part of the key", "[cpu][primitive][threads]") {
  memory::desc md({8, 8}, data_type::f32, tag::ab);
  const int before = get_num_threads();
  set_num_threads(1);
  matmul::primitive_desc one(matmul::desc(md, md, md), cpu());
  set_num_threads(2);
  matmul::primitive_desc two(matmul::desc(md, md, md), cpu());
  set_num_threads(before);
  matmul a(one), b(two);
  CHECK(b.creation_outcome() == lookup_outcome::miss);
  CHECK(primitive_cache_contains(one));
  CHECK(primitive_cache_contains(two));
}

TEST_CASE("implementations decline what they cannot run, with reasons",
          "[cpu][primitive][errors]") {
  memory::desc s8({4, 4}, data_type::s8, tag::ab);
  CHECK_THROWS_WITH(matmul::primitive_desc(matmul::desc(s8, s8, s8), cpu()),
                    Catch::Matchers::Contains("not f32"));
  memory::desc f({4, 4}, data_type::f32, tag::ab);
  primitive_attr scaled;
  scaled.set_output_scales(0, {2.f});
  CHECK_THROWS_WITH(matmul::primitive_desc(matmul::desc(f, f, f), scaled, cpu()),
                    Catch::Matchers::Contains("output scales"));
  primitive_attr per_dim;
  per_dim.set_output_scales(2, {1.f, 2.f});
  CHECK_THROWS_WITH(reorder::primitive_desc(cpu(), f, cpu(), f, per_dim),
                    Catch::Matchers::Contains("need 4 values"));
  post_ops odd;
  odd.append_binary(algorithm::binary_add, memory::desc({4, 1}, data_type::f32, tag::ab));
  primitive_attr odd_attr;
  odd_attr.set_post_ops(odd);
  CHECK_THROWS_WITH(matmul::primitive_desc(matmul::desc(f, f, f), odd_attr, cpu()),
                    Catch::Matchers::Contains("binary post-op operand"));
  memory::desc m({4, 4}, data_type::f32, tag::ab);
  memory a(m, cpu());
  matmul prim(matmul::primitive_desc(matmul::desc(m, m, m), cpu()));
  CHECK_THROWS_WITH(
      prim.execute(stream(cpu()), {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_DST, a}}),
      Catch::Matchers::Contains("weights") &&
          (Catch::Matchers::Contains("not passed") || Catch::Matchers::Contains("missing")));
}

TEST_CASE("code memory returns to its baseline when evicted impls lose their last user",
          "[cpu][primitive][memory]") {
  set_primitive_cache_capacity(0);  // nothing cached holds code
  set_primitive_cache_capacity(1024);
  const std::size_t baseline = cpu_internal::code_bytes_in_use();
  {
    memory::desc md({24, 24}, data_type::f32, tag::ab);
    matmul held(matmul::primitive_desc(matmul::desc(md, md, md), cpu()));
    eltwise_forward other(eltwise_forward::primitive_desc(
        eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_exp, md), cpu()));
    CHECK(cpu_internal::code_bytes_in_use() > baseline);
    set_primitive_cache_capacity(0);  // evicted, but `held` and `other` still use them
    CHECK(cpu_internal::code_bytes_in_use() > baseline);
    memory a(md, cpu()), c(md, cpu());
    std::fill_n(static_cast<float*>(a.get_data_handle()), 24 * 24, 1.f);
    held.execute(stream(cpu()),
                 {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, a}, {PRIMCACHE_ARG_DST, c}});
    CHECK(static_cast<float*>(c.get_data_handle())[0] == 24.f);
  }
  CHECK(cpu_internal::code_bytes_in_use() == baseline);
  set_primitive_cache_capacity(1024);
}

// Run by CTest with PRIMCACHE_VERBOSE=1, which checks the output for
// nested_cache_hit: two eltwise primitives differing only in algorithm share
// their nested reorder, so the second finds it in the cache.
TEST_CASE("verbose output reports nested cache hits", "[.][verbose]") {
  memory::desc plain({1, 20, 4, 4}, data_type::f32, tag::nchw);
  memory::desc blocked({1, 20, 4, 4}, data_type::f32, tag::nChw16c);
  for (algorithm alg : {algorithm::eltwise_relu, algorithm::eltwise_tanh}) {
    eltwise_forward prim(eltwise_forward::primitive_desc(
        eltwise_forward::desc(prop_kind::forward_inference, alg, plain, blocked), cpu()));
    CHECK(prim.creation_outcome() == lookup_outcome::miss);
  }
}

TEST_CASE("blocked destinations keep their channel padding at zero",
          "[cpu][primitive][convolution][padding]") {
  // 20 output channels in nChw16c: channels 20..31 are padding. Grouped
  // (2 groups of 10, so group boundaries split a block) and depthwise.
  auto groups = GENERATE(2, 20);
  const int oc = 20, ic = 20;
  memory src = make({1, ic, 5, 5}, tag::nChw16c, 21);
  memory wei = make({groups, oc / groups, ic / groups, 3, 3}, tag::goihw, 22);
  memory dst(memory::desc({1, oc, 5, 5}, data_type::f32, tag::nChw16c), cpu());
  auto* d = static_cast<float*>(dst.get_data_handle());
  std::fill_n(d, dst.get_desc().size_bytes() / sizeof(float), std::nanf(""));
  convolution_forward::primitive_desc pd(
      convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                src.get_desc(), wei.get_desc(), memory::desc(), dst.get_desc(),
                                {1, 1}, {1, 1}, {1, 1}),
      cpu());
  convolution_forward(pd).execute(
      stream(cpu()),
      {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}});
  int nonzero_padding = 0;
  for (int c = oc; c < 32; ++c)
    for (int y = 0; y < 5; ++y)
      for (int x = 0; x < 5; ++x)
        if (!(d[dst.get_desc().offset_of({0, c, y, x})] == 0.f)) ++nonzero_padding;
  INFO("groups " << groups << " impl " << pd.impl_info_str());
  CHECK(nonzero_padding == 0);
}

TEST_CASE("batched matmul broadcasts a source of batch 1", "[cpu][primitive][matmul]") {
  const bool capped = GENERATE(false, true);  // the JIT kernel, then the reference
  if (capped) set_max_cpu_isa(cpu_isa::x86_64);
  memory src = make({1, 7, 9}, tag::abc, 31), wei = make({3, 9, 11}, tag::abc, 32);
  memory dst(memory::desc({3, 7, 11}, data_type::f32, tag::abc), cpu());
  matmul::primitive_desc pd(matmul::desc(src.get_desc(), wei.get_desc(), dst.get_desc()), cpu());
  clear_max_cpu_isa();
  matmul(pd).execute(
      stream(cpu()),
      {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}});
  int bad = 0;
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 7; ++i)
      for (int j = 0; j < 11; ++j) {
        double acc = 0;
        for (int x = 0; x < 9; ++x) acc += double(at(src, {0, i, x})) * at(wei, {b, x, j});
        if (std::abs(at(dst, {b, i, j}) - acc) > 1e-4) ++bad;
      }
  INFO("impl " << pd.impl_info_str());
  CHECK(bad == 0);
}

TEST_CASE("convolution accepts negative end padding (the stride leaves the last rows unread)",
          "[cpu][primitive][convolution]") {
  const bool capped = GENERATE(false, true);
  auto layout = GENERATE(tag::nchw, tag::nChw16c);
  // 1x1, stride 2, 14x13 input, padding_r = -1: output 7x7 (ResNet-50's
  // projection layers, smaller).
  const int ih = 14, iw = 13, oh = 7, ow = 7, ic = 16, oc = 24;
  if (capped) set_max_cpu_isa(cpu_isa::x86_64);
  memory src = make({2, ic, ih, iw}, layout, 33);
  memory wei = make({oc, ic, 1, 1}, tag::oihw, 34);
  memory dst(memory::desc({2, oc, oh, ow}, data_type::f32, layout), cpu());
  convolution_forward::primitive_desc pd(
      convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                src.get_desc(), wei.get_desc(), memory::desc(), dst.get_desc(),
                                {2, 2}, {0, 0}, {-1, 0}),
      cpu());
  clear_max_cpu_isa();
  convolution_forward(pd).execute(
      stream(cpu()),
      {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}});
  int bad = 0;
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < oc; ++o)
      for (int y = 0; y < oh; ++y)
        for (int x = 0; x < ow; ++x) {
          double acc = 0;
          for (int c = 0; c < ic; ++c)
            acc += double(at(src, {n, c, 2 * y, 2 * x})) * at(wei, {o, c, 0, 0});
          if (std::abs(at(dst, {n, o, y, x}) - acc) > 1e-4) ++bad;
        }
  INFO("impl " << pd.impl_info_str() << " layout " << to_string(layout));
  CHECK(bad == 0);
}
