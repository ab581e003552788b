// The same inputs through primcache and through oneDNN 2.6: matmul,
// convolution and reorder results agree. oneDNN is a peer here, never a
// dependency of the libraries; this binary stays out of sanitizer runs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "primcache/runtime/runtime.hpp"

namespace pc = primcache;

namespace {

pc::engine& pc_cpu() {
  static pc::engine e(pc::engine_kind::cpu, 0);
  return e;
}
dnnl::engine& onednn_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Largest |a - b| over the two buffers.
double max_diff(const float* a, const float* b, std::size_t n) {
  double m = 0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::abs(double(a[i]) - b[i]));
  return m;
}

}  // namespace

TEST_CASE("matmul with bias and relu agrees with oneDNN", "[cpu][onednn][matmul]") {
  auto [m, n, k] =
      GENERATE(std::tuple<int, int, int>{1, 64, 64}, std::tuple<int, int, int>{49, 100, 512},
               std::tuple<int, int, int>{128, 96, 300});
  auto a = random_values(std::size_t(m) * k, 1), b = random_values(std::size_t(k) * n, 2);
  auto bias = random_values(n, 3);
  std::vector<float> ours(std::size_t(m) * n), theirs(std::size_t(m) * n);

  {
    using tag = pc::format_tag;
    pc::memory::desc a_md({m, k}, pc::data_type::f32, tag::ab),
        b_md({k, n}, pc::data_type::f32, tag::ab);
    pc::memory::desc bias_md({1, n}, pc::data_type::f32, tag::ab),
        c_md({m, n}, pc::data_type::f32, tag::ab);
    pc::post_ops ops;
    ops.append_eltwise(1.f, pc::algorithm::eltwise_relu, 0.f, 0.f);
    pc::primitive_attr attr;
    attr.set_post_ops(ops);
    pc::matmul prim(
        pc::matmul::primitive_desc(pc::matmul::desc(a_md, b_md, bias_md, c_md), attr, pc_cpu()));
    prim.execute(pc::stream(pc_cpu()),
                 {{PRIMCACHE_ARG_SRC, pc::memory(a_md, pc_cpu(), a.data())},
                  {PRIMCACHE_ARG_WEIGHTS, pc::memory(b_md, pc_cpu(), b.data())},
                  {PRIMCACHE_ARG_BIAS, pc::memory(bias_md, pc_cpu(), bias.data())},
                  {PRIMCACHE_ARG_DST, pc::memory(c_md, pc_cpu(), ours.data())}});
  }
  {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc a_md({m, k}, dt::f32, tag::ab), b_md({k, n}, dt::f32, tag::ab);
    dnnl::memory::desc bias_md({1, n}, dt::f32, tag::ab), c_md({m, n}, dt::f32, tag::ab);
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, bias_md, c_md),
                                                   attr, onednn_engine()));
    dnnl::stream s(onednn_engine());
    prim.execute(s, {{DNNL_ARG_SRC, dnnl::memory(a_md, onednn_engine(), a.data())},
                     {DNNL_ARG_WEIGHTS, dnnl::memory(b_md, onednn_engine(), b.data())},
                     {DNNL_ARG_BIAS, dnnl::memory(bias_md, onednn_engine(), bias.data())},
                     {DNNL_ARG_DST, dnnl::memory(c_md, onednn_engine(), theirs.data())}});
    s.wait();
  }
  // Both accumulate k products of values in [-1, 1] in f32, in different
  // orders: differences grow like k * eps.
  CHECK(max_diff(ours.data(), theirs.data(), ours.size()) < 2e-6 * k);
}

