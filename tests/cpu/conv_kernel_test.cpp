#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "jit/object_symbols.hpp"
#include "kernels/conv_config.hpp"
#include "kernels/conv_kernel.hpp"
#include "kernels/conv_schedule.hpp"
#include "kernels/conv_validation.hpp"
#include "kernels/conv_walk.hpp"
#include "naive_reference.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "test_isas.hpp"

namespace {

using cpu_test::test_isas;
using primcache::cpu_isa;
using primcache::data_type;
using primcache::format_tag;
using primcache::memory_desc;
namespace ci = primcache::cpu_internal;

// Accuracy. Inputs are uniform in [-1, 1] and weights are scaled by
// 1/sqrt(K) (K = IC/G * KH * KW taps), so every output and every partial sum
// is O(1). The kernel accumulates in f32 with FMAs (one rounding per tap), the
// reference in double: the error is about u * sqrt(K) * O(1) with u = 2^-24,
// 3e-6 at K = 4608, the largest K here. The eltwise post-ops add at most
// 5 ulp (ir_math.hpp) scaled by their slope (below 2 on O(1) inputs). 5e-5
// relative to max(1, |ref|) leaves a margin of more than 10.
constexpr float tolerance = 5e-5f;

primcache::thread_pool& pool() {
  static primcache::thread_pool p(3);
  return p;
}

// 64-byte aligned float storage.
struct buffer {
  explicit buffer(std::size_t floats)
      : raw(floats + 16),
        data(reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(raw.data()) + 63) &
                                      ~std::uintptr_t{63})),
        size(floats) {}
  std::vector<float> raw;
  float* data;
  std::size_t size;
};

struct shape {
  std::int64_t n = 1, ic = 16, oc = 16, ih = 8, iw = 8, kh = 3, kw = 3;
  std::int64_t sh = 1, sw = 1, dh = 0, dw = 0, pt = 1, pl = 1, pb = 1, pr = 1, g = 1;
  format_tag src = format_tag::nChw16c, dst = format_tag::nChw16c;
  format_tag wei = format_tag::undef;  // undef: the preferred layout
  bool bias = true;
  int nthr = 2;
};

std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d,
                      std::int64_t a, std::int64_t b) {
  return (in + a + b - ((k - 1) * (d + 1) + 1)) / s + 1;
}

ci::conv_problem make_problem(const shape& s) {
  ci::conv_problem p;
  const std::int64_t oh = out_size(s.ih, s.kh, s.sh, s.dh, s.pt, s.pb);
  const std::int64_t ow = out_size(s.iw, s.kw, s.sw, s.dw, s.pl, s.pr);
  p.src = memory_desc({s.n, s.ic, s.ih, s.iw}, data_type::f32, s.src);
  p.dst = memory_desc({s.n, s.oc, oh, ow}, data_type::f32, s.dst);
  p.stride_h = s.sh;
  p.stride_w = s.sw;
  p.dilation_h = s.dh;
  p.dilation_w = s.dw;
  p.pad_t = s.pt;
  p.pad_l = s.pl;
  p.pad_b = s.pb;
  p.pad_r = s.pr;
  p.groups = s.g;
  p.nthr = s.nthr;
  if (s.bias) p.bias = memory_desc({s.oc}, data_type::f32, format_tag::a);
  if (s.g == 1) {
    p.weights = memory_desc({s.oc, s.ic, s.kh, s.kw}, data_type::f32, format_tag::oihw);
  } else {
    p.weights =
        memory_desc({s.g, s.oc / s.g, s.ic / s.g, s.kh, s.kw}, data_type::f32, format_tag::goihw);
  }
  if (s.wei == format_tag::undef) {
    p.weights = ci::preferred_weights_desc(p).value();
  } else {
    p.weights = memory_desc(p.weights.dims(), data_type::f32, s.wei);
  }
  return p;
}

// Tensors for one problem: every buffer, padding included, starts as NaN
// (the kernel must not read padding into results), then the logical
// elements get random values.
struct tensors {
  explicit tensors(const ci::conv_problem& p, std::uint32_t seed)
      : src(p.src.size_bytes() / 4),
        wei(p.weights.size_bytes() / 4),
        bias(std::max<std::size_t>(p.bias.size_bytes() / 4, 1)),
        binary_storage() {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::fill(src.data, src.data + src.size, nan);
    std::fill(wei.data, wei.data + wei.size, nan);
    const auto sd = p.src.dims();
    for (std::int64_t a = 0; a < sd[0]; ++a)
      for (std::int64_t b = 0; b < sd[1]; ++b)
        for (std::int64_t c = 0; c < sd[2]; ++c)
          for (std::int64_t d = 0; d < sd[3]; ++d) src.data[p.src.offset_of({a, b, c, d})] = u(rng);
    const auto wd = p.weights.dims();
    const int nd = p.weights.ndims();
    const std::int64_t taps = wd[nd - 3] * wd[nd - 2] * wd[nd - 1];
    const float scale = 1.f / std::sqrt(static_cast<float>(taps));
    std::vector<std::int64_t> idx(static_cast<std::size_t>(nd), 0);
    const std::int64_t total = p.weights.nelems();
    for (std::int64_t e = 0; e < total; ++e) {
      std::int64_t rest = e;
      for (int d = nd - 1; d >= 0; --d) {
        idx[d] = rest % wd[d];
        rest /= wd[d];
      }
      wei.data[p.weights.offset_of(idx)] = u(rng) * scale;
    }
    for (std::size_t i = 0; i < bias.size; ++i) bias.data[i] = u(rng);
    // Binary operands: one buffer per post-op index, sized for the largest
    // broadcast (dst's layout).
    for (const auto& op : p.post_ops) {
      if (op.what != ci::post_op::kind::binary_add) continue;
      const std::size_t need = static_cast<std::size_t>(op.binary.arg_index) + 1;
      if (binary_storage.size() < need) binary_storage.resize(need);
      auto& b = binary_storage[op.binary.arg_index];
      b.resize(
          std::max<std::size_t>(p.dst.size_bytes() / 4, static_cast<std::size_t>(p.dst.dims()[1])));
      for (float& x : b) x = u(rng);
    }
    for (auto& b : binary_storage) binary.push_back(b.data());
  }
  ci::conv_args args(void* dst) const {
    return {src.data, wei.data, bias.data, dst, binary.empty() ? nullptr : binary.data()};
  }
  buffer src, wei, bias;
  std::vector<std::vector<float>> binary_storage;
  std::vector<const float*> binary;
};

std::vector<float> run_kernel(const ci::conv_kernel& k, const tensors& t) {
  const auto& p = k.problem();
  buffer dst(p.dst.size_bytes() / 4);
  std::fill(dst.data, dst.data + dst.size, -777.f);
  buffer scratch(k.scratchpad_bytes() / 4 + 1);
  k.execute(t.args(dst.data), scratch.data, pool());
  return std::vector<float>(dst.data, dst.data + dst.size);
}

std::vector<float> run_reference(const ci::conv_problem& p, const tensors& t) {
  std::vector<float> dst(p.dst.size_bytes() / 4, -777.f);
  cpu_test::naive_conv(p, t.args(dst.data()));
  return dst;
}

// Counts mismatches over the logical elements (and, when the kernel keeps it
// zero, the channel padding of a blocked dst).
int count_mismatches(const ci::conv_problem& p, const std::vector<float>& got,
                     const std::vector<float>& want, std::string& first) {
  int bad = 0;
  const auto d = p.dst.dims();
  const auto pd = p.dst.padded_dims();
  const std::int64_t cpad =
      (p.groups == 1 || (p.dst.dims()[1] == p.groups && p.src.dims()[1] == p.groups)) ? pd[1]
                                                                                      : d[1];
  for (std::int64_t n = 0; n < d[0]; ++n)
    for (std::int64_t c = 0; c < cpad; ++c)
      for (std::int64_t h = 0; h < d[2]; ++h)
        for (std::int64_t w = 0; w < d[3]; ++w) {
          const std::int64_t off = p.dst.offset_of({n, c, h, w});
          const float a = got[off];
          const float b = want[off];
          const bool ok = std::isnan(b)
                              ? std::isnan(a)
                              : std::fabs(a - b) <= tolerance * std::max(1.f, std::fabs(b));
          if (!ok && bad++ == 0) {
            first = "at (" + std::to_string(n) + "," + std::to_string(c) + "," + std::to_string(h) +
                    "," + std::to_string(w) + "): got " + std::to_string(a) + " want " +
                    std::to_string(b);
          }
        }
  return bad;
}

