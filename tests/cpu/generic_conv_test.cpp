// The shape-generic convolution kernel built into the library: bit for bit
// the specialized kernel's results (what makes the tiered swap invisible),
// whatever the specialized configuration, and the reference's within
// rounding, over random shapes, strides, padding, dilation, groups, the
// activation layouts (nchw, nhwc, nChw16c, independently for src and dst),
// weights in the preferred layout or packed from a plain one, bias, every
// post-op and binary broadcast; depthwise convolutions likewise (their own
// tiles), -0 sums included; and what it declines (created synchronously).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/conv_config.hpp"
#include "kernels/conv_kernel.hpp"
#include "kernels/conv_validation.hpp"
#include "kernels/generic_conv_kernel.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "test_isas.hpp"
#include "tiered/generic_code.hpp"

using namespace primcache;
using namespace primcache::cpu_internal;
using cpu_test::test_isas;

namespace {

// As conv_kernel_test.cpp: O(1) partial sums (weights scaled by 1/sqrt(taps)),
// f32 with one rounding per tap against double.
constexpr float tolerance = 5e-5f;

struct aligned_floats {
  explicit aligned_floats(std::size_t n)
      : p(static_cast<float*>(
            std::aligned_alloc(64, std::max<std::size_t>(64, (n * 4 + 63) / 64 * 64)))),
        size(n) {}
  ~aligned_floats() { std::free(p); }
  aligned_floats(const aligned_floats&) = delete;
  aligned_floats& operator=(const aligned_floats&) = delete;
  float* p;
  std::size_t size;
};

struct shape {
  std::int64_t n = 1, ic = 16, oc = 16, ih = 8, iw = 8, kh = 3, kw = 3;
  std::int64_t sh = 1, sw = 1, dh = 0, dw = 0, pt = 1, pl = 1, pb = 1, pr = 1, g = 1;
  format_tag src = format_tag::nChw16c, dst = format_tag::nChw16c;
  bool plain_weights = false;  // else the preferred layout (read in place when g == 1)
  bool bias = true;
};

std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d,
                      std::int64_t a, std::int64_t b) {
  return (in + a + b - ((k - 1) * (d + 1) + 1)) / s + 1;
}

conv_problem make_problem(const shape& s) {
  conv_problem p;
  p.src = memory_desc({s.n, s.ic, s.ih, s.iw}, data_type::f32, s.src);
  p.dst = memory_desc({s.n, s.oc, out_size(s.ih, s.kh, s.sh, s.dh, s.pt, s.pb),
                       out_size(s.iw, s.kw, s.sw, s.dw, s.pl, s.pr)},
                      data_type::f32, s.dst);
  p.stride_h = s.sh;
  p.stride_w = s.sw;
  p.dilation_h = s.dh;
  p.dilation_w = s.dw;
  p.pad_t = s.pt;
  p.pad_l = s.pl;
  p.pad_b = s.pb;
  p.pad_r = s.pr;
  p.groups = s.g;
  p.nthr = default_thread_pool().size();
  if (s.bias) p.bias = memory_desc({s.oc}, data_type::f32, format_tag::a);
  if (s.g == 1) {
    p.weights = memory_desc({s.oc, s.ic, s.kh, s.kw}, data_type::f32, format_tag::oihw);
  } else {
    p.weights =
        memory_desc({s.g, s.oc / s.g, s.ic / s.g, s.kh, s.kw}, data_type::f32, format_tag::goihw);
  }
  if (!s.plain_weights) p.weights = preferred_weights_desc(p).value();
  return p;
}

// fn(offset) for every logical element of md.
template <class Fn>
void for_each_offset(const memory_desc& md, Fn&& fn) {
  const int nd = md.ndims();
  const auto dims = md.dims();
  std::vector<std::int64_t> idx(static_cast<std::size_t>(nd), 0);
  const std::int64_t total = md.nelems();
  for (std::int64_t e = 0; e < total; ++e) {
    std::int64_t rest = e;
    for (int d = nd - 1; d >= 0; --d) {
      idx[static_cast<std::size_t>(d)] = rest % dims[d];
      rest /= dims[d];
    }
    fn(md.offset_of(idx));
  }
}

eltwise_op random_eltwise(std::mt19937& rng) {
  std::uniform_real_distribution<float> v(-1.f, 1.f);
  eltwise_op op;
  op.alg = static_cast<eltwise_alg>(rng() % (static_cast<int>(eltwise_alg::clip) + 1));
  op.alpha = (rng() % 3 == 0) ? 0.f : v(rng);
  op.beta = v(rng);
  if (op.alg == eltwise_alg::clip) {
    op.alpha = -std::abs(op.alpha);
    op.beta = std::abs(op.alpha) + 0.5f;
  }
  op.scale = (rng() % 2 == 0) ? 1.f : 0.5f + v(rng) * 0.25f;
  return op;
}

