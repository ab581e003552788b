// The specialized depthwise convolution's compilation: no IR pass and
// CodeGenOpt::None (the generator emits SSA sums, loops in final form and
// stepped addresses, so nothing is left for a pass to do), with results
// that stay right against the naive reference and bit for bit equal to the
// generic depthwise kernel's (the tiered swap's promise) over random
// depthwise shapes: strides 1 and 2, padding 0 and 1, channel counts that
// are not multiples of 16, every activation layout, bias or none, post-ops.
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

#include "jit/compiler.hpp"
#include "kernels/conv_config.hpp"
#include "kernels/conv_generator.hpp"
#include "kernels/conv_kernel.hpp"
#include "kernels/conv_validation.hpp"
#include "kernels/generic_conv_kernel.hpp"
#include "naive_reference.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "test_isas.hpp"

using namespace primcache;
using namespace primcache::cpu_internal;
using cpu_test::test_isas;

namespace {

struct dw_shape {
  std::int64_t n = 1, c = 16, ih = 8, iw = 8, s = 1, pad = 1;
  format_tag src = format_tag::nChw16c, dst = format_tag::nChw16c;
  bool plain_weights = false;
  bool bias = true;
};

std::string describe(const dw_shape& s, const conv_problem& p) {
  return "n" + std::to_string(s.n) + " c" + std::to_string(s.c) + " " + std::to_string(s.ih) + "x" +
         std::to_string(s.iw) + " 3x3 s" + std::to_string(s.s) + " pad" + std::to_string(s.pad) +
         " src " + p.src.to_string() + " dst " + p.dst.to_string() + " wei " +
         p.weights.to_string() + " bias " + std::to_string(s.bias) + " post-ops " +
         std::to_string(p.post_ops.size());
}

conv_problem make_problem(const dw_shape& s) {
  conv_problem p;
  const std::int64_t oh = (s.ih + 2 * s.pad - 3) / s.s + 1;
  const std::int64_t ow = (s.iw + 2 * s.pad - 3) / s.s + 1;
  p.src = memory_desc({s.n, s.c, s.ih, s.iw}, data_type::f32, s.src);
  p.dst = memory_desc({s.n, s.c, oh, ow}, data_type::f32, s.dst);
  p.stride_h = p.stride_w = s.s;
  p.pad_t = p.pad_l = p.pad_b = p.pad_r = s.pad;
  p.groups = s.c;
  p.nthr = default_thread_pool().size();
  if (s.bias) p.bias = memory_desc({s.c}, data_type::f32, format_tag::a);
  p.weights = memory_desc({s.c, 1, 1, 3, 3}, data_type::f32, format_tag::goihw);
  if (!s.plain_weights) p.weights = preferred_weights_desc(p).value();
  return p;
}

// A random 3x3 depthwise problem: stride 1 or 2, padding 0 or 1, 1 to 70
// channels (most not a multiple of 16), sizes from 3 to 30, every
// activation layout, up to three post-ops of any kind.
conv_problem random_problem(std::mt19937& rng, dw_shape& s) {
  const format_tag acts[] = {format_tag::nchw, format_tag::nhwc, format_tag::nChw16c};
  for (;;) {
    s = dw_shape{};
    s.n = 1 + rng() % 2;
    s.c = 1 + rng() % 70;
    s.ih = 3 + rng() % 16;
    s.iw = 3 + rng() % 28;
    s.s = 1 + rng() % 2;
    s.pad = rng() % 2;
    s.src = acts[rng() % 3];
    s.dst = acts[rng() % 3];
    s.plain_weights = rng() % 4 == 0;
    s.bias = rng() % 3 != 0;
    conv_problem p = make_problem(s);
    std::uniform_real_distribution<float> v(-1.f, 1.f);
    const int nops = static_cast<int>(rng() % 4);
    int binaries = 0;
    for (int i = 0; i < nops; ++i) {
      post_op op;
      if (rng() % 3 == 0) {
        op.what = post_op::kind::binary_add;
        op.binary.arg_index = binaries++;
        op.binary.broadcast = static_cast<binary_broadcast>(rng() % 3);
      } else {
        op.eltwise.alg = rng() % 2 ? eltwise_alg::relu : eltwise_alg::linear;
        op.eltwise.alpha = v(rng);
        op.eltwise.beta = v(rng);
      }
      p.post_ops.push_back(op);
    }
    if (check_conv_problem(p)) return p;
  }
}

struct floats {
  explicit floats(std::size_t n)
      : p(static_cast<float*>(
            std::aligned_alloc(64, std::max<std::size_t>(64, (n * 4 + 63) / 64 * 64)))),
        size(n) {}
  ~floats() { std::free(p); }
  floats(const floats&) = delete;
  floats& operator=(const floats&) = delete;
  float* p;
  std::size_t size;
};

// fn(offset) for every logical element of md.
template <class Fn>
void for_each_element(const memory_desc& md, Fn&& fn) {
  const auto dims = md.dims();
  std::vector<std::int64_t> idx(static_cast<std::size_t>(md.ndims()), 0);
  for (std::int64_t e = 0; e < md.nelems(); ++e) {
    std::int64_t rest = e;
    for (int d = md.ndims() - 1; d >= 0; --d) {
      idx[static_cast<std::size_t>(d)] = rest % dims[d];
      rest /= dims[d];
    }
    fn(cpu_test::naive_offset(md, idx));
  }
}

// A problem's tensors: padding NaN (never read into a result), the logical
// elements random, a sixth of the source -0 (so that -0 sums occur).
struct tensors {
  floats src, wei, bias;
  std::vector<std::unique_ptr<floats>> operands;
  std::size_t dst_size;