std::string describe(const ci::conv_problem& p, const ci::conv_config& c, cpu_isa isa) {
  return "src " + p.src.to_string() + " wei " + p.weights.to_string() + " dst " +
         p.dst.to_string() + " stride " + std::to_string(p.stride_h) + "," +
         std::to_string(p.stride_w) + " dil " + std::to_string(p.dilation_h) + "," +
         std::to_string(p.dilation_w) + " pad " + std::to_string(p.pad_t) + "," +
         std::to_string(p.pad_l) + "," + std::to_string(p.pad_b) + "," + std::to_string(p.pad_r) +
         " groups " + std::to_string(p.groups) + " nthr " + std::to_string(p.nthr) + " config " +
         std::to_string(c.ow_block) + "x" + std::to_string(c.oc_blocks) + " u" +
         std::to_string(c.ic_unroll) + " o" + std::to_string(static_cast<int>(c.order)) + " isa " +
         std::string(primcache::to_string(isa));
}

// Compiles, runs, and compares with the reference; returns the kernel.
std::unique_ptr<ci::conv_kernel> check_against_reference(const ci::conv_problem& p,
                                                         const ci::conv_config& c, cpu_isa isa,
                                                         std::uint32_t seed = 1) {
  INFO(describe(p, c, isa));
  auto k = ci::conv_kernel::create(p, c, isa);
  INFO((k ? std::string() : k.why().message));
  REQUIRE(k.has_value());
  tensors t(p, seed);
  const auto got = run_kernel(*k.value(), t);
  const auto want = run_reference(p, t);
  std::string first;
  const int bad = count_mismatches(p, got, want, first);
  INFO(first);
  CHECK(bad == 0);
  return std::move(k).value();
}

shape random_shape(std::mt19937& rng) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const format_tag acts[] = {format_tag::nchw, format_tag::nhwc, format_tag::nChw16c};
  shape s;
  s.n = pick(1, 2);
  const int kind = static_cast<int>(pick(0, 5));  // 0-3 plain, 4 depthwise, 5 grouped
  const std::int64_t sizes[] = {1, 2, 3, 5, 7, 13, 16, 17, 19, 31, 32, 33};
  if (kind == 4) {
    s.g = sizes[pick(0, 11)];
    s.ic = s.oc = s.g;
  } else if (kind == 5) {
    s.g = pick(2, 4);
    s.ic = s.g * sizes[pick(0, 9)];
    s.oc = s.g * sizes[pick(0, 11)];
  } else {
    s.ic = sizes[pick(0, 11)];
    s.oc = sizes[pick(0, 11)];
  }
  s.kh = pick(1, 5);
  s.kw = pick(1, 5);
  s.sh = pick(1, 3);
  s.sw = pick(1, 3);
  s.dh = pick(0, 2);
  s.dw = pick(0, 2);
  s.pt = pick(0, 3);
  s.pb = pick(0, 3);
  s.pl = pick(0, 3);
  s.pr = pick(0, 3);
  const std::int64_t ekh = (s.kh - 1) * (s.dh + 1) + 1;
  const std::int64_t ekw = (s.kw - 1) * (s.dw + 1) + 1;
  s.ih = std::max<std::int64_t>(pick(1, 23), ekh - s.pt - s.pb);
  s.iw = std::max<std::int64_t>(pick(1, 41), ekw - s.pl - s.pr);
  s.src = acts[pick(0, 2)];
  s.dst = acts[pick(0, 2)];
  const format_tag w4[] = {format_tag::undef, format_tag::oihw, format_tag::hwio,
                           format_tag::OIhw16i16o};
  const format_tag w5[] = {format_tag::undef, format_tag::goihw, format_tag::gohwi};
  s.wei = s.g == 1 ? w4[pick(0, 3)] : w5[pick(0, 2)];
  s.bias = pick(0, 1) == 1;
  s.nthr = static_cast<int>(pick(1, 3));
  return s;
}

}  // namespace

TEST_CASE("convolutions of random shapes and layouts match the reference at avx2 and avx512_core",
          "[cpu][conv]") {
  const auto seed = GENERATE(range(1u, 25u));
  std::mt19937 rng(seed);
  const shape s = random_shape(rng);
  const auto p = make_problem(s);
  for (cpu_isa isa : test_isas()) {
    check_against_reference(p, ci::default_conv_config(p, isa), isa, seed);
  }
}

TEST_CASE("large channel counts, size-1 dims and the ResNet layer shapes match the reference",
          "[cpu][conv]") {
  shape s;
  SECTION("a 1x1 convolution over 1024 channels (flattened rows)") {
    s.ic = 1024;
    s.oc = 48;
    s.ih = s.iw = 7;
    s.kh = s.kw = 1;
    s.pt = s.pl = s.pb = s.pr = 0;
  }
  SECTION("a 3x3 convolution over 512 channels, nhwc") {
    s.ic = 512;
    s.oc = 33;
    s.ih = s.iw = 5;
    s.src = s.dst = format_tag::nhwc;
  }
  SECTION("a stride-2 1x1 convolution (not flattened)") {
    s.ic = 64;
    s.oc = 64;
    s.ih = s.iw = 9;
    s.kh = s.kw = 1;
    s.sh = s.sw = 2;
    s.pt = s.pl = s.pb = s.pr = 0;
  }
  SECTION("the first layer: 7x7 stride 2 over 3 channels") {
    s.ic = 3;
    s.oc = 64;
    s.ih = s.iw = 30;
    s.kh = s.kw = 7;
    s.sh = s.sw = 2;
    s.pt = s.pl = s.pb = s.pr = 3;
    s.src = format_tag::nchw;
  }
  SECTION("a 1x1 image with a kernel that only touches padding on some rows") {
    s.ic = 5;
    s.oc = 7;
    s.ih = s.iw = 1;
    s.pt = s.pl = s.pb = s.pr = 2;
  }
  SECTION("a depthwise 3x3 convolution over 48 channels, nhwc") {
    s.ic = s.oc = s.g = 48;
    s.ih = s.iw = 11;
    s.src = s.dst = format_tag::nhwc;
  }
  SECTION("a row wider than every register tile") {
    s.ic = 8;
    s.oc = 40;
    s.ih = 3;
    s.iw = 131;
  }
  const auto p = make_problem(s);
  for (cpu_isa isa : test_isas()) check_against_reference(p, ci::default_conv_config(p, isa), isa);
}

TEST_CASE("every post-op is fused into the convolution's store", "[cpu][conv][post_ops]") {
  shape s;
  s.ic = 19;
  s.oc = 21;
  s.ih = 6;
  s.iw = 9;
  const auto layout = GENERATE(format_tag::nChw16c, format_tag::nhwc, format_tag::nchw);
  s.src = s.dst = layout;
  auto p = make_problem(s);
  using alg = ci::eltwise_alg;
  auto eltwise = [](alg a, float alpha = 0.f, float beta = 0.f, float scale = 1.f) {
    ci::post_op op;
    op.what = ci::post_op::kind::eltwise;
    op.eltwise = {a, alpha, beta, scale};
    return op;
  };
  auto binary = [](int index, ci::binary_broadcast b) {
    ci::post_op op;
    op.what = ci::post_op::kind::binary_add;
    op.binary = {index, b};
    return op;
  };
  SECTION("relu") {
    p.post_ops = {eltwise(alg::relu)};
  }
  SECTION("leaky relu with a scale") {
    p.post_ops = {eltwise(alg::relu, 0.1f, 0.f, 2.f)};
  }
  SECTION("gelu_erf") {
    p.post_ops = {eltwise(alg::gelu_erf)};
  }
  SECTION("gelu_tanh") {
    p.post_ops = {eltwise(alg::gelu_tanh)};
  }
  SECTION("tanh") {
    p.post_ops = {eltwise(alg::tanh)};
  }
  SECTION("sigmoid") {
    p.post_ops = {eltwise(alg::sigmoid)};
  }
  SECTION("exp") {
    p.post_ops = {eltwise(alg::exp)};
  }
  SECTION("linear") {
    p.post_ops = {eltwise(alg::linear, 0.5f, -0.25f)};
  }
  SECTION("clip") {
    p.post_ops = {eltwise(alg::clip, -0.3f, 0.4f)};
  }
  SECTION("binary add of a dst-shaped tensor") {
    p.post_ops = {binary(0, ci::binary_broadcast::none)};
  }
  SECTION("binary add per channel") {
    p.post_ops = {binary(0, ci::binary_broadcast::per_channel)};
  }
  SECTION("binary add of a scalar") {
    p.post_ops = {binary(0, ci::binary_broadcast::scalar)};
  }
  SECTION("a chain: sum, relu, per-channel add, clip") {
    p.post_ops = {binary(1, ci::binary_broadcast::none), eltwise(alg::relu),
                  binary(0, ci::binary_broadcast::per_channel), eltwise(alg::clip, 0.f, 1.f)};
  }
  SECTION("a chain the epilogue applies to several pixels at once: sum, gelu_erf, adds") {
    // gelu_erf makes the epilogue join a block's pixels into one wide
    // vector; each pixel's dst-shaped operand must still be its own.
    p.post_ops = {binary(1, ci::binary_broadcast::none), eltwise(alg::gelu_erf),
                  binary(0, ci::binary_broadcast::per_channel),
                  binary(2, ci::binary_broadcast::scalar), eltwise(alg::tanh)};
  }
  for (cpu_isa isa : test_isas()) check_against_reference(p, ci::default_conv_config(p, isa), isa);
}