// Every tensor of a problem; buffers start as NaN (padding the kernels must
// not read into results), the logical elements random.
struct tensors {
  aligned_floats src, wei, bias, dst_init;
  std::vector<std::unique_ptr<aligned_floats>> operands;

  tensors(const conv_problem& p, std::uint32_t seed)
      : src(p.src.size_bytes() / 4),
        wei(p.weights.size_bytes() / 4),
        bias(std::max<std::size_t>(p.bias.size_bytes() / 4, 1)),
        dst_init(p.dst.size_bytes() / 4) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    const float nan = std::nanf("");
    const auto wdims = p.weights.dims();
    std::int64_t taps = 1;
    for (int d = p.weights.ndims() - 3; d < p.weights.ndims(); ++d) taps *= wdims[d];
    const float scale = 1.f / std::sqrt(static_cast<float>(taps));
    auto fill = [&](const memory_desc& md, aligned_floats& b, float k) {
      std::fill_n(b.p, b.size, nan);
      for_each_offset(md, [&](std::int64_t off) { b.p[off] = u(rng) * k; });
    };
    fill(p.src, src, 1.f);
    fill(p.weights, wei, scale);
    if (!p.bias.is_zero()) fill(p.bias, bias, 1.f);
    std::fill_n(dst_init.p, dst_init.size, 7.f);  // what the kernels must overwrite
    for (const post_op& op : p.post_ops) {
      if (op.what != post_op::kind::binary_add) continue;
      const auto bc = op.binary.broadcast;
      const std::size_t n = bc == binary_broadcast::none ? dst_init.size
                            : bc == binary_broadcast::per_channel
                                ? static_cast<std::size_t>(p.dst.dims()[1])
                                : 1;
      auto b = std::make_unique<aligned_floats>(n);
      for (std::size_t i = 0; i < n; ++i) b->p[i] = u(rng);
      operands.push_back(std::move(b));
    }
  }

  // dst as a kernel (or the reference with k null) leaves it.
  template <class Kernel>
  std::vector<float> run(const conv_problem& p, const Kernel* k) const {
    return run(p, k, default_thread_pool());
  }
  template <class Kernel>
  std::vector<float> run(const conv_problem& p, const Kernel* k, thread_pool& pool) const {
    std::vector<float> dst(dst_init.p, dst_init.p + dst_init.size);
    std::vector<const float*> ops;
    for (const auto& o : operands) ops.push_back(o->p);
    conv_args a;
    a.src = src.p;
    a.weights = wei.p;
    a.bias = p.bias.is_zero() ? nullptr : bias.p;
    a.dst = dst.data();
    a.binary_operands = ops.data();
    if (k == nullptr) {
      conv_reference(p, a);
    } else {
      aligned_floats scratch(std::max<std::size_t>(k->scratchpad_bytes() / 4, 1));
      k->execute(a, scratch.p, pool);
    }
    return dst;
  }
};

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// The logical elements of dst (padding excluded) within tolerance.
void check_close(const conv_problem& p, const std::vector<float>& got,
                 const std::vector<float>& want) {
  int bad = 0;
  for_each_offset(p.dst, [&](std::int64_t off) {
    const float g = got[static_cast<std::size_t>(off)], w = want[static_cast<std::size_t>(off)];
    const bool ok = (std::isnan(g) && std::isnan(w)) ||
                    std::abs(g - w) <= tolerance * std::max(1.f, std::abs(w));
    if (!ok && ++bad <= 3) {
      UNSCOPED_INFO("dst offset " << off << ": generic " << g << ", reference " << w);
    }
  });
  CHECK(bad == 0);
}

std::string describe(const shape& s, const conv_problem& p) {
  return "n" + std::to_string(s.n) + " ic" + std::to_string(s.ic) + " oc" + std::to_string(s.oc) +
         " " + std::to_string(s.ih) + "x" + std::to_string(s.iw) + " k" + std::to_string(s.kh) +
         "x" + std::to_string(s.kw) + " s" + std::to_string(s.sh) + "," + std::to_string(s.sw) +
         " d" + std::to_string(s.dh) + "," + std::to_string(s.dw) + " pad" + std::to_string(s.pt) +
         "," + std::to_string(s.pl) + "," + std::to_string(s.pb) + "," + std::to_string(s.pr) +
         " g" + std::to_string(s.g) + " src " + p.src.to_string() + " dst " + p.dst.to_string() +
         " wei " + p.weights.to_string() + " bias " + std::to_string(s.bias) + " post-ops " +
         std::to_string(p.post_ops.size());
}

