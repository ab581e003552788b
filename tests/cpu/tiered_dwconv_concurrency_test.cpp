// Tiered creation of the depthwise convolution through the public API
// (issue 11): a depthwise convolution that misses every cache is served by
// the generic kernel's depthwise tiles first, the specialized kernel is
// swapped in by the background pool, and nothing a caller can see changes
// but the speed — outputs bit-identical across the swap and against a
// synchronous creation over random depthwise shapes, layouts and post-ops,
// executions racing with the swap, constant weights packed once for both
// kernels. (tiered_conv_concurrency_test.cpp covers the other convolutions.)
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/runtime.hpp"
#include "tiered_test_support.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

using tiered_support::cpu;
using tiered_support::mode_scope;
using tiered_support::same_bits;
using tiered_support::tiered_here;

memory make(const memory::desc& md, unsigned seed) {
  memory m(md, cpu());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> v(-1.f, 1.f);
  auto* p = static_cast<float*>(m.get_data_handle());
  for (std::size_t i = 0; i < md.size_bytes() / 4; ++i) p[i] = v(rng);
  return m;
}

struct dw_shape {
  int n = 1, channels = 32, in_h = 13, in_w = 17, k = 3, stride = 1, pad = 1, dilation = 0;
  tag src = tag::nChw16c, dst = tag::nChw16c;
  bool constant_weights = false;
  bool post_ops = true;
  int extent() const { return (k - 1) * (dilation + 1) + 1; }
  int out_h() const { return (in_h + 2 * pad - extent()) / stride + 1; }
  int out_w() const { return (in_w + 2 * pad - extent()) / stride + 1; }
  std::string describe() const {
    return "n" + std::to_string(n) + " c" + std::to_string(channels) + " " + std::to_string(in_h) +
           "x" + std::to_string(in_w) + " k" + std::to_string(k) + " s" + std::to_string(stride) +
           " p" + std::to_string(pad) + " d" + std::to_string(dilation) + " src " +
           std::to_string(static_cast<int>(src)) + " dst " + std::to_string(static_cast<int>(dst)) +
           " post-ops " + std::to_string(post_ops);
  }
};

// A depthwise convolution (goihw weights (C, 1, 1, k, k) from the user,
// resolved by the primitive descriptor), with bias and, when asked, a chain
// of post-ops (clip as relu6, a dst-shaped sum, a leaky relu).
struct dw_case {
  dw_shape s;
  memory::desc src_md, wei_md, bias_md, dst_md;
  convolution_forward::primitive_desc pd;
  memory src, wei, bias, addend;

  dw_case(const dw_shape& shape, unsigned seed) : s(shape) {
    src_md = memory::desc({s.n, s.channels, s.in_h, s.in_w}, data_type::f32, s.src);
    dst_md = memory::desc({s.n, s.channels, s.out_h(), s.out_w()}, data_type::f32, s.dst);
    bias_md = memory::desc({s.channels}, data_type::f32, tag::a);
    const memory::desc wei_user({s.channels, 1, 1, s.k, s.k}, data_type::f32,
                                s.constant_weights ? tag::goihw : tag::any);
    post_ops ops;
    if (s.post_ops) {
      ops.append_eltwise(1.f, algorithm::eltwise_clip, 0.f, 6.f);
      ops.append_binary(algorithm::binary_add, dst_md);
      ops.append_eltwise(0.5f, algorithm::eltwise_relu, 0.125f, 0.f);
    }
    primitive_attr attr;
    attr.set_post_ops(ops);
    if (s.constant_weights) attr.set_constant_weights(true);
    pd = convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                  src_md, wei_user, bias_md, dst_md, {s.stride, s.stride},
                                  {s.dilation, s.dilation}, {s.pad, s.pad}, {s.pad, s.pad}),
        attr, cpu());
    wei_md = pd.weights_desc();
    src = make(src_md, seed);
    wei = make(wei_md, seed + 1);
    bias = make(bias_md, seed + 2);
    addend = make(dst_md, seed + 3);
  }

  std::vector<float> run(const primitive& prim) const {
    memory dst(dst_md, cpu());
    std::memset(dst.get_data_handle(), 0, dst_md.size_bytes());
    primitive::args args = {{PRIMCACHE_ARG_SRC, src},
                            {PRIMCACHE_ARG_WEIGHTS, wei},
                            {PRIMCACHE_ARG_BIAS, bias},
                            {PRIMCACHE_ARG_DST, dst}};
    if (s.post_ops) args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1] = addend;
    prim.execute(stream(cpu()), args);
    const auto* p = static_cast<const float*>(dst.get_data_handle());
    return std::vector<float>(p, p + dst_md.size_bytes() / 4);
  }
};