TEST_CASE("non-default configurations give different code and the same results",
          "[cpu][conv][config]") {
  shape s;
  SECTION("a 3x3 convolution") {
    s.ic = 32;
    s.oc = 48;
    s.ih = 10;
    s.iw = 29;
  }
  SECTION("a 1x1 convolution") {
    s.ic = 64;
    s.oc = 64;
    s.ih = s.iw = 14;
    s.kh = s.kw = 1;
    s.pt = s.pl = s.pb = s.pr = 0;
    s.src = s.dst = format_tag::nhwc;
  }
  SECTION("a depthwise convolution") {
    s.ic = s.oc = s.g = 40;
    s.ih = s.iw = 12;
  }
  const auto p = make_problem(s);
  for (cpu_isa isa : test_isas()) {
    const auto def = ci::default_conv_config(p, isa);
    auto cands = ci::conv_config_variants(p, isa);
    REQUIRE(cands.size() >= 3);
    if (cands.size() > 3) cands.resize(3);
    auto base = check_against_reference(p, def, isa);
    std::vector<std::vector<std::byte>> objects{base->object()};
    for (const auto& c : cands) {
      CHECK_FALSE(c == def);
      auto k = check_against_reference(p, c, isa);
      INFO(describe(p, c, isa));
      for (const auto& o : objects) {
        const bool same = o == k->object();
        CHECK_FALSE(same);
      }
      objects.push_back(k->object());
    }
  }
}

namespace {

ci::post_op eltwise_op(ci::eltwise_alg a, float alpha = 0.f, float beta = 0.f) {
  ci::post_op op;
  op.what = ci::post_op::kind::eltwise;
  op.eltwise = {a, alpha, beta, 1.f};
  return op;
}

ci::post_op binary_op(int index, ci::binary_broadcast b) {
  ci::post_op op;
  op.what = ci::post_op::kind::binary_add;
  op.binary = {index, b};
  return op;
}

// The default configuration with K panels (ic_block), N panels (oc_panel)
// and thread partitions (thr_oc), alone and together: those the problem
// validates, each once.
std::vector<ci::conv_config> blocking_configs(const ci::conv_problem& p, cpu_isa isa) {
  const ci::conv_config def = ci::default_conv_config(p, isa);
  const std::int64_t icg = p.src.dims()[1] / p.groups;
  std::vector<ci::conv_config> out;
  auto add = [&](ci::conv_config c) {
    if (ci::validate_conv_config_for(p, c, isa) && !(c == def) &&
        std::find(out.begin(), out.end(), c) == out.end()) {
      out.push_back(c);
    }
  };
  // Three passes or more (the middle ones in a loop), and two with a short
  // last one.
  std::vector<int> blocks;
  for (std::int64_t b : {std::int64_t{8}, icg - 1}) {
    const std::int64_t u = def.ic_unroll;
    const std::int64_t r = (b + u - 1) / u * u;
    if (r > 0 && r < icg) blocks.push_back(static_cast<int>(r));
  }
  std::vector<int> parts = {0};
  for (int t = 1; t <= p.nthr; ++t) {
    if (p.nthr % t == 0) parts.push_back(t);
  }
  for (int b : blocks) {
    ci::conv_config c = def;
    c.ic_block = b;
    add(c);
  }
  for (int panel : {2, 3}) {
    ci::conv_config c = def;
    c.order = ci::conv_loop_order::spatial_outer;
    c.oc_panel = panel;
    add(c);
  }
  for (int t : parts) {
    for (ci::conv_loop_order order :
         {ci::conv_loop_order::oc_outer, ci::conv_loop_order::spatial_outer}) {
      ci::conv_config c = def;
      c.order = order;
      c.thr_oc = t;
      add(c);
    }
    // Everything at once.
    ci::conv_config c = def;
    c.order = ci::conv_loop_order::spatial_outer;
    c.oc_panel = 2;
    c.thr_oc = t;
    if (!blocks.empty()) c.ic_block = blocks.front();
    add(c);
  }
  return out;
}

std::string describe_blocking(const ci::conv_config& c) {
  return "ic_block " + std::to_string(c.ic_block) + " oc_panel " + std::to_string(c.oc_panel) +
         " thr_oc " + std::to_string(c.thr_oc);
}

// Each layer kind (SECTIONs) on `nthr` threads of the pool of 3: every
// configuration of blocking_configs against the reference and, where it
// sums in the default's order, bitwise against the default.
void check_blocking_on_layers(int nthr) {
  shape s;
  s.nthr = nthr;
  using alg = ci::eltwise_alg;
  std::vector<ci::post_op> ops;
  SECTION("3x3, odd channel counts, padded, a post-op chain") {
    s.ic = 37;
    s.oc = 19;
    s.ih = 9;
    s.iw = 13;
    s.dst = format_tag::nhwc;
    ops = {binary_op(1, ci::binary_broadcast::none), eltwise_op(alg::relu),
           binary_op(0, ci::binary_broadcast::per_channel), eltwise_op(alg::clip, -0.5f, 0.7f)};
  }
  SECTION("3x3 stride 2, nchw source, no bias") {
    s.ic = 48;
    s.oc = 40;
    s.ih = s.iw = 11;
    s.sh = s.sw = 2;
    s.src = format_tag::nchw;
    s.bias = false;
  }
  SECTION("1x1 over flattened rows, odd channels, nhwc, gelu") {
    s.ic = 70;
    s.oc = 33;
    s.ih = s.iw = 10;
    s.kh = s.kw = 1;
    s.pt = s.pl = s.pb = s.pr = 0;
    s.src = s.dst = format_tag::nhwc;
    ops = {eltwise_op(alg::gelu_erf)};
  }
  SECTION("1x1 stride 2 (rows not flattened), plain weights packed, two images") {
    s.n = 2;
    s.ic = 64;
    s.oc = 80;
    s.ih = s.iw = 9;
    s.kh = s.kw = 1;
    s.sh = s.sw = 2;
    s.pt = s.pl = s.pb = s.pr = 0;
    s.wei = format_tag::oihw;
    ops = {binary_op(0, ci::binary_broadcast::none)};
  }
  SECTION("a 1x3 kernel (one row), padded, nchw dst") {
    s.ic = 33;
    s.oc = 17;
    s.kh = 1;
    s.pt = s.pb = 0;
    s.iw = 15;
    s.dst = format_tag::nchw;
  }
  SECTION("grouped 3x3, groups splitting a block, nhwc") {
    s.g = 2;
    s.ic = 40;
    s.oc = 24;
    s.src = s.dst = format_tag::nhwc;
    s.wei = format_tag::goihw;
    ops = {eltwise_op(alg::tanh)};
  }
  auto p = make_problem(s);
  p.post_ops = ops;
  const ci::conv_geometry g = ci::flatten_conv_pointwise(ci::analyze_conv(p).value());
  for (cpu_isa isa : test_isas()) {
    const ci::conv_config def = ci::default_conv_config(p, isa);
    tensors t(p, 41);
    auto base = ci::conv_kernel::create(p, def, isa);
    REQUIRE(base.has_value());
    const auto want_bits = run_kernel(*base.value(), t);
    const auto configs = blocking_configs(p, isa);
    CHECK(configs.size() >= 3);
    for (const ci::conv_config& c : configs) {
      INFO(describe(p, c, isa) << " " << describe_blocking(c));
      auto k = check_against_reference(p, c, isa, 41);
      const bool same_order = ci::conv_config_sums_as_generic(g, ci::effective_conv_config(g, c));
      if (same_order) {
        const auto got = run_kernel(*k, t);
        CHECK(std::memcmp(got.data(), want_bits.data(), got.size() * sizeof(float)) == 0);
      }
    }
  }
}

}  // namespace