// A random problem the generic kernel takes (not depthwise): sizes with
// tails against every tile, both layouts, up to three post-ops.
conv_problem random_problem(std::mt19937& rng, shape& s) {
  const format_tag acts[] = {format_tag::nchw, format_tag::nhwc, format_tag::nChw16c};
  for (;;) {
    s = shape{};
    s.n = 1 + rng() % 2;
    s.g = rng() % 4 == 0 ? 2 + rng() % 2 : 1;
    s.ic = s.g * (1 + rng() % 40);
    s.oc = s.g * (1 + rng() % 40);
    s.kh = 1 + rng() % 4;
    s.kw = 1 + rng() % 4;
    s.ih = 1 + rng() % 17;
    s.iw = 1 + rng() % 23;
    s.sh = 1 + rng() % 2;
    s.sw = 1 + rng() % 3;
    s.dh = rng() % 3 == 0 ? 1 : 0;
    s.dw = rng() % 3 == 0 ? rng() % 3 : 0;
    s.pt = rng() % 3;
    s.pl = rng() % 3;
    s.pb = rng() % 3;
    s.pr = rng() % 3;
    s.src = acts[rng() % 3];
    s.dst = acts[rng() % 3];
    s.plain_weights = rng() % 3 == 0;
    s.bias = rng() % 3 != 0;
    if (out_size(s.ih, s.kh, s.sh, s.dh, s.pt, s.pb) < 1 ||
        out_size(s.iw, s.kw, s.sw, s.dw, s.pl, s.pr) < 1) {
      continue;
    }
    conv_problem p = make_problem(s);
    const int nops = static_cast<int>(rng() % 4);
    int binaries = 0;
    for (int i = 0; i < nops; ++i) {
      post_op op;
      if (rng() % 3 == 0) {
        op.what = post_op::kind::binary_add;
        op.binary.arg_index = binaries++;
        op.binary.broadcast = static_cast<binary_broadcast>(rng() % 3);
      } else {
        op.eltwise = random_eltwise(rng);
      }
      p.post_ops.push_back(op);
    }
    if (check_conv_problem(p)) return p;
  }
}

// The generic kernel against the specialized one (default configuration
// and, with `variants`, every variant the kernel tests compile) and the
// reference.
void check_problem(const conv_problem& p, cpu_isa isa, std::uint32_t seed, bool variants) {
  auto g = generic_conv_kernel::create(p, default_conv_config(p, isa), isa);
  REQUIRE(g);
  const tensors t(p, seed);
  const std::vector<float> generic = t.run(p, g.value().get());
  check_close(p, generic, t.run<conv_kernel>(p, nullptr));
  std::vector<conv_config> configs = {default_conv_config(p, isa)};
  if (variants) {
    for (const conv_config& c : conv_config_variants(p, isa)) configs.push_back(c);
  }
  const conv_geometry flat = flatten_conv_pointwise(analyze_conv(p).value());
  for (const conv_config& c : configs) {
    INFO("config ow_block " << c.ow_block << " oc_blocks " << c.oc_blocks << " ic_unroll "
                            << c.ic_unroll << " order " << static_cast<int>(c.order) << " ic_block "
                            << c.ic_block << " oc_panel " << c.oc_panel << " thr_oc " << c.thr_oc);
    auto k = conv_kernel::create(p, c, isa);
    REQUIRE(k);
    const std::vector<float> got = t.run(p, k.value().get());
    if (conv_config_sums_as_generic(flat, effective_conv_config(flat, c))) {
      CHECK(generic_conv_kernel::create(p, c, isa));
      CHECK(same_bits(generic, got));
    } else {
      // Another order of the same sums: the generic kernel declines (the
      // primitive is created synchronously); the results are right.
      CHECK_FALSE(generic_conv_kernel::create(p, c, isa));
      check_close(p, got, t.run<conv_kernel>(p, nullptr));
    }
  }
}

}  // namespace

TEST_CASE("the generic convolution is built into the library at avx2 and avx512_core",
          "[cpu][generic][conv]") {
  for (cpu_isa isa : test_isas()) {
    auto code = generic_isa_for(generic_kernel::conv, isa);
    REQUIRE(code);
    CHECK(code.value() == isa);
  }
  // Higher levels run avx512_core's object.
  if (detected_isa() > cpu_isa::avx512_core) {
    CHECK(generic_isa_for(generic_kernel::conv, detected_isa()).value() == cpu_isa::avx512_core);
  }
}