TEST_CASE("convolution agrees with oneDNN", "[cpu][onednn][convolution]") {
  struct shape {
    int ic, oc, hw, k, stride, pad, groups;
  };
  auto s = GENERATE(shape{16, 32, 14, 3, 1, 1, 1}, shape{3, 16, 17, 7, 2, 3, 1},
                    shape{64, 64, 8, 1, 1, 0, 1}, shape{32, 32, 9, 3, 2, 1, 32});
  const int ohw = (s.hw + 2 * s.pad - s.k) / s.stride + 1;
  auto src = random_values(std::size_t(s.ic) * s.hw * s.hw, 4);
  auto wei = random_values(std::size_t(s.oc) * (s.ic / s.groups) * s.k * s.k, 5);
  auto bias = random_values(s.oc, 6);
  std::vector<float> ours(std::size_t(s.oc) * ohw * ohw), theirs(ours.size());
  const bool grouped = s.groups > 1;
  {
    using tag = pc::format_tag;
    pc::memory::desc src_md({1, s.ic, s.hw, s.hw}, pc::data_type::f32, tag::nchw);
    pc::memory::desc wei_md =
        grouped ? pc::memory::desc({s.groups, s.oc / s.groups, s.ic / s.groups, s.k, s.k},
                                   pc::data_type::f32, tag::goihw)
                : pc::memory::desc({s.oc, s.ic, s.k, s.k}, pc::data_type::f32, tag::oihw);
    pc::memory::desc bias_md({s.oc}, pc::data_type::f32, tag::a);
    pc::memory::desc dst_md({1, s.oc, ohw, ohw}, pc::data_type::f32, tag::nchw);
    pc::convolution_forward prim(pc::convolution_forward::primitive_desc(
        pc::convolution_forward::desc(pc::prop_kind::forward_inference,
                                      pc::algorithm::convolution_direct, src_md, wei_md, bias_md,
                                      dst_md, {s.stride, s.stride}, {s.pad, s.pad}, {s.pad, s.pad}),
        pc_cpu()));
    prim.execute(pc::stream(pc_cpu()),
                 {{PRIMCACHE_ARG_SRC, pc::memory(src_md, pc_cpu(), src.data())},
                  {PRIMCACHE_ARG_WEIGHTS, pc::memory(wei_md, pc_cpu(), wei.data())},
                  {PRIMCACHE_ARG_BIAS, pc::memory(bias_md, pc_cpu(), bias.data())},
                  {PRIMCACHE_ARG_DST, pc::memory(dst_md, pc_cpu(), ours.data())}});
  }
  {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc src_md({1, s.ic, s.hw, s.hw}, dt::f32, tag::nchw);
    dnnl::memory::desc wei_md =
        grouped ? dnnl::memory::desc({s.groups, s.oc / s.groups, s.ic / s.groups, s.k, s.k},
                                     dt::f32, tag::goihw)
                : dnnl::memory::desc({s.oc, s.ic, s.k, s.k}, dt::f32, tag::oihw);
    dnnl::memory::desc bias_md({s.oc}, dt::f32, tag::a);
    dnnl::memory::desc dst_md({1, s.oc, ohw, ohw}, dt::f32, tag::nchw);
    dnnl::convolution_forward prim(dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md, wei_md,
            bias_md, dst_md, {s.stride, s.stride}, {s.pad, s.pad}, {s.pad, s.pad}),
        onednn_engine()));
    dnnl::stream st(onednn_engine());
    prim.execute(st, {{DNNL_ARG_SRC, dnnl::memory(src_md, onednn_engine(), src.data())},
                      {DNNL_ARG_WEIGHTS, dnnl::memory(wei_md, onednn_engine(), wei.data())},
                      {DNNL_ARG_BIAS, dnnl::memory(bias_md, onednn_engine(), bias.data())},
                      {DNNL_ARG_DST, dnnl::memory(dst_md, onednn_engine(), theirs.data())}});
    st.wait();
  }
  const int reduction = (s.ic / s.groups) * s.k * s.k;
  CHECK(max_diff(ours.data(), theirs.data(), ours.size()) < 2e-6 * reduction);
}