TEST_CASE(
    "cache blocking computes the reference on one thread, bitwise the default's where it sums "
    "in its order",
    "[cpu][conv][config][blocking][kernel_sweep]") {
  check_blocking_on_layers(1);
}

TEST_CASE(
    "cache blocking and thread partitions compute the reference on 2 and 4 threads, bitwise "
    "the default's where they sum in its order",
    "[cpu][conv][config][blocking][threads][kernel_sweep]") {
  // The pool has 3 threads: 4 parts leave one to be taken by the others.
  check_blocking_on_layers(GENERATE(2, 4));
}

TEST_CASE("K panels generate other code; panels and partitions the same code",
          "[cpu][conv][config][blocking]") {
  shape s;
  s.ic = 40;
  s.oc = 48;
  s.ih = 6;
  s.iw = 14;
  s.nthr = 2;
  const auto p = make_problem(s);
  const cpu_isa isa = primcache::effective_isa();
  const ci::conv_config def = ci::default_conv_config(p, isa);
  auto base = ci::conv_kernel::create(p, def, isa);
  REQUIRE(base.has_value());
  ci::conv_config k_panel = def;
  k_panel.ic_block = 16;
  auto blocked = ci::conv_kernel::create(p, k_panel, isa);
  REQUIRE(blocked.has_value());
  CHECK_FALSE(blocked.value()->object() == base.value()->object());
  ci::conv_config walked = def;
  walked.thr_oc = 1;
  auto partitioned = ci::conv_kernel::create(p, walked, isa);
  REQUIRE(partitioned.has_value());
  CHECK(partitioned.value()->object() == base.value()->object());
}

TEST_CASE("the candidate space pairs each tile with K panels, N panels and thread partitions",
          "[cpu][conv][config][space]") {
  shape s;
  s.ic = 128;
  s.oc = 64;
  s.ih = s.iw = 14;
  s.nthr = 2;
  const auto p = make_problem(s);
  const ci::conv_geometry g = ci::flatten_conv_pointwise(ci::analyze_conv(p).value());
  for (cpu_isa isa : test_isas()) {
    const auto space = ci::conv_config_candidates(p, isa);
    std::vector<ci::conv_config> all;
    std::set<int> ic_blocks, panels, parts;
    int invalid = 0, not_effective = 0, bases = 0;
    for (std::uint64_t i = 0; i < space.size(); ++i) {
      const ci::conv_config c = space.at(i);
      all.push_back(c);
      ic_blocks.insert(c.ic_block);
      panels.insert(c.oc_panel);
      parts.insert(c.thr_oc);
      invalid += !ci::validate_conv_config_for(p, c, isa);
      not_effective += !(c == ci::effective_conv_config(g, c));
      bases += c.ic_block == 0 && c.oc_panel == 0 && c.thr_oc == 0;
      // An N panel only where the walk is spatial_outer.
      if (c.oc_panel != 0) CHECK(c.order == ci::conv_loop_order::spatial_outer);
    }
    INFO("space of " << space.size() << " at " << primcache::to_string(isa));
    CHECK(invalid == 0);
    CHECK(not_effective == 0);
    CHECK(ic_blocks == std::set<int>{0, 16, 64});
    CHECK(parts == std::set<int>{0, 1, 2});
    CHECK(panels.count(0) == 1);
    CHECK(panels.count(2) == 1);
    // Each tile, unroll and order also without blocking: the space before
    // K panels, N panels and partitions is inside this one, and the first.
    CHECK(space.at(0).ic_block == 0);
    CHECK(bases * 4 < static_cast<int>(all.size()));
    std::sort(all.begin(), all.end(), [](const ci::conv_config& a, const ci::conv_config& b) {
      return std::tie(a.ow_block, a.oc_blocks, a.ic_unroll, a.order, a.ic_block, a.oc_panel,
                      a.thr_oc) < std::tie(b.ow_block, b.oc_blocks, b.ic_unroll, b.order,
                                           b.ic_block, b.oc_panel, b.thr_oc);
    });
    CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
  }
  SECTION("one thread has no partitions; a depthwise convolution no K panels") {
    shape one = s;
    one.nthr = 1;
    const auto q = make_problem(one);
    const auto space = ci::conv_config_candidates(q, primcache::effective_isa());
    for (std::uint64_t i = 0; i < space.size(); ++i) CHECK(space.at(i).thr_oc == 0);
    shape dw = s;
    dw.ic = dw.oc = dw.g = 64;
    const auto d = make_problem(dw);
    const auto dws = ci::conv_config_candidates(d, primcache::effective_isa());
    int blocked = 0;
    for (std::uint64_t i = 0; i < dws.size(); ++i) blocked += dws.at(i).ic_block != 0;
    CHECK(dws.size() > 0);
    CHECK(blocked == 0);
  }
}

TEST_CASE("a kernel loaded from its captured object computes bitwise the same results",
          "[cpu][conv][object]") {
  shape s;
  s.ic = 24;
  s.oc = 40;
  s.ih = 9;
  s.iw = 15;
  s.src = format_tag::nhwc;
  auto p = make_problem(s);
  ci::post_op relu;
  p.post_ops = {relu};
  for (cpu_isa isa : test_isas()) {
    const auto c = ci::default_conv_config(p, isa);
    auto compiled = check_against_reference(p, c, isa);
    auto loaded = ci::conv_kernel::load(p, c, compiled->object());
    INFO((loaded ? std::string() : loaded.why().message));
    REQUIRE(loaded.has_value());
    CHECK((loaded.value()->object() == compiled->object()));
    tensors t(p, 7);
    const auto a = run_kernel(*compiled, t);
    const auto b = run_kernel(*loaded.value(), t);
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("convolution objects import nothing outside the allowlist", "[cpu][conv][object]") {
  shape s;
  s.ic = 13;
  s.oc = 17;
  s.src = format_tag::nchw;
  s.dst = format_tag::nhwc;
  auto p = make_problem(s);
  ci::post_op gelu;
  gelu.eltwise.alg = ci::eltwise_alg::gelu_erf;
  ci::post_op add;
  add.what = ci::post_op::kind::binary_add;
  p.post_ops = {gelu, add};
  for (cpu_isa isa : test_isas()) {
    auto configs = ci::conv_config_variants(p, isa);
    configs.resize(std::min<std::size_t>(configs.size(), 2));
    configs.push_back(ci::default_conv_config(p, isa));
    for (const auto& c : configs) {
      auto k = ci::conv_kernel::create(p, c, isa);
      REQUIRE(k.has_value());
      auto needed = ci::undefined_symbols(k.value()->object());
      REQUIRE(needed.has_value());
      for (const auto& name : needed.value()) {
        INFO(name);
        CHECK(ci::is_allowed_external_symbol(name));
      }
    }
  }
}

TEST_CASE("weights in the preferred layout are read in place, others are packed",
          "[cpu][conv][weights]") {
  shape s;
  s.ic = 20;
  s.oc = 36;
  auto preferred = make_problem(s);
  s.wei = format_tag::oihw;
  auto plain = make_problem(s);
  const cpu_isa isa = primcache::effective_isa();
  auto a = check_against_reference(preferred, ci::default_conv_config(preferred, isa), isa);
  auto b = check_against_reference(plain, ci::default_conv_config(plain, isa), isa);
  CHECK_FALSE(a->packs_weights());
  CHECK(a->scratchpad_bytes() == 0);
  CHECK(b->packs_weights());
  CHECK(b->scratchpad_bytes() >= 36u * 20 * 9 * 4);
  CHECK(ci::preferred_weights_desc(preferred).value().matches(format_tag::Ohwi16o));

  shape d;
  d.ic = d.oc = d.g = 24;
  auto dw = make_problem(d);
  CHECK(ci::preferred_weights_desc(dw).value().matches(format_tag::Goihw16g));
}

TEST_CASE("one kernel executes from several threads at once", "[cpu][conv][threads]") {
  shape s;
  s.ic = 16;
  s.oc = 32;
  s.ih = 7;
  s.iw = 11;
  s.wei = format_tag::oihw;  // every execution packs into its own scratchpad
  const auto p = make_problem(s);
  const cpu_isa isa = primcache::effective_isa();
  auto k = ci::conv_kernel::create(p, ci::default_conv_config(p, isa), isa);
  REQUIRE(k.has_value());
  tensors t(p, 3);
  const auto want = run_kernel(*k.value(), t);
  constexpr int threads = 4;
  std::vector<int> same(threads, 0);
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] {
      for (int r = 0; r < 5; ++r) {
        const auto got = run_kernel(*k.value(), t);
        same[i] += std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
      }
    });
  }
  for (auto& w : workers) w.join();
  for (int i = 0; i < threads; ++i) CHECK(same[i] == 5);
}