TEST_CASE("generic convolutions of random shapes equal the specialized kernel bit for bit",
          "[cpu][generic][conv]") {
  std::mt19937 rng(11);
  for (cpu_isa isa : test_isas()) {
    for (int trial = 0; trial < 24; ++trial) {
      shape s;
      const conv_problem p = random_problem(rng, s);
      INFO(std::string(to_string(isa)) + " trial " + std::to_string(trial) + ": " + describe(s, p));
      check_problem(p, isa, 100 + trial, trial % 6 == 0);
    }
  }
}

TEST_CASE("the generic convolution on the bench_conv layer kinds and every post-op",
          "[cpu][generic][conv]") {
  const cpu_isa isa = test_isas().back();
  shape s;
  SECTION("3x3, 64 channels, padded (interior and edge tiles)") {
    s.ic = s.oc = 64;
    s.ih = s.iw = 20;
    check_problem(make_problem(s), isa, 1, true);
  }
  SECTION("3x3 over 7-pixel rows: one row tile with an edge pixel at each end") {
    // conv5_3x3_512to512_7's geometry with fewer channels: its 7x3 tile
    // holds both edge pixels, which the masked edge form runs in one call.
    s.ic = s.oc = 48;
    s.ih = s.iw = 7;
    check_problem(make_problem(s), isa, 5, true);
  }
  SECTION("1x1 over flattened rows, 256 to 64 channels") {
    s.ic = 256;
    s.oc = 64;
    s.kh = s.kw = 1;
    s.pt = s.pl = s.pb = s.pr = 0;
    s.ih = s.iw = 14;
    check_problem(make_problem(s), isa, 2, true);
  }
  SECTION("7x7 stride 2 over 3 channels, nchw src") {
    s.ic = 3;
    s.oc = 64;
    s.kh = s.kw = 7;
    s.sh = s.sw = 2;
    s.pt = s.pl = s.pb = s.pr = 3;
    s.ih = s.iw = 30;
    s.src = format_tag::nchw;
    check_problem(make_problem(s), isa, 3, false);
  }
  SECTION("3x3 stride 2, 128 channels") {
    s.ic = s.oc = 128;
    s.sh = s.sw = 2;
    s.ih = s.iw = 15;
    check_problem(make_problem(s), isa, 4, false);
  }
  SECTION("each post-op alone, and a chain of all") {
    s.ic = 24;
    s.oc = 40;  // a partial last block
    s.ih = s.iw = 9;
    std::vector<post_op_chain> chains;
    for (int a = 0; a <= static_cast<int>(eltwise_alg::clip); ++a) {
      post_op op;
      op.eltwise = {static_cast<eltwise_alg>(a), a == 0 ? 0.f : -0.25f, 0.75f, 1.f};
      chains.push_back({op});
      op.eltwise.scale = 0.5f;
      chains.push_back({op});
    }
    post_op_chain all;
    for (int b = 0; b < 3; ++b) {
      post_op op;
      op.what = post_op::kind::binary_add;
      op.binary.arg_index = 0;
      op.binary.broadcast = static_cast<binary_broadcast>(b);
      chains.push_back({op});
      op.binary.arg_index = b;
      all.push_back(op);
      post_op e;
      e.eltwise = {static_cast<eltwise_alg>(b * 2 + 1), 0.f, 0.f, 1.f};
      all.push_back(e);
    }
    chains.push_back(all);
    for (format_tag dst : {format_tag::nChw16c, format_tag::nhwc, format_tag::nchw}) {
      s.dst = dst;
      for (std::size_t i = 0; i < chains.size(); ++i) {
        conv_problem p = make_problem(s);
        p.post_ops = chains[i];
        INFO("chain " << i << " dst " << p.dst.to_string());
        check_problem(p, isa, 10 + static_cast<std::uint32_t>(i), false);
      }
    }
  }
}

