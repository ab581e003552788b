// Descriptors whose element 0 sits offset0 elements into the buffer, and
// binary post-op operands with offsets or strides, through the public API on
// every tier of the CPU backend: the specialized kernel (sync mode), the
// generic kernel a tiered creation runs first and the specialized one it
// swaps in, and the reference ("ref:", under an ISA cap below avx2).
//
// Every case either computes what plain loops compute (over logical
// indices, addressed by memory_desc::offset_of, which counts offset0; the
// cases and loops are shared with the OpenCL test, in
// tests/support/offset0_cases) and leaves the buffer outside the tensor's
// elements as it was, or is refused with status::unimplemented when the
// descriptor is created: never a silent wrong result. What docs/cpu.md says
// the backend supports must compute.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/runtime.hpp"
#include "support/offset0_cases.hpp"

using namespace primcache;
using namespace offset0_cases;
using tag = format_tag;

namespace {

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

// The tier a primitive runs on, set for the scope of a case.
enum class tier { specialized, tiered, reference };

const char* name(tier t) {
  switch (t) {
    case tier::specialized: return "specialized (sync)";
    case tier::tiered: return "tiered (generic, then specialized)";
    case tier::reference: return "reference";
  }
  return "?";
}

// Sets the JIT mode and the ISA cap for a tier and empties the primitive
// cache (capacity 0: every creation is a fresh one, on the tier asked for);
// restores all three.
struct tier_scope {
  jit_mode saved_mode = get_jit_mode();
  int saved_capacity = get_primitive_cache_capacity();
  std::optional<cpu_isa> saved_cap = max_cpu_isa();

  explicit tier_scope(tier t) {
    set_primitive_cache_capacity(0);
    set_jit_mode(t == tier::tiered ? jit_mode::tiered : jit_mode::sync);
    if (t == tier::reference) set_max_cpu_isa(cpu_isa::avx);
  }
  ~tier_scope() {
    if (saved_cap) {
      set_max_cpu_isa(*saved_cap);
    } else {
      clear_max_cpu_isa();
    }
    set_jit_mode(saved_mode);
    set_primitive_cache_capacity(saved_capacity);
  }
};

// The CPU engine on a tier: buffers are host memory; a tiered check runs
// twice, the first run the generic kernel's unless the specialization was
// quicker, the second, after the swap, the specialized kernel's; matmul
// with constant weights is checked again (the weights then come from the
// constant tensor cache); a blocked dst's channel padding is written as
// zeros.
target on(tier t) {
  target r{cpu()};
  r.write = [](const memory& m, const std::vector<float>& v) {
    std::memcpy(m.get_data_handle(), v.data(), v.size() * sizeof(float));
  };
  r.read = [](const memory& m) {
    const auto* p = static_cast<const float*>(m.get_data_handle());
    return std::vector<float>(p, p + m.get_desc().size_bytes() / sizeof(float));
  };
  r.runs = t == tier::tiered ? 2 : 1;
  r.wait_specialized = t == tier::tiered;
  r.repeat_constant_weights = true;
  r.expect_reference = t == tier::reference;
  return r;
}

void check_matmul(const matmul_case& c, tier t) {
  INFO("on the " << name(t) << " tier");
  const tier_scope scope(t);
  offset0_cases::check_matmul(c, on(t));
}

void check_conv(const conv_case& c, tier t) {
  INFO("on the " << name(t) << " tier");
  const tier_scope scope(t);
  offset0_cases::check_conv(c, on(t));
}

}  // namespace

TEST_CASE("matmul honours offset0 on src, weights, bias and dst on every tier",
          "[cpu][offset0][matmul]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  matmul_case c;
  SECTION("src") {
    c.src_off = 100;
  }
  SECTION("weights") {
    c.wei_off = 7;
  }
  SECTION("transposed weights") {
    c.transposed_weights = true;
    c.wei_off = 33;
  }
  SECTION("bias") {
    c.bias_off = 16;
  }
  SECTION("dst") {
    c.dst_off = 3;
  }
  SECTION("all four, batched") {
    c.batch = 3;
    c.src_off = 5;
    c.wei_off = 9;
    c.bias_off = 1;
    c.dst_off = 64;
  }
  SECTION("constant weights (packed once, keyed by their offset)") {
    c.constant_weights = true;
    c.wei_off = 11;
    c.src_off = 2;
  }
  check_matmul(c, t);
}

TEST_CASE("matmul binary post-op operands at an offset are read from their element 0",
          "[cpu][offset0][matmul][post_ops]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  matmul_case c;
  SECTION("per column") {
    c.column_off = 5;
  }
  SECTION("scalar") {
    c.scalar_off = 7;
  }
  SECTION("dst-shaped, dst at an offset") {
    c.dst_off = 12;
    c.full_operand = true;
  }
  SECTION("all three, batched, every tensor at an offset") {
    c.batch = 2;
    c.src_off = 3;
    c.wei_off = 4;
    c.bias_off = 5;
    c.dst_off = 6;
    c.column_off = 7;
    c.scalar_off = 8;
    c.full_operand = true;
  }
  check_matmul(c, t);
}

TEST_CASE("binary post-op operands that are not dense are refused or computed right",
          "[cpu][offset0][post_ops]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  INFO("tier " << name(t));
  const tier_scope scope(t);
  // The reviewer's case: a (1, N) operand with column stride 2 and a scalar
  // at offset 7, on a matmul of zeros: every output is 10 + 1.
  check_strided_matmul_operands(on(t));
}