TEST_CASE("invalid convolution problems are refused with a clear failure", "[cpu][conv][errors]") {
  shape s;
  auto p = make_problem(s);
  const cpu_isa isa = primcache::effective_isa();
  const auto def = ci::conv_config{};
  auto expect = [&](const ci::conv_problem& q, primcache::status code, const char* words) {
    auto k = ci::conv_kernel::create(q, def, isa);
    REQUIRE_FALSE(k.has_value());
    INFO(k.why().message);
    CHECK(k.why().code == code);
    CHECK(k.why().message.find(words) != std::string::npos);
  };
  using primcache::status;
  SECTION("a dst of the wrong output size") {
    p.dst = memory_desc({1, 16, 7, 8}, data_type::f32, format_tag::nChw16c);
    expect(p, status::invalid_arguments, "output size");
  }
  SECTION("a kernel larger than the padded input") {
    p.pad_t = p.pad_b = 0;
    p.src = memory_desc({1, 16, 2, 8}, data_type::f32, format_tag::nChw16c);
    expect(p, status::invalid_arguments, "exceeds the padded input");
  }
  SECTION("channels not divisible by groups") {
    p.groups = 3;
    expect(p, status::invalid_arguments, "not divisible by groups");
  }
  SECTION("weights that do not match the channels") {
    p.weights = memory_desc({16, 8, 3, 3}, data_type::f32, format_tag::oihw);
    expect(p, status::invalid_arguments, "do not match");
  }
  SECTION("grouped weights without a group dimension") {
    shape g = s;
    g.g = 2;
    p = make_problem(g);
    p.weights = memory_desc({16, 8, 3, 3}, data_type::f32, format_tag::oihw);
    expect(p, status::invalid_arguments, "must be (G, OC/G, IC/G, KH, KW)");
  }
  SECTION("a zero stride") {
    p.stride_w = 0;
    expect(p, status::invalid_arguments, "stride_w");
  }
  SECTION("a negative padding") {
    p.pad_l = -1;
    expect(p, status::invalid_arguments, "pad_l");
  }
  SECTION("a negative dilation") {
    p.dilation_h = -2;
    expect(p, status::invalid_arguments, "dilation_h");
  }
  SECTION("a padding so large that indices would overflow") {
    p.pad_r = std::numeric_limits<std::int64_t>::max();
    expect(p, status::invalid_arguments, "pad_r");
  }
  SECTION("zero groups") {
    p.groups = 0;
    expect(p, status::invalid_arguments, "groups");
  }
  SECTION("zero threads") {
    p.nthr = 0;
    expect(p, status::invalid_arguments, "nthr");
  }
  SECTION("an unsupported activation layout") {
    p.src = memory_desc({1, 16, 8, 8}, data_type::f32, format_tag::nChw8c);
    expect(p, status::unimplemented, "nChw16c are");
  }
  SECTION("a non-f32 src") {
    p.src = memory_desc({1, 16, 8, 8}, data_type::bf16, format_tag::nChw16c);
    expect(p, status::unimplemented, "f32");
  }
  SECTION("non-f32 weights") {
    p.weights = p.weights.with_data_type(data_type::f16);
    expect(p, status::unimplemented, "f32");
  }
  SECTION("a 3-D src") {
    p.src = memory_desc({1, 16, 8}, data_type::f32, format_tag::ncw);
    expect(p, status::invalid_arguments, "4-D");
  }
  SECTION("a src with no layout") {
    p.src = memory_desc({1, 16, 8, 8}, data_type::f32, format_tag::any);
    expect(p, status::invalid_arguments, "no resolved layout");
  }
  SECTION("weights with no layout") {
    p.weights = memory_desc({16, 16, 3, 3}, data_type::f32, format_tag::any);
    expect(p, status::invalid_arguments, "no resolved layout");
  }
  SECTION("a bias of the wrong length") {
    p.bias = memory_desc({15}, data_type::f32, format_tag::a);
    expect(p, status::invalid_arguments, "bias");
  }
  SECTION("a batch mismatch between src and dst") {
    p.dst = memory_desc({2, 16, 8, 8}, data_type::f32, format_tag::nChw16c);
    expect(p, status::invalid_arguments, "images");
  }
  SECTION("a binary post-op with a negative operand index") {
    ci::post_op add;
    add.what = ci::post_op::kind::binary_add;
    add.binary.arg_index = -1;
    p.post_ops = {add};
    expect(p, status::invalid_arguments, "arg_index");
  }
  SECTION("configurations out of range") {
    const auto oc = ci::conv_loop_order::oc_outer;
    for (auto bad :
         {ci::conv_config{0, 2, 1}, ci::conv_config{14, 0, 1}, ci::conv_config{14, 2, 3},
          ci::conv_config{65, 1, 1}, ci::conv_config{32, 4, 1}, ci::conv_config{14, 2, 1, oc, -16},
          ci::conv_config{14, 2, 4, oc, 6}, ci::conv_config{14, 2, 1, oc, 0, -1},
          ci::conv_config{14, 2, 1, oc, 0, 0, -1}, ci::conv_config{14, 2, 1, oc, 0, 0, 70000}}) {
      auto k = ci::conv_kernel::create(p, bad, isa);
      REQUIRE_FALSE(k.has_value());
      CHECK(k.why().code == status::invalid_arguments);
      CHECK(k.why().message.find("config") != std::string::npos);
    }
  }
  SECTION("an ISA below avx2") {
    auto k = ci::conv_kernel::create(p, def, cpu_isa::sse41);
    REQUIRE_FALSE(k.has_value());
    CHECK(k.why().code == status::unimplemented);
  }
  SECTION("an object that is not code") {
    std::vector<std::byte> junk(64, std::byte{0x5a});
    auto k = ci::conv_kernel::load(p, def, junk);
    CHECK_FALSE(k.has_value());
  }
  SECTION("conv_output_size refuses out-of-range arguments") {
    CHECK_FALSE(ci::conv_output_size(0, 3, 1, 0, 0, 0).has_value());
    CHECK_FALSE(ci::conv_output_size(8, 3, 0, 0, 0, 0).has_value());
    CHECK_FALSE(ci::conv_output_size(8, 3, 1, -1, 0, 0).has_value());
    CHECK(ci::conv_output_size(8, 3, 1, 1, 1, 1).value() == 6);
    CHECK(ci::conv_output_size(224, 7, 2, 0, 3, 3).value() == 112);
  }
  SECTION("negative end padding leaves the last rows unread; extremes are errors, not overflow") {
    // ResNet-50's stride-2 1x1 projections: 56 in, 28 out.
    CHECK(ci::conv_output_size(56, 1, 2, 0, 0, -1).value() == 28);
    CHECK(ci::conv_output_size(9, 3, 2, 0, 1, -2).value() == 3);
    CHECK_FALSE(ci::conv_output_size(8, 3, 1, 0, 0, -7).has_value());  // kernel larger than input
    constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max();
    constexpr std::int64_t small = std::numeric_limits<std::int64_t>::min();
    CHECK_FALSE(ci::conv_output_size(big, 3, 1, 0, 0, 0).has_value());
    CHECK_FALSE(ci::conv_output_size(8, big, 1, 0, 0, 0).has_value());
    CHECK_FALSE(ci::conv_output_size(8, 3, big, big, big, big).has_value());
    CHECK_FALSE(ci::conv_output_size(8, 3, 1, 0, 0, small).has_value());
    CHECK_FALSE(ci::conv_output_size(8, 3, 1, 0, small, 0).has_value());
  }
  SECTION("a start padding may not be negative, an end padding may") {
    ci::conv_problem q;
    q.src = memory_desc({1, 16, 14, 13}, data_type::f32, format_tag::nchw);
    q.weights = memory_desc({16, 16, 1, 1}, data_type::f32, format_tag::oihw);
    q.dst = memory_desc({1, 16, 7, 7}, data_type::f32, format_tag::nchw);
    q.stride_h = q.stride_w = 2;
    q.pad_b = -1;  // row 13 is never read
    auto ok = ci::check_conv_problem(q);
    INFO((ok ? std::string() : ok.why().message));
    CHECK(ok.has_value());
    q.pad_t = -1;
    q.pad_b = 0;
    CHECK_FALSE(ci::check_conv_problem(q).has_value());
  }
}