TEST_CASE(
    "K panels over one kernel row sum as the generic kernel does, bit for bit; over several "
    "rows the generic kernel declines them",
    "[cpu][generic][conv][blocking]") {
  shape s;
  std::int64_t block = 16;
  bool one_row = true;
  SECTION("1x1 over flattened rows, 100 channels in passes of 16 (the middle ones a loop)") {
    s.ic = 100;
    s.oc = 40;
    s.kh = s.kw = 1;
    s.pt = s.pl = s.pb = s.pr = 0;
    s.ih = s.iw = 9;
  }
  SECTION("1x1 stride 2, nhwc, plain weights, two passes of 32 and 16") {
    s.ic = 48;
    s.oc = 24;
    s.kh = s.kw = 1;
    s.sh = s.sw = 2;
    s.pt = s.pl = s.pb = s.pr = 0;
    s.ih = s.iw = 11;
    s.src = s.dst = format_tag::nhwc;
    s.plain_weights = true;
    block = 32;
  }
  SECTION("a 1x3 kernel, padded, nchw, two images") {
    s.n = 2;
    s.ic = 37;
    s.oc = 19;
    s.kh = 1;
    s.pt = s.pb = 0;
    s.iw = 15;
    s.src = s.dst = format_tag::nchw;
    block = 8;
  }
  SECTION("grouped 1x1, groups splitting a block") {
    s.g = 2;
    s.ic = 2 * 36;
    s.oc = 2 * 20;
    s.kh = s.kw = 1;
    s.pt = s.pl = s.pb = s.pr = 0;
    s.dst = format_tag::nhwc;
  }
  SECTION("3x3, padded: declined") {
    s.ic = 48;
    s.oc = 32;
    s.ih = s.iw = 10;
    one_row = false;
  }
  SECTION("3x3 stride 2 with dilation: declined") {
    s.ic = 40;
    s.oc = 20;
    s.sh = s.sw = 2;
    s.dh = 1;
    s.ih = s.iw = 13;
    s.src = format_tag::nhwc;
    one_row = false;
  }
  conv_problem p = make_problem(s);
  post_op relu;
  post_op sum;
  sum.what = post_op::kind::binary_add;
  sum.binary.broadcast = binary_broadcast::none;
  p.post_ops = {sum, relu};
  for (cpu_isa isa : test_isas()) {
    INFO(std::string(to_string(isa)) + ": " + describe(s, p));
    const conv_config def = default_conv_config(p, isa);
    conv_config c = def;
    c.ic_block = static_cast<int>(block);
    const tensors t(p, 77);
    auto base = conv_kernel::create(p, def, isa);
    auto blocked = conv_kernel::create(p, c, isa);
    REQUIRE(base);
    REQUIRE(blocked);
    const std::vector<float> want = t.run(p, base.value().get());
    const std::vector<float> got = t.run(p, blocked.value().get());
    check_close(p, got, t.run<conv_kernel>(p, nullptr));
    auto g = generic_conv_kernel::create(p, c, isa);
    if (one_row) {
      REQUIRE(g);
      CHECK(same_bits(got, want));
      CHECK(same_bits(got, t.run(p, g.value().get())));
    } else {
      REQUIRE_FALSE(g);
      CHECK(g.why().code == status::unimplemented);
      CHECK_THAT(g.why().message, Catch::Contains("K panels"));
      // Why: the same products summed in another order round differently
      // somewhere in the output.
      CHECK_FALSE(same_bits(got, want));
    }
  }
}

TEST_CASE("the generic convolution declines what it cannot run bit-identically",
          "[cpu][generic][conv]") {
  const cpu_isa isa = test_isas().back();
  shape s;
  SECTION("more post-ops than its parameter block holds") {
    conv_problem p = make_problem(s);
    for (int i = 0; i <= gc_max_post_ops; ++i) p.post_ops.push_back(post_op{});
    auto g = generic_conv_kernel::create(p, default_conv_config(p, isa), isa);
    REQUIRE_FALSE(g);
    CHECK(g.why().code == status::unimplemented);
  }
  SECTION("an ISA below avx2") {
    const conv_problem p = make_problem(s);
    auto g = generic_conv_kernel::create(p, default_conv_config(p, isa), cpu_isa::sse41);
    REQUIRE_FALSE(g);
    CHECK(g.why().code == status::unimplemented);
  }
  SECTION("a kernel wider than the masked edge form's table, with padding") {
    // 1 x (max + 1) taps over a row padded on both sides: at avx512_core
    // the edge tiles' per-call table holds max taps a pixel, so the
    // specialized kernel is made instead; unpadded, no pixel is an edge one
    // and the generic kernel runs it (bit for bit); max taps run too.
    const std::int64_t max = generic_conv_max_masked_kw;
    s.ic = s.oc = 16;
    s.kh = 1;
    s.ih = 2;
    s.pt = s.pb = 0;
    s.kw = max + 1;
    s.iw = max + 8;
    s.pl = s.pr = 2;
    const conv_problem padded = make_problem(s);
    auto g = generic_conv_kernel::create(padded, default_conv_config(padded, isa), isa);
    if (generic_conv_masked_edges(isa)) {
      REQUIRE_FALSE(g);
      CHECK(g.why().code == status::unimplemented);
      CHECK(g.why().message.find("taps wide") != std::string::npos);
    } else {
      CHECK(g);
    }
    s.pl = s.pr = 0;
    check_problem(make_problem(s), isa, 6, false);
    s.kw = max;
    s.pl = s.pr = 2;
    check_problem(make_problem(s), isa, 7, false);
  }
  SECTION("an invalid problem") {
    conv_problem p = make_problem(s);
    p.stride_h = 0;
    auto g = generic_conv_kernel::create(p, default_conv_config(p, isa), isa);
    REQUIRE_FALSE(g);
  }
}