TEST_CASE("a per-channel convolution operand with a channel stride is refused or computed right",
          "[cpu][offset0][conv][post_ops]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  INFO("tier " << name(t));
  const tier_scope scope(t);
  const target on_tier = on(t);
  const std::int64_t oc = 32;
  const memory::desc src_md({1, 16, 4, 4}, data_type::f32, tag::nhwc);
  const memory::desc wei_md({oc, 16, 1, 1}, data_type::f32, tag::oihw);
  const memory::desc dst_md({1, oc, 4, 4}, data_type::f32, tag::nhwc);
  // Channel c at element 3 * c.
  const memory::desc chan_md({1, oc, 1, 1}, data_type::f32, memory::dims{3 * oc, 3, 1, 1});
  post_ops ops;
  ops.append_binary(algorithm::binary_add, chan_md);
  primitive_attr attr;
  attr.set_post_ops(ops);
  const auto pd = make_or_refused<convolution_forward::primitive_desc>([&] {
    return convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                  src_md, wei_md, memory::desc(), dst_md, {1, 1}, {0, 0}, {0, 0}),
        attr, cpu());
  });
  if (!pd) return;
  const filled src = make(src_md, on_tier, 1), wei = make(wei_md, on_tier, 2),
               chan = make(chan_md, on_tier, 3);
  expectation want(dst_md);
  for_each_index(dst_md.dims(), [&](const std::vector<std::int64_t>& d) {
    double acc = 0, mag = 0;
    for (std::int64_t ic = 0; ic < 16; ++ic) {
      const double x = src.host[static_cast<std::size_t>(src_md.offset_of({0, ic, d[2], d[3]}))];
      const double y = wei.host[static_cast<std::size_t>(wei_md.offset_of({d[1], ic, 0, 0}))];
      acc += x * y;
      mag += std::abs(x * y);
    }
    acc += operand_at(chan, d);
    want.set(dst_md.offset_of(d), acc, mag + std::abs(acc));
  });
  run_and_check(convolution_forward(*pd),
                {{PRIMCACHE_ARG_SRC, src.mem},
                 {PRIMCACHE_ARG_WEIGHTS, wei.mem},
                 {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(0) | PRIMCACHE_ARG_SRC_1, chan.mem}},
                PRIMCACHE_ARG_DST, dst_md, on_tier, want);
}

// ---- convolution ------------------------------------------------------------

TEST_CASE("convolution honours offset0 on src, weights, bias and dst on every tier",
          "[cpu][offset0][conv]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  conv_case c;
  SECTION("bias") {
    c.bias_off = 16;
  }
  SECTION("bias, 1x1 channels-last (what the matmul route would take at offset 0)") {
    c.k = 1;
    c.pad = 0;
    c.oc = 48;
    c.bias_off = 5;
  }
  SECTION("src and dst, blocked") {
    c.src = c.dst = tag::nChw16c;
    c.oc = 24;
    c.src_off = 20;
    c.dst_off = 9;
  }
  SECTION("weights") {
    c.wei_off = 13;
  }
  SECTION("all four, nchw") {
    c.src = c.dst = tag::nchw;
    c.src_off = 1;
    c.wei_off = 2;
    c.bias_off = 3;
    c.dst_off = 4;
  }
  SECTION("depthwise, all four") {
    c.ic = c.oc = c.groups = 40;
    c.src_off = 6;
    c.wei_off = 7;
    c.bias_off = 8;
    c.dst_off = 9;
  }
  SECTION("grouped, bias") {
    c.ic = 16;
    c.oc = 32;
    c.groups = 2;
    c.bias_off = 31;
  }
  check_conv(c, t);
}

TEST_CASE("convolution binary post-op operands at an offset are read from their element 0",
          "[cpu][offset0][conv][post_ops]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  conv_case c;
  SECTION("per channel") {
    c.chan_off = 5;
  }
  SECTION("scalar") {
    c.scalar_off = 9;
  }
  SECTION("dst-shaped, dst at an offset") {
    c.dst_off = 17;
    c.full_operand = true;
  }
  SECTION("depthwise, all three, every tensor at an offset") {
    c.ic = c.oc = c.groups = 24;
    c.src = c.dst = tag::nChw16c;
    c.src_off = 1;
    c.wei_off = 2;
    c.bias_off = 3;
    c.dst_off = 4;
    c.chan_off = 5;
    c.scalar_off = 6;
    c.full_operand = true;
  }
  check_conv(c, t);
}

// ---- eltwise and reorder ------------------------------------------------------

TEST_CASE("eltwise honours offset0 on src, dst and its binary operands on every tier",
          "[cpu][offset0][eltwise]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  INFO("tier " << name(t));
  const tier_scope scope(t);
  eltwise_case c;
  c.layout = GENERATE(tag::nchw, tag::nhwc, tag::nChw16c);
  SECTION("src and dst") {
    c.src_off = 11;
    c.dst_off = 4;
  }
  SECTION("per-channel and scalar operands") {
    c.chan_off = 3;
    c.scalar_off = 6;
  }
  SECTION("everything at an offset") {
    c.src_off = 2;
    c.dst_off = 19;
    c.chan_off = 1;
    c.scalar_off = 30;
    c.full_operand = true;
  }
  check_eltwise(c, on(t));
}

TEST_CASE("reorder honours offset0 on both sides on every tier", "[cpu][offset0][reorder]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  INFO("tier " << name(t));
  const tier_scope scope(t);
  const auto [from, to] =
      GENERATE(std::pair{tag::nchw, tag::nChw16c}, std::pair{tag::nChw16c, tag::nhwc},
               std::pair{tag::nhwc, tag::nchw}, std::pair{tag::nchw, tag::nchw});
  check_reorder({2, 19, 4, 5}, from, to, on(t));
}