TEST_CASE("problem and config keys tell different kernels apart", "[cpu][conv][key]") {
  shape s;
  auto a = make_problem(s);
  auto b = a;
  b.pad_r = 2;
  b.dst = a.dst;
  primcache::key_writer wa, wb;
  a.write_key(wa);
  b.write_key(wb);
  CHECK_FALSE(wa.finish() == wb.finish());
  ci::conv_config c1, c2;
  c2.ic_unroll = 2;
  primcache::key_writer w1, w2;
  c1.write_key(w1);
  c2.write_key(w2);
  CHECK_FALSE(w1.finish() == w2.finish());
}

TEST_CASE("weights packed ahead of time give bitwise the results of packing per call",
          "[cpu][conv][weights][prepacked]") {
  const cpu_isa isa = primcache::effective_isa();
  std::vector<shape> shapes;
  {
    shape s;  // plain oihw, channel tails
    s.ic = 20;
    s.oc = 36;
    s.wei = format_tag::oihw;
    shapes.push_back(s);
  }
  {
    shape s;  // grouped, goihw (always packed)
    s.ic = 32;
    s.oc = 48;
    s.g = 2;
    s.wei = format_tag::goihw;
    shapes.push_back(s);
  }
  {
    shape s;  // depthwise from goihw, nhwc activations
    s.ic = s.oc = s.g = 24;
    s.wei = format_tag::goihw;
    s.src = s.dst = format_tag::nhwc;
    shapes.push_back(s);
  }
  {
    shape s;  // 1x1, hwio-like layout
    s.ic = 16;
    s.oc = 40;
    s.kh = s.kw = 1;
    s.pt = s.pl = s.pb = s.pr = 0;
    s.wei = format_tag::hwio;
    shapes.push_back(s);
  }
  for (const shape& s : shapes) {
    ci::conv_problem p = make_problem(s);
    ci::post_op relu;
    relu.what = ci::post_op::kind::eltwise;
    relu.eltwise = {ci::eltwise_alg::relu, 0.f, 0.f, 1.f};
    p.post_ops = {relu};
    auto k = check_against_reference(p, ci::default_conv_config(p, isa), isa);
    REQUIRE(k->packs_weights());
    CHECK(k->packed_bytes() == k->scratchpad_bytes());
    tensors t(p, 11);
    const std::vector<float> want = run_kernel(*k, t);
    buffer packed(k->packed_bytes() / 4);
    k->pack_weights(t.wei.data, packed.data, pool());
    buffer dst(p.dst.size_bytes() / 4);
    std::fill(dst.data, dst.data + dst.size, -777.f);
    ci::conv_args a = t.args(dst.data);
    a.weights = nullptr;  // only the packed weights are read
    a.packed_weights = packed.data;
    k->execute(a, nullptr, pool());  // no scratchpad: nothing is packed
    INFO(describe(p, k->config(), isa));
    CHECK(std::memcmp(dst.data, want.data(), want.size() * sizeof(float)) == 0);
  }
  // Preferred weights are not packed, but their packed form is themselves.
  shape s;
  s.ic = 32;
  s.oc = 32;
  ci::conv_problem p = make_problem(s);
  auto k = ci::conv_kernel::create(p, ci::default_conv_config(p, isa), isa);
  REQUIRE(k.has_value());
  CHECK_FALSE(k.value()->packs_weights());
  CHECK(k.value()->packed_bytes() == p.weights.size_bytes());
  // Packing keys: the weights' layout and groups.
  s.wei = format_tag::oihw;
  ci::conv_problem q = make_problem(s);
  auto kq = ci::conv_kernel::create(q, ci::default_conv_config(q, isa), isa);
  REQUIRE(kq.has_value());
  primcache::key_writer a, b;
  k.value()->write_packing_key(a);
  kq.value()->write_packing_key(b);
  CHECK(a.finish() != b.finish());
}

TEST_CASE("a tap in the padding adds nothing: a -0 bias stays -0, an infinite weight adds no NaN",
          "[cpu][conv][padding]") {
  // 3x3 taps with padding 3 over a 1x9 image: the outputs of the first and
  // last output rows (oh 0 and 4, no kh tap inside) and of the first and
  // last columns (ow 0 and 12, no kw tap inside: the run-time column
  // check) have every tap in the padding, so they are their bias exactly,
  // output channel 3 (infinite weights) included.
  // The kernel skips taps outside; a multiply-add of a zero column would
  // turn -0 into +0, and 0 * inf into NaN.
  for (cpu_isa isa : test_isas()) {
    shape s;
    s.ic = 16;
    s.oc = 32;
    s.ih = 1;
    s.iw = 9;
    s.pt = s.pb = 3;
    s.pl = s.pr = 3;
    const ci::conv_problem p = make_problem(s);
    auto k = ci::conv_kernel::create(p, ci::default_conv_config(p, isa), isa);
    REQUIRE(k);
    tensors t(p, 5);
    std::fill(t.bias.data, t.bias.data + t.bias.size, -0.f);
    // Every weight of output channel 3 infinite.
    const auto wd = p.weights.dims();
    for (std::int64_t ic = 0; ic < wd[1]; ++ic)
      for (std::int64_t kh = 0; kh < wd[2]; ++kh)
        for (std::int64_t kw = 0; kw < wd[3]; ++kw)
          t.wei.data[p.weights.offset_of({3, ic, kh, kw})] = std::numeric_limits<float>::infinity();
    const std::vector<float> got = run_kernel(*k.value(), t);
    const auto dd = p.dst.dims();
    int border = 0, negative_zeros = 0;
    for (std::int64_t oh = 0; oh < dd[2]; ++oh)
      for (std::int64_t ow = 0; ow < dd[3]; ++ow) {
        if (oh != 0 && oh != dd[2] - 1 && ow != 0 && ow != dd[3] - 1) continue;
        for (std::int64_t oc = 0; oc < dd[1]; ++oc) {
          const float v = got[static_cast<std::size_t>(p.dst.offset_of({0, oc, oh, ow}))];
          ++border;
          if (v == 0.f && std::signbit(v)) ++negative_zeros;
        }
      }
    CHECK(border == (2 * dd[3] + 2 * (dd[2] - 2)) * dd[1]);
    CHECK(negative_zeros == border);
  }
}