namespace {

// A random depthwise problem (groups == IC == OC): channel counts with
// partial blocks, odd sizes, strides, padding and dilation, every
// activation layout, plain or preferred (Goihw16g) weights, up to three
// post-ops.
conv_problem random_depthwise_problem(std::mt19937& rng, shape& s) {
  const format_tag acts[] = {format_tag::nchw, format_tag::nhwc, format_tag::nChw16c};
  for (;;) {
    s = shape{};
    s.n = 1 + rng() % 2;
    s.g = 2 + rng() % 70;
    s.ic = s.oc = s.g;
    s.kh = 1 + rng() % 5;
    s.kw = 1 + rng() % 5;
    s.ih = 1 + rng() % 19;
    s.iw = 1 + rng() % 29;
    s.sh = 1 + rng() % 3;
    s.sw = 1 + rng() % 3;
    s.dh = rng() % 3 == 0 ? 1 : 0;
    s.dw = rng() % 3 == 0 ? rng() % 3 : 0;
    s.pt = rng() % 4;
    s.pl = rng() % 4;
    s.pb = rng() % 3;
    s.pr = rng() % 3;
    s.src = acts[rng() % 3];
    s.dst = acts[rng() % 3];
    s.plain_weights = rng() % 3 == 0;
    s.bias = rng() % 3 != 0;
    // The dilated kernel within the padded input (out_size truncates).
    if (s.ih + s.pt + s.pb < (s.kh - 1) * (s.dh + 1) + 1 ||
        s.iw + s.pl + s.pr < (s.kw - 1) * (s.dw + 1) + 1) {
      continue;
    }
    conv_problem p = make_problem(s);
    const int nops = static_cast<int>(rng() % 4);
    int binaries = 0;
    for (int i = 0; i < nops; ++i) {
      post_op op;
      if (rng() % 3 == 0) {
        op.what = post_op::kind::binary_add;
        op.binary.arg_index = binaries++;
        op.binary.broadcast = static_cast<binary_broadcast>(rng() % 3);
      } else {
        op.eltwise = random_eltwise(rng);
      }
      p.post_ops.push_back(op);
    }
    if (check_conv_problem(p)) return p;
  }
}

}  // namespace

TEST_CASE(
    "generic depthwise convolutions of random shapes equal the specialized kernel bit for "
    "bit",
    "[cpu][generic][conv][depthwise][kernel_sweep]") {
  std::mt19937 rng(29);
  for (cpu_isa isa : test_isas()) {
    for (int trial = 0; trial < 40; ++trial) {
      shape s;
      const conv_problem p = random_depthwise_problem(rng, s);
      INFO(std::string(to_string(isa)) + " trial " + std::to_string(trial) + ": " + describe(s, p));
      check_problem(p, isa, 500 + trial, trial % 5 == 0);
    }
  }
}