  tensors(const conv_problem& p, std::uint32_t seed)
      : src(p.src.size_bytes() / 4),
        wei(p.weights.size_bytes() / 4),
        bias(std::max<std::size_t>(p.bias.size_bytes() / 4, 1)),
        dst_size(p.dst.size_bytes() / 4) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    auto fill = [&](const memory_desc& md, floats& b, float k) {
      std::fill_n(b.p, b.size, std::nanf(""));
      for_each_element(md,
                       [&](std::int64_t off) { b.p[off] = rng() % 6 == 0 ? -0.f : u(rng) * k; });
    };
    fill(p.src, src, 1.f);
    fill(p.weights, wei, 1.f / 3.f);
    if (!p.bias.is_zero()) fill(p.bias, bias, 1.f);
    for (const post_op& op : p.post_ops) {
      if (op.what != post_op::kind::binary_add) continue;
      const auto bc = op.binary.broadcast;
      const std::size_t n = bc == binary_broadcast::none ? dst_size
                            : bc == binary_broadcast::per_channel
                                ? static_cast<std::size_t>(p.dst.dims()[1])
                                : 1;
      auto b = std::make_unique<floats>(n);
      for (std::size_t i = 0; i < n; ++i) b->p[i] = u(rng);
      operands.push_back(std::move(b));
    }
  }

  // dst as a kernel leaves it (the naive reference with k null).
  template <class Kernel>
  std::vector<float> run(const conv_problem& p, const Kernel* k) const {
    std::vector<float> dst(dst_size, 7.f);
    std::vector<const float*> ops;
    for (const auto& o : operands) ops.push_back(o->p);
    conv_args a;
    a.src = src.p;
    a.weights = wei.p;
    a.bias = p.bias.is_zero() ? nullptr : bias.p;
    a.dst = dst.data();
    a.binary_operands = ops.data();
    if (k == nullptr) {
      cpu_test::naive_conv(p, a);
    } else {
      floats scratch(std::max<std::size_t>(k->scratchpad_bytes() / 4, 1));
      k->execute(a, scratch.p, default_thread_pool());
    }
    return dst;
  }
};

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Within 1e-5 relative of the reference (9 taps, one rounding each).
int mismatches(const conv_problem& p, const std::vector<float>& got,
               const std::vector<float>& want) {
  int bad = 0;
  for_each_element(p.dst, [&](std::int64_t off) {
    const float g = got[static_cast<std::size_t>(off)], w = want[static_cast<std::size_t>(off)];
    if (!(std::abs(g - w) <= 1e-5f * std::max(1.f, std::abs(w))) && ++bad <= 3) {
      UNSCOPED_INFO("dst offset " << off << ": kernel " << g << ", reference " << w);
    }
  });
  return bad;
}

conv_geometry geometry_of(const conv_problem& p) {
  return flatten_conv_pointwise(analyze_conv(p).value());
}

}  // namespace