TEST_CASE("the item schedule runs a share's home range first, then the back of others'",
          "[cpu][conv][schedule]") {
  SECTION("one share alone runs its range front to back, then the others' back to front") {
    ci::conv_item_schedule s(10, 2, 2);
    std::vector<std::int64_t> order;
    for (primcache::range r = s.next(0); r.begin < r.end; r = s.next(0)) {
      for (std::int64_t i = r.begin; i < r.end; ++i) order.push_back(i);
    }
    CHECK(order == std::vector<std::int64_t>{0, 1, 2, 3, 4, 8, 9, 6, 7, 5});
    const primcache::range none = s.next(1);
    CHECK(none.begin == none.end);
  }
  SECTION("shares taking turns each run exactly their balanced home range") {
    ci::conv_item_schedule s(56, 2, ci::conv_chunk_for(56, 2, 1 << 20));
    std::vector<int> runs(56, 0);
    std::int64_t done[2] = {0, 0};
    for (bool more = true; more;) {
      more = false;
      for (int home : {0, 1}) {
        const primcache::range r = s.next(home);
        if (r.begin >= r.end) continue;
        more = true;
        const primcache::range own = primcache::balance(56, home, 2);
        CHECK(r.begin >= own.begin);
        CHECK(r.end <= own.end);
        for (std::int64_t i = r.begin; i < r.end; ++i) ++runs[static_cast<std::size_t>(i)];
        done[home] += r.end - r.begin;
      }
    }
    CHECK(done[0] == 28);
    CHECK(done[1] == 28);
    CHECK(std::all_of(runs.begin(), runs.end(), [](int n) { return n == 1; }));
  }
  SECTION("a late share finds what the others left at the front of its range") {
    ci::conv_item_schedule s(8, 2, 1);
    for (int i = 0; i < 4; ++i) CHECK(s.next(0).begin == i);
    CHECK(s.next(0).begin == 7);  // taken from share 1's back
    CHECK(s.next(1).begin == 4);  // share 1 arrives: its front
    CHECK(s.next(0).begin == 6);
    CHECK(s.next(1).begin == 5);
    CHECK(s.next(1).begin == s.next(1).end);
  }
  SECTION("more shares than items, and no items") {
    ci::conv_item_schedule s(2, 4, 1);
    CHECK(s.next(3).begin == 0);  // home 3 is empty: the next range (wrapping) first
    CHECK(s.next(3).begin == 1);
    CHECK(s.next(0).begin == s.next(0).end);
    ci::conv_item_schedule empty(0, 2, 1);
    CHECK(empty.next(0).begin == empty.next(0).end);
  }
}

TEST_CASE("chunks are a sixteenth of a home range, at least the minimum work, at most a home",
          "[cpu][conv][schedule]") {
  REQUIRE(ci::conv_chunk_min_fmas.load() == 4096);
  // Heavy items: a sixteenth of each of two homes of 1600.
  CHECK(ci::conv_chunk_for(3200, 2, 1 << 20) == 100);
  CHECK(ci::conv_chunk_for(31, 2, 1 << 20) == 1);
  // Light items (a row of dw_3x3s2_256_28's 7x2 tile: 14 pixels, 2 blocks,
  // 9 taps): enough of them for 4096 multiply-adds, not 112 / 32 = 3.
  CHECK(ci::conv_chunk_for(112, 2, 14 * 2 * 9) == 17);
  // Never more than a home range (rounded up), never less than 1.
  CHECK(ci::conv_chunk_for(112, 2, 10) == 56);
  CHECK(ci::conv_chunk_for(113, 2, 10) == 57);
  CHECK(ci::conv_chunk_for(1, 4, 1) == 1);
  CHECK(ci::conv_chunk_for(0, 2, 100) == 1);
  CHECK(ci::conv_chunk_for(100, 0, 1 << 20) == 6);  // shares < 1 count as one
  CHECK(ci::conv_chunk_for(100, 2, 0) == 50);       // an item weighs at least 1
  // The measuring hook: 0 is the sixteenth alone.
  ci::conv_chunk_min_fmas = 0;
  CHECK(ci::conv_chunk_for(112, 2, 14 * 2 * 9) == 3);
  ci::conv_chunk_min_fmas = 4096;
}

TEST_CASE("an item weighs its row's pixels, output blocks, taps and input channels",
          "[cpu][conv][schedule]") {
  const cpu_isa isa = primcache::effective_isa();
  SECTION("depthwise: one input channel per output channel") {
    shape s;
    s.ic = s.oc = s.g = 256;
    s.ih = s.iw = 28;
    s.sh = s.sw = 2;
    const auto p = make_problem(s);
    const ci::conv_geometry g = ci::flatten_conv_pointwise(ci::analyze_conv(p).value());
    const ci::conv_config ec = ci::effective_conv_config(g, ci::default_conv_config(p, isa));
    REQUIRE(g.depthwise);
    CHECK(ci::conv_item_fmas(g, ec) == 14 * std::min<std::int64_t>(ec.oc_blocks, 16) * 9);
  }
  SECTION("dense: every input channel of the group") {
    shape s;
    s.ic = 64;
    s.oc = 128;
    s.ih = s.iw = 14;
    const auto p = make_problem(s);
    const ci::conv_geometry g = ci::flatten_conv_pointwise(ci::analyze_conv(p).value());
    ci::conv_config c = ci::default_conv_config(p, isa);
    c.oc_blocks = 64;  // more than the 8 blocks there are: counts 8
    const ci::conv_config ec = ci::effective_conv_config(g, c);
    CHECK(ci::conv_item_fmas(g, ec) == g.ow * std::min<std::int64_t>(ec.oc_blocks, 8) * 9 * 64);
  }
}

TEST_CASE("homes are claimed once each; a thread keeps its home across regions",
          "[cpu][conv][schedule]") {
  ci::conv_item_schedule s(100, 3, 1);
  CHECK(s.claim_home(1, 0) == 1);
  CHECK(s.claim_home(1, 0) == 0);  // taken: the lowest free
  CHECK(s.claim_home(0, 0) == 2);
  CHECK(s.claim_home(2, 1) == 1);  // every home taken: the fallback
  CHECK(s.claim_home(7, 0) == 0);  // out of range: clamped to 2, taken: the fallback
  const std::thread::id caller = std::this_thread::get_id();
  CHECK(ci::conv_home_for_this_thread(caller, 2) == 0);
  CHECK(ci::conv_home_for_this_thread(caller, 1) == 0);
  int first = -1, again = -1, alone = -1;
  std::thread other([&] {
    first = ci::conv_home_for_this_thread(caller, 2);
    again = ci::conv_home_for_this_thread(caller, 2);
    alone = ci::conv_home_for_this_thread(caller, 1);
  });
  other.join();
  CHECK(first == 1);
  CHECK(again == 1);
  CHECK(alone == 0);
}

TEST_CASE("threads sharing one item schedule run every item exactly once",
          "[cpu][conv][schedule][threads]") {
  constexpr std::int64_t items = 20011;
  // 4 shares keep their ranges inside the schedule, 12 on the heap.
  for (const int threads : {4, 12}) {
    for (std::int64_t chunk : {std::int64_t{1}, std::int64_t{7}}) {
      ci::conv_item_schedule s(items, threads, chunk);
      std::vector<std::atomic<int>> runs(items);
      std::vector<std::thread> ts;
      for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
          const int home = s.claim_home(t % 2, t);  // two threads ask for the same homes
          for (primcache::range r = s.next(home); r.begin < r.end; r = s.next(home)) {
            for (std::int64_t i = r.begin; i < r.end; ++i) {
              runs[static_cast<std::size_t>(i)].fetch_add(1, std::memory_order_relaxed);
            }
          }
        });
      }
      for (auto& t : ts) t.join();
      int wrong = 0;
      for (auto& r : runs) wrong += r.load() != 1;
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("ResNet-50's conv2 3x3 layer gives both of two threads half of its rows",
          "[cpu][conv][schedule]") {
  shape s;
  s.ic = s.oc = 64;
  s.ih = s.iw = 56;
  s.nthr = 2;
  const auto p = make_problem(s);
  const cpu_isa isa = primcache::effective_isa();
  const ci::conv_config c = ci::default_conv_config(p, isa);
  const ci::conv_geometry g = ci::flatten_conv_pointwise(ci::analyze_conv(p).value());
  const std::int64_t items = ci::conv_work_items(g, ci::effective_conv_config(g, c));
  INFO(describe(p, c, isa) << " items " << items);
  CHECK(items >= 2 * 16);  // enough for both threads and for chunks
  // Both homes get half the items; a thread that never comes loses them to
  // the other, which then runs all.
  ci::conv_item_schedule both(
      items, 2,
      ci::conv_chunk_for(items, 2, ci::conv_item_fmas(g, ci::effective_conv_config(g, c))));
  CHECK(primcache::balance(items, 0, 2).end == items / 2);
  std::int64_t alone = 0;
  for (primcache::range r = both.next(0); r.begin < r.end; r = both.next(0)) {
    alone += r.end - r.begin;
  }
  CHECK(alone == items);
  // Through the kernel on a pool of 2: the result is bitwise that of one
  // thread and matches the reference.
  auto k = check_against_reference(p, c, isa);
  auto one_problem = p;
  one_problem.nthr = 1;
  auto one = ci::conv_kernel::create(one_problem, c, isa);
  REQUIRE(one.has_value());
  tensors t(p, 5);
  primcache::thread_pool two(2);
  buffer d2(p.dst.size_bytes() / 4), d1(p.dst.size_bytes() / 4);
  for (int rep = 0; rep < 3; ++rep) {
    k->execute(t.args(d2.data), nullptr, two);
    one.value()->execute(t.args(d1.data), nullptr, two);
    CHECK(std::memcmp(d1.data, d2.data, d1.size * sizeof(float)) == 0);
  }
}