TEST_CASE("the generic depthwise convolution on MobileNet layers, every layout and post-op",
          "[cpu][generic][conv][depthwise]") {
  const cpu_isa isa = test_isas().back();
  shape s;
  s.kh = s.kw = 3;
  SECTION("3x3 stride 1 and 2 over 32 to 512 channels, nChw16c") {
    struct layer {
      std::int64_t c, in, stride;
    };
    for (const layer l : {layer{32, 30, 1}, layer{64, 29, 2}, layer{128, 14, 1}, layer{256, 14, 2},
                          layer{512, 7, 1}}) {
      s.g = s.ic = s.oc = l.c;
      s.ih = s.iw = l.in;
      s.sh = s.sw = l.stride;
      const conv_problem p = make_problem(s);
      INFO(describe(s, p));
      check_problem(p, isa, 20 + static_cast<std::uint32_t>(l.c), true);
    }
  }
  SECTION("every activation layout and weights layout, a partial last block") {
    const format_tag acts[] = {format_tag::nchw, format_tag::nhwc, format_tag::nChw16c};
    s.g = s.ic = s.oc = 40;
    s.ih = 11;
    s.iw = 13;
    for (format_tag src : acts) {
      for (format_tag dst : acts) {
        for (bool plain : {false, true}) {
          s.src = src;
          s.dst = dst;
          s.plain_weights = plain;
          const conv_problem p = make_problem(s);
          INFO(describe(s, p));
          check_problem(p, isa, 40, false);
        }
      }
    }
  }
  SECTION("each post-op alone, and a chain of all, into every dst layout") {
    s.g = s.ic = s.oc = 24;
    s.ih = s.iw = 9;
    std::vector<post_op_chain> chains;
    for (int a = 0; a <= static_cast<int>(eltwise_alg::clip); ++a) {
      post_op op;
      op.eltwise = {static_cast<eltwise_alg>(a), a == 0 ? 0.f : -0.25f, 0.75f, 1.f};
      chains.push_back({op});
      op.eltwise.scale = 0.5f;
      chains.push_back({op});
    }
    post_op_chain all;
    for (int b = 0; b < 3; ++b) {
      post_op op;
      op.what = post_op::kind::binary_add;
      op.binary.arg_index = 0;
      op.binary.broadcast = static_cast<binary_broadcast>(b);
      chains.push_back({op});
      op.binary.arg_index = b;
      all.push_back(op);
      post_op e;
      e.eltwise = {static_cast<eltwise_alg>(b * 2 + 1), 0.f, 0.f, 1.f};
      all.push_back(e);
    }
    chains.push_back(all);
    for (format_tag dst : {format_tag::nChw16c, format_tag::nhwc, format_tag::nchw}) {
      s.dst = dst;
      for (std::size_t i = 0; i < chains.size(); ++i) {
        conv_problem p = make_problem(s);
        p.post_ops = chains[i];
        INFO("chain " << i << " dst " << p.dst.to_string());
        check_problem(p, isa, 60 + static_cast<std::uint32_t>(i), false);
      }
    }
  }
}

TEST_CASE("a generic depthwise output whose taps all fall in the padding keeps a -0 bias",
          "[cpu][generic][conv][depthwise]") {
  // 1x1 taps with padding 1: the border outputs have no tap inside the
  // image, so they are their bias exactly; the specialized kernel leaves
  // those taps out, and a multiply-add of 0 would turn -0 into +0.
  for (cpu_isa isa : test_isas()) {
    shape s;
    s.g = s.ic = s.oc = 20;
    s.kh = s.kw = 1;
    s.ih = s.iw = 5;
    s.src = format_tag::nhwc;
    s.dst = format_tag::nhwc;
    const conv_problem p = make_problem(s);
    auto g = generic_conv_kernel::create(p, default_conv_config(p, isa), isa);
    REQUIRE(g);
    auto k = conv_kernel::create(p, default_conv_config(p, isa), isa);
    REQUIRE(k);
    tensors t(p, 7);
    std::fill_n(t.bias.p, 20, -0.f);
    const std::vector<float> generic = t.run(p, g.value().get());
    CHECK(same_bits(generic, t.run(p, k.value().get())));
    // dst (0, c, 0, 0) for every channel: -0.
    int negative_zeros = 0;
    for (int c = 0; c < 20; ++c) {
      const float v = generic[static_cast<std::size_t>(c)];
      if (v == 0.f && std::signbit(v)) ++negative_zeros;
    }
    CHECK(negative_zeros == 20);
  }
}

TEST_CASE("the generic depthwise row form (3-tap rows, nChw16c, stride 1 and 2) over row splits",
          "[cpu][generic][conv][depthwise]") {
  // generic_dw_row_symbol: widths from one pixel (edges only, no tile) to
  // several tiles of two widths, left and right padding from 0 to 3 (edge
  // pixels with one, two or no tap inside), 40 channels (a chunk of two
  // blocks and a last chunk of one partial block), kernel heights 1 to 3
  // with and without dilation along h.
  std::mt19937 rng(41);
  for (cpu_isa isa : test_isas()) {
    for (std::int64_t iw : {1, 2, 3, 4, 5, 7, 9, 12, 14, 17, 23, 28, 33, 41}) {
      for (std::int64_t sw : {1, 2}) {
        for (std::int64_t pl : {0, 1, 2, 3}) {
          shape s;
          s.g = s.ic = s.oc = 40;
          s.kw = 3;
          s.kh = 1 + static_cast<std::int64_t>(rng() % 3);
          s.dh = rng() % 4 == 0 ? 1 : 0;
          s.ih = 2 + static_cast<std::int64_t>(rng() % 4);
          s.iw = iw;
          s.sw = sw;
          s.sh = 1 + static_cast<std::int64_t>(rng() % 2);
          s.pl = pl;
          s.pr = static_cast<std::int64_t>(rng() % 4);
          s.pt = static_cast<std::int64_t>(rng() % 2);
          s.pb = static_cast<std::int64_t>(rng() % 2);
          s.bias = rng() % 4 != 0;
          if (s.iw + s.pl + s.pr < 3 || s.ih + s.pt + s.pb < (s.kh - 1) * (s.dh + 1) + 1) continue;
          const format_tag dsts[] = {format_tag::nChw16c, format_tag::nhwc, format_tag::nchw};
          s.dst = dsts[rng() % 3];
          conv_problem p = make_problem(s);
          if (rng() % 4 == 0) {
            post_op op;
            op.eltwise = random_eltwise(rng);
            p.post_ops.push_back(op);
          }
          INFO(std::string(to_string(isa)) + ": " + describe(s, p));
          check_problem(p, isa, 700 + static_cast<std::uint32_t>(iw * 8 + sw * 4 + pl), false);
        }
      }
    }
  }
}