TEST_CASE("a depthwise convolution compiles with no IR pass, its code generation at Default",
          "[cpu][conv][depthwise][jit]") {
  std::mt19937 rng(11);
  for (cpu_isa isa : test_isas()) {
    for (int trial = 0; trial < 8; ++trial) {
      dw_shape s;
      const conv_problem p = random_problem(rng, s);
      INFO(std::string(to_string(isa)) + " trial " + std::to_string(trial) + ": " + describe(s, p));
      const conv_geometry g = geometry_of(p);
      REQUIRE(g.depthwise);
      for (const conv_config& c : conv_config_variants(p, isa)) {
        const compile_settings cs = conv_compile_settings_for(g, effective_conv_config(g, c));
        CHECK(std::string(cs.pipeline).empty());
        // Default: at None its FMAs are tied to shared source and weight
        // vectors, copied before each (conv_generator.hpp).
        CHECK(cs.codegen_level == 2);
        CHECK_FALSE(cs.loop_strength_reduction);
      }
      // The IR the generator emits is what code generation gets: no pass
      // changes it, and it keeps no sum in memory.
      compile_probe probe;
      probe.keep_code = true;
      REQUIRE(conv_kernel::create(p, default_conv_config(p, isa), isa));
      REQUIRE(probe.profiles.size() == 1);
      const compile_profile& prof = probe.profiles[0];
      CHECK(prof.instructions_after == prof.instructions_before);
      CHECK(prof.ir.find(" alloca ") == std::string::npos);
      CHECK(prof.ir.find("llvm.fmuladd") != std::string::npos);
    }
  }
}

TEST_CASE(
    "depthwise convolutions of random shapes match the reference and the generic kernel bit "
    "for bit",
    "[cpu][conv][depthwise][generic]") {
  std::mt19937 rng(61);
  for (cpu_isa isa : test_isas()) {
    for (int trial = 0; trial < 30; ++trial) {
      dw_shape s;
      const conv_problem p = random_problem(rng, s);
      INFO(std::string(to_string(isa)) + " trial " + std::to_string(trial) + ": " + describe(s, p));
      const tensors t(p, 900 + static_cast<std::uint32_t>(trial));
      const std::vector<float> want = t.run<conv_kernel>(p, nullptr);
      auto gk = generic_conv_kernel::create(p, default_conv_config(p, isa), isa);
      REQUIRE(gk);
      const std::vector<float> generic = t.run(p, gk.value().get());
      CHECK(mismatches(p, generic, want) == 0);
      std::vector<conv_config> configs = {default_conv_config(p, isa)};
      if (trial % 3 == 0) {
        for (const conv_config& c : conv_config_variants(p, isa)) configs.push_back(c);
      }
      for (const conv_config& c : configs) {
        INFO("config ow_block " << c.ow_block << " oc_blocks " << c.oc_blocks << " order "
                                << static_cast<int>(c.order));
        auto k = conv_kernel::create(p, c, isa);
        REQUIRE(k);
        const std::vector<float> got = t.run(p, k.value().get());
        CHECK(mismatches(p, got, want) == 0);
        CHECK(same_bits(got, generic));
      }
    }
  }
}

TEST_CASE("the depthwise kernel on MobileNet's layer shapes equals the generic kernel bit for bit",
          "[cpu][conv][depthwise][generic]") {
  // (channels, size, stride): bench_conv's dw_* rows, smaller where the
  // row and tile structure stays the same (a row of 56 or 112 pixels has
  // the same edge tiles and interior loop as one of 28, more tiles).
  const std::int64_t layers[][3] = {{32, 28, 1},  {64, 28, 2},  {128, 28, 1},
                                    {128, 28, 2}, {256, 28, 1}, {256, 28, 2},
                                    {512, 14, 1}, {512, 14, 2}, {512, 7, 1}};
  for (cpu_isa isa : test_isas()) {
    for (const auto& l : layers) {
      dw_shape s;
      s.c = l[0];
      s.ih = s.iw = l[1];
      s.s = l[2];
      const conv_problem p = make_problem(s);
      INFO(std::string(to_string(isa)) + ": " + describe(s, p));
      const tensors t(p, 77);
      auto gk = generic_conv_kernel::create(p, default_conv_config(p, isa), isa);
      REQUIRE(gk);
      auto k = conv_kernel::create(p, default_conv_config(p, isa), isa);
      REQUIRE(k);
      const std::vector<float> got = t.run(p, k.value().get());
      CHECK(mismatches(p, got, t.run<conv_kernel>(p, nullptr)) == 0);
      CHECK(same_bits(got, t.run(p, gk.value().get())));
    }
  }
}