TEST_CASE("reorders agree with oneDNN bit for bit", "[cpu][onednn][reorder]") {
  const int n = 2, c = 35, h = 7, w = 5;
  auto src = random_values(std::size_t(n) * c * h * w, 7);
  for (auto& v : src) v *= 300.f;  // s8 saturates on part of the range
  struct target {
    pc::data_type pc_dt;
    dnnl::memory::data_type dnnl_dt;
    pc::format_tag pc_tag;
    dnnl::memory::format_tag dnnl_tag;
    float scale;
  };
  auto t = GENERATE(target{pc::data_type::f32, dnnl::memory::data_type::f32, pc::format_tag::nhwc,
                           dnnl::memory::format_tag::nhwc, 1.f},
                    target{pc::data_type::f32, dnnl::memory::data_type::f32,
                           pc::format_tag::nChw16c, dnnl::memory::format_tag::nChw16c, 1.f},
                    target{pc::data_type::bf16, dnnl::memory::data_type::bf16, pc::format_tag::nchw,
                           dnnl::memory::format_tag::nchw, 1.f},
                    target{pc::data_type::s8, dnnl::memory::data_type::s8, pc::format_tag::nhwc,
                           dnnl::memory::format_tag::nhwc, 0.37f},
                    target{pc::data_type::u8, dnnl::memory::data_type::u8, pc::format_tag::nchw,
                           dnnl::memory::format_tag::nchw, 0.5f});
  pc::memory::desc pc_dst_md({n, c, h, w}, t.pc_dt, t.pc_tag);
  std::vector<std::byte> ours(pc_dst_md.size_bytes()), theirs(ours.size());
  {
    pc::memory::desc src_md({n, c, h, w}, pc::data_type::f32, pc::format_tag::nchw);
    pc::primitive_attr attr;
    if (t.scale != 1.f) attr.set_output_scales(0, {t.scale});
    pc::memory s(src_md, pc_cpu(), src.data()), d(pc_dst_md, pc_cpu(), ours.data());
    pc::reorder(s, d, attr).execute(pc::stream(pc_cpu()), s, d);
  }
  {
    dnnl::memory::desc src_md({n, c, h, w}, dnnl::memory::data_type::f32,
                              dnnl::memory::format_tag::nchw);
    dnnl::memory::desc dst_md({n, c, h, w}, t.dnnl_dt, t.dnnl_tag);
    REQUIRE(dst_md.get_size() == ours.size());
    dnnl::primitive_attr attr;
    if (t.scale != 1.f) attr.set_output_scales(0, {t.scale});
    dnnl::memory s(src_md, onednn_engine(), src.data()), d(dst_md, onednn_engine(), theirs.data());
    std::memset(theirs.data(), 0, theirs.size());
    dnnl::stream st(onednn_engine());
    dnnl::reorder(dnnl::reorder::primitive_desc(s, d, attr)).execute(st, s, d);
    st.wait();
  }
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) mismatches += ours[i] != theirs[i];
  CHECK(mismatches == 0);
}