TEST_CASE("a walk runs every item of the generated function once, a cell's items together",
          "[cpu][conv][schedule][walk]") {
  // Items of the generated function, decoded as it numbers them: (n, q, oh)
  // with q = group * chunks + chunk.
  struct geometry_case {
    std::int64_t n, g, nb, oh;
    int nthr;
  };
  const geometry_case gc = GENERATE(geometry_case{1, 1, 8, 7, 2}, geometry_case{2, 1, 5, 3, 4},
                                    geometry_case{3, 2, 3, 4, 3}, geometry_case{1, 1, 1, 1, 2},
                                    geometry_case{2, 3, 2, 5, 6}, geometry_case{1, 1, 16, 56, 12});
  ci::conv_geometry g;
  g.n = gc.n;
  g.g = gc.g;
  g.nb = gc.nb;
  g.oh = gc.oh;
  g.nthr = gc.nthr;
  const std::int64_t q_count = gc.g * gc.nb;  // oc_blocks 1: a chunk per block
  const std::int64_t items = gc.n * q_count * gc.oh;
  for (ci::conv_loop_order order :
       {ci::conv_loop_order::oc_outer, ci::conv_loop_order::spatial_outer}) {
    for (int panel : {0, 2, 3}) {
      for (int t = 0; t <= gc.nthr; ++t) {
        if (t > 0 && gc.nthr % t != 0) continue;
        ci::conv_config c{4, 1, 1, order};
        c.oc_panel = order == ci::conv_loop_order::spatial_outer ? panel : 0;
        c.thr_oc = t;
        INFO("order " << static_cast<int>(order) << " panel " << c.oc_panel << " thr_oc " << t
                      << " n" << gc.n << " g" << gc.g << " nb" << gc.nb << " oh" << gc.oh
                      << " nthr " << gc.nthr);
        const ci::conv_walk w = ci::conv_walk::make(g, c);
        REQUIRE(w.units() == items);
        CHECK(w.cells() == (t == 0 ? 1 : t * (gc.nthr / t)));
        // Decoded (n, q, oh) of an item of the generated function.
        auto decode = [&](std::int64_t item) {
          std::array<std::int64_t, 3> v{};
          if (order == ci::conv_loop_order::oc_outer) {
            v = {item / (q_count * gc.oh), item / gc.oh % q_count, item % gc.oh};
          } else {
            v = {item / (gc.oh * q_count), item % q_count, item / q_count % gc.oh};
          }
          return v;
        };
        std::vector<int> runs(static_cast<std::size_t>(items), 0);
        int bad_cell = 0, bad_call = 0;
        for (int cell = 0; cell < w.cells(); ++cell) {
          const auto& starts = w.cell_starts();
          // The cell's chunks and rows (rows counted over the images).
          const primcache::range qr =
              primcache::balance(q_count, cell / (w.cells() / std::max(t, 1)), std::max(t, 1));
          const primcache::range rr = primcache::balance(
              gc.n * gc.oh, cell % (w.cells() / std::max(t, 1)), w.cells() / std::max(t, 1));
          // Unit by unit, so that every split of a cell is exercised.
          for (std::int64_t u = starts[static_cast<std::size_t>(cell)];
               u < starts[static_cast<std::size_t>(cell) + 1]; ++u) {
            w.run({u, u + 1}, [&](std::int64_t b, std::int64_t e) {
              bad_call += e != b + 1;
              for (std::int64_t i = b; i < e; ++i) {
                ++runs[static_cast<std::size_t>(i)];
                const auto [n, q, oh] = decode(i);
                const std::int64_t r = n * gc.oh + oh;
                bad_cell += q < qr.begin || q >= qr.end || r < rr.begin || r >= rr.end;
              }
            });
          }
        }
        CHECK(bad_call == 0);
        CHECK(bad_cell == 0);
        CHECK(std::all_of(runs.begin(), runs.end(), [](int r) { return r == 1; }));
        // All at once, and in two pieces split anywhere: the same items, in
        // calls of consecutive items.
        std::vector<std::int64_t> whole, split;
        w.run({0, items}, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) whole.push_back(i);
        });
        const std::int64_t cut = items / 3;
        for (primcache::range r : {primcache::range{0, cut}, primcache::range{cut, items}}) {
          w.run(r, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t i = b; i < e; ++i) split.push_back(i);
          });
        }
        CHECK(whole == split);
        CHECK(static_cast<std::int64_t>(whole.size()) == items);
      }
    }
  }
}

TEST_CASE("a walk's order: an N panel's chunks for each row, a partition's cells in turn",
          "[cpu][conv][schedule][walk]") {
  ci::conv_geometry g;
  g.n = 1;
  g.g = 1;
  g.nb = 4;
  g.oh = 2;
  g.nthr = 2;
  auto order_of = [&](const ci::conv_config& c) {
    const ci::conv_walk w = ci::conv_walk::make(g, c);
    std::vector<std::int64_t> out;
    w.run({0, w.units()}, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) out.push_back(i);
    });
    return out;
  };
  // spatial_outer items are row * 4 + chunk; panels of 2 chunks: chunks
  // 0-1 of rows 0 and 1, then chunks 2-3.
  ci::conv_config panel{4, 1, 1, ci::conv_loop_order::spatial_outer};
  panel.oc_panel = 2;
  CHECK(order_of(panel) == std::vector<std::int64_t>{0, 1, 4, 5, 2, 3, 6, 7});
  // oc_outer items are chunk * 2 + row; two parts over the chunks, one over
  // the rows: cell 0 holds chunks 0-1, cell 1 chunks 2-3, each walked as
  // the loop order says.
  ci::conv_config by_chunks{4, 1, 1, ci::conv_loop_order::oc_outer};
  by_chunks.thr_oc = 2;
  CHECK(order_of(by_chunks) == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  const ci::conv_walk w = ci::conv_walk::make(g, by_chunks);
  CHECK(w.cell_starts() == std::vector<std::int64_t>{0, 4, 8});
  // One part over the chunks, two over the rows: oc_outer walks each
  // cell's row by chunk: row 0 of chunks 0-3, then row 1.
  ci::conv_config by_rows{4, 1, 1, ci::conv_loop_order::oc_outer};
  by_rows.thr_oc = 1;
  CHECK(order_of(by_rows) == std::vector<std::int64_t>{0, 2, 4, 6, 1, 3, 5, 7});
}

TEST_CASE("a schedule over given homes runs each home first, then the others' backs",
          "[cpu][conv][schedule]") {
  const std::vector<std::int64_t> cells = {0, 3, 3, 10};  // an empty home between
  ci::conv_item_schedule s(cells, 2);
  CHECK(s.shares() == 3);
  std::vector<int> runs(10, 0);
  auto take = [&](int home) {
    const primcache::range r = s.next(home);
    for (std::int64_t i = r.begin; i < r.end; ++i) ++runs[static_cast<std::size_t>(i)];
    return r;
  };
  primcache::range r = take(0);
  CHECK((r.begin == 0 && r.end == 2));
  r = take(1);  // an empty home: the next range's back
  CHECK((r.begin == 8 && r.end == 10));
  r = take(2);
  CHECK((r.begin == 3 && r.end == 5));
  for (int home : {2, 0, 1}) {
    for (r = take(home); r.begin < r.end; r = take(home)) {
    }
  }
  CHECK(std::all_of(runs.begin(), runs.end(), [](int n) { return n == 1; }));
}