TEST_CASE("a generic depthwise row keeps a -0 bias where an edge pixel has no tap inside",
          "[cpu][generic][conv][depthwise]") {
  // Padding 3 on both sides of a 3-tap row: the first and last pixels read
  // only padding, so they are their bias exactly (-0), the row form's edge
  // pixels over an empty kw range.
  for (cpu_isa isa : test_isas()) {
    for (std::int64_t sw : {1, 2}) {
      shape s;
      s.g = s.ic = s.oc = 32;
      s.ih = 4;
      s.iw = 6;
      s.sw = sw;
      s.pl = s.pr = 3;
      const conv_problem p = make_problem(s);
      auto g = generic_conv_kernel::create(p, default_conv_config(p, isa), isa);
      REQUIRE(g);
      auto k = conv_kernel::create(p, default_conv_config(p, isa), isa);
      REQUIRE(k);
      tensors t(p, 9);
      std::fill_n(t.bias.p, 32, -0.f);
      const std::vector<float> generic = t.run(p, g.value().get());
      CHECK(same_bits(generic, t.run(p, k.value().get())));
      // dst (0, c, oh, 0): the first pixel of every row.
      const auto dims = p.dst.dims();
      int negative_zeros = 0, pixels = 0;
      for (std::int64_t c = 0; c < 32; ++c) {
        for (std::int64_t oh = 0; oh < dims[2]; ++oh) {
          const std::int64_t off = p.dst.offset_of({0, c, oh, 0});
          const float v = generic[static_cast<std::size_t>(off)];
          ++pixels;
          if (v == 0.f && std::signbit(v)) ++negative_zeros;
        }
      }
      CHECK(negative_zeros == pixels);
    }
  }
}

TEST_CASE("the generic depthwise row form gives the same bits however its items are split",
          "[cpu][generic][conv][depthwise]") {
  // The row functions run a thread's items (rows innermost, then chunks,
  // then images) in runs: the rows of one chunk from any row, or whole
  // chunks of an image. Pools of 1 to 7 threads split the items of two
  // images at every kind of boundary; channel counts give chunks that are
  // all alike (64), a last chunk of fewer blocks (48 at avx512_core) and a
  // last block of fewer lanes (40); rows 1, 3 and 7 high.
  for (cpu_isa isa : test_isas()) {
    for (std::int64_t c : {40, 48, 64}) {
      for (std::int64_t ih : {1, 3, 7}) {
        for (std::int64_t sw : {1, 2}) {
          shape s;
          s.n = 2;
          s.g = s.ic = s.oc = c;
          s.ih = ih;
          s.iw = 9;
          s.sh = s.sw = sw;
          s.bias = ih != 3;
          conv_problem p = make_problem(s);
          const tensors t(p, 900 + static_cast<std::uint32_t>(c + ih * 2 + sw));
          auto k = conv_kernel::create(p, default_conv_config(p, isa), isa);
          REQUIRE(k);
          const std::vector<float> want = t.run(p, k.value().get());
          for (int nthr = 1; nthr <= 7; ++nthr) {
            INFO(std::string(to_string(isa)) + ": " + describe(s, p) + " threads " +
                 std::to_string(nthr));
            thread_pool pool(nthr);
            p.nthr = nthr;
            auto g = generic_conv_kernel::create(p, default_conv_config(p, isa), isa);
            REQUIRE(g);
            CHECK(same_bits(t.run(p, g.value().get(), pool), want));
          }
        }
      }
    }
  }
}