TEST_CASE("a convolution with negative end padding agrees with oneDNN",
          "[cpu][onednn][convolution]") {
  // ResNet-50's stride-2 1x1 projections: 56x56 in, 28x28 out; the stride
  // leaves the last row and column unread, which padding_r = -1 says.
  const int ic = 32, oc = 48, hw = 56, ohw = 28;
  auto src = random_values(std::size_t(ic) * hw * hw, 11);
  auto wei = random_values(std::size_t(oc) * ic, 12);
  std::vector<float> ours(std::size_t(oc) * ohw * ohw), theirs(ours.size());
  {
    using tag = pc::format_tag;
    pc::memory::desc src_md({1, ic, hw, hw}, pc::data_type::f32, tag::nchw);
    pc::memory::desc wei_md({oc, ic, 1, 1}, pc::data_type::f32, tag::oihw);
    pc::memory::desc dst_md({1, oc, ohw, ohw}, pc::data_type::f32, tag::nchw);
    pc::convolution_forward prim(pc::convolution_forward::primitive_desc(
        pc::convolution_forward::desc(pc::prop_kind::forward_inference,
                                      pc::algorithm::convolution_direct, src_md, wei_md,
                                      pc::memory::desc(), dst_md, {2, 2}, {0, 0}, {-1, -1}),
        pc_cpu()));
    prim.execute(pc::stream(pc_cpu()),
                 {{PRIMCACHE_ARG_SRC, pc::memory(src_md, pc_cpu(), src.data())},
                  {PRIMCACHE_ARG_WEIGHTS, pc::memory(wei_md, pc_cpu(), wei.data())},
                  {PRIMCACHE_ARG_DST, pc::memory(dst_md, pc_cpu(), ours.data())}});
  }
  {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc src_md({1, ic, hw, hw}, dt::f32, tag::nchw);
    dnnl::memory::desc wei_md({oc, ic, 1, 1}, dt::f32, tag::oihw);
    dnnl::memory::desc dst_md({1, oc, ohw, ohw}, dt::f32, tag::nchw);
    dnnl::convolution_forward prim(dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, src_md, wei_md, dst_md,
                                        {2, 2}, {0, 0}, {-1, -1}),
        onednn_engine()));
    dnnl::stream st(onednn_engine());
    prim.execute(st, {{DNNL_ARG_SRC, dnnl::memory(src_md, onednn_engine(), src.data())},
                      {DNNL_ARG_WEIGHTS, dnnl::memory(wei_md, onednn_engine(), wei.data())},
                      {DNNL_ARG_DST, dnnl::memory(dst_md, onednn_engine(), theirs.data())}});
    st.wait();
  }
  CHECK(max_diff(ours.data(), theirs.data(), ours.size()) < 2e-6 * ic);
}

TEST_CASE("a matmul whose source batch broadcasts agrees with oneDNN", "[cpu][onednn][matmul]") {
  const int batch = 4, m = 9, k = 33, n = 20;
  auto a = random_values(std::size_t(m) * k, 13);
  auto b = random_values(std::size_t(batch) * k * n, 14);
  std::vector<float> ours(std::size_t(batch) * m * n), theirs(ours.size());
  {
    using tag = pc::format_tag;
    pc::memory::desc a_md({1, m, k}, pc::data_type::f32, tag::abc);
    pc::memory::desc b_md({batch, k, n}, pc::data_type::f32, tag::abc);
    pc::memory::desc c_md({batch, m, n}, pc::data_type::f32, tag::abc);
    pc::matmul prim(pc::matmul::primitive_desc(pc::matmul::desc(a_md, b_md, c_md), pc_cpu()));
    prim.execute(pc::stream(pc_cpu()),
                 {{PRIMCACHE_ARG_SRC, pc::memory(a_md, pc_cpu(), a.data())},
                  {PRIMCACHE_ARG_WEIGHTS, pc::memory(b_md, pc_cpu(), b.data())},
                  {PRIMCACHE_ARG_DST, pc::memory(c_md, pc_cpu(), ours.data())}});
  }
  {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc a_md({1, m, k}, dt::f32, tag::abc), b_md({batch, k, n}, dt::f32, tag::abc);
    dnnl::memory::desc c_md({batch, m, n}, dt::f32, tag::abc);
    dnnl::matmul prim(
        dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), onednn_engine()));
    dnnl::stream s(onednn_engine());
    prim.execute(s, {{DNNL_ARG_SRC, dnnl::memory(a_md, onednn_engine(), a.data())},
                     {DNNL_ARG_WEIGHTS, dnnl::memory(b_md, onednn_engine(), b.data())},
                     {DNNL_ARG_DST, dnnl::memory(c_md, onednn_engine(), theirs.data())}});
    s.wait();
  }
  CHECK(max_diff(ours.data(), theirs.data(), ours.size()) < 2e-6 * k);
}