dw_shape random_shape(std::mt19937& rng) {
  const tag acts[] = {tag::nchw, tag::nhwc, tag::nChw16c};
  dw_shape s;
  s.n = 1 + static_cast<int>(rng() % 2);
  s.channels = 2 + static_cast<int>(rng() % 80);
  s.k = 1 + static_cast<int>(rng() % 5);
  s.stride = 1 + static_cast<int>(rng() % 2);
  s.pad = static_cast<int>(rng() % 3);
  s.dilation = rng() % 4 == 0 ? 1 : 0;
  s.in_h = s.extent() + static_cast<int>(rng() % 15);
  s.in_w = s.extent() + static_cast<int>(rng() % 21);
  s.src = acts[rng() % 3];
  s.dst = acts[rng() % 3];
  s.post_ops = rng() % 2 == 0;
  return s;
}

}  // namespace

TEST_CASE("a tiered depthwise convolution is served by the generic kernel first",
          "[cpu][tiered][conv][depthwise]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  // A MobileNet layer: its specialized compilation takes milliseconds, the
  // tiered creation returns before it (the verbose test in CMakeLists.txt
  // checks the cache_miss:tiered line too).
  dw_shape s;
  s.channels = 128;
  s.in_h = s.in_w = 56;
  const dw_case c(s, 5);
  convolution_forward prim(c.pd);
  CHECK_FALSE(prim.specialized());
  CHECK(prim.creation_outcome() == lookup_outcome::miss);
  const std::vector<float> before = c.run(prim);
  prim.wait_until_specialized();
  CHECK(prim.specialized());
  CHECK(same_bits(before, c.run(prim)));
}

TEST_CASE("a tiered depthwise convolution gives bit-identical outputs before and after the swap",
          "[cpu][tiered][conv][depthwise]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  std::mt19937 rng(23);
  for (int trial = 0; trial < 12; ++trial) {
    const dw_shape s = random_shape(rng);
    INFO("trial " << trial << ": " << s.describe());
    const dw_case c(s, 700 + trial);
    // A cache of capacity 0 keeps nothing: each creation is a fresh miss.
    set_primitive_cache_capacity(0);
    convolution_forward tiered(c.pd);
    const std::vector<float> before = c.run(tiered);
    tiered.wait_until_specialized();
    CHECK(tiered.specialized());
    CHECK(same_bits(before, c.run(tiered)));
    // The same key created synchronously compiles the same specialized code.
    set_jit_mode(jit_mode::sync);
    convolution_forward sync(c.pd);
    CHECK(sync.specialized());
    CHECK(same_bits(before, c.run(sync)));
    set_jit_mode(jit_mode::tiered);
  }
}

TEST_CASE("depthwise executions racing with the swap all give the same bits",
          "[cpu][tiered][conv][depthwise]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  dw_shape s;
  s.channels = 72;  // a partial last block
  s.in_h = s.in_w = 20;
  s.stride = 2;
  s.dst = tag::nhwc;
  const dw_case c(s, 31);
  set_jit_mode(jit_mode::sync);
  const std::vector<float> expected = c.run(convolution_forward(c.pd));
  set_jit_mode(jit_mode::tiered);
  for (int round = 0; round < 2; ++round) {
    convolution_forward prim(c.pd);
    std::atomic<int> mismatches{0}, runs{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&] {
        // Run until well after the swap.
        for (int i = 0; i < 400; ++i) {
          const bool generic = !prim.specialized();
          if (!same_bits(c.run(prim), expected)) ++mismatches;
          ++runs;
          if (!generic && i > 10) break;
        }
      });
    }
    for (auto& t : threads) t.join();
    CHECK(mismatches == 0);
    CHECK(runs > 0);
    prim.wait_until_specialized();
    CHECK(prim.specialized());
  }
}

TEST_CASE("constant depthwise weights packed for the generic kernel serve the specialized one",
          "[cpu][tiered][conv][depthwise]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  dw_shape s;
  s.channels = 40;
  s.constant_weights = true;  // goihw weights: packed to Goihw16g
  s.src = tag::nhwc;
  const dw_case c(s, 41);
  convolution_forward prim(c.pd);
  const std::vector<float> before = c.run(prim);
  prim.wait_until_specialized();
  CHECK(same_bits(before, c.run(prim)));
  set_jit_mode(jit_mode::sync);
  CHECK(same_bits(before, c.run(convolution_forward(c.pd))));
}
