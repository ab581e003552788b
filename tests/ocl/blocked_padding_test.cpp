// A blocked destination's channel padding on the OpenCL backend: with dst in
// nChw16c or nChw8c and a channel count that is not a multiple of the block,
// the channels from dims[1] up to padded_dims[1] must hold exactly +0 after
// a convolution, an eltwise or a reorder, as the CPU backend leaves them and
// as a blocked layout promises whoever reads the tensor next (a reorder, a
// convolution with blocked src, a binary post-op): never what the buffer
// held (dst starts as NaN here) and never post-op(0) (eltwise_linear with
// alpha 1, beta 1 maps 0 to 1). The logical elements are checked against
// double-precision host loops written here, addressed through
// memory_desc::offset_of.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include "host_reference.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primitives/conv_impl.hpp"

using namespace primcache;
using ft = format_tag;

namespace {

// Fails (with the first few offenders) unless every element of dst's
// channel padding is +0.
void require_zero_channel_padding(const std::vector<float>& out, const memory::desc& md) {
  REQUIRE(md.padded_dims()[1] > md.dims()[1]);  // the case has padding to check
  const auto d = md.dims();
  std::size_t bad = 0;
  for (std::int64_t n = 0; n < d[0]; ++n)
    for (std::int64_t c = d[1]; c < md.padded_dims()[1]; ++c)
      for (std::int64_t h = 0; h < d[2]; ++h)
        for (std::int64_t w = 0; w < d[3]; ++w) {
          const float v = out[static_cast<std::size_t>(md.offset_of({n, c, h, w}))];
          if (!(v == 0.f && !std::signbit(v)) && bad++ < 5) {
            UNSCOPED_INFO("padding n " << n << " c " << c << " h " << h << " w " << w << " holds "
                                       << v);
          }
        }
  REQUIRE(bad == 0);
}

struct conv_case {
  std::int64_t mb, g, ic, oc, ih, iw, k, pad;
  ft src, dst;
  bool linear_post_op;  // else relu; either way with bias and a per-channel add
  std::int64_t oh() const { return ih + 2 * pad - k + 1; }
  std::int64_t ow() const { return iw + 2 * pad - k + 1; }
  std::string str() const {
    std::ostringstream o;
    o << "mb" << mb << " g" << g << " ic" << ic << " oc" << oc << " " << ih << "x" << iw << " k"
      << k << " pad " << pad << " src " << to_string(src) << " dst " << to_string(dst)
      << (linear_post_op ? " linear(1, 1)" : " relu");
    return o.str();
  }
};

// dst = post-ops(bias + sum of src * weights), zero outside the input; the
// post-ops are an eltwise (relu, or linear 1 * v + 1) then + addend(oc).
void check_conv(const conv_case& s, const ocl_internal::conv_config* config) {
  INFO(s.str());
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const memory::desc src_md({s.mb, s.ic, s.ih, s.iw}, data_type::f32, s.src);
  const memory::desc dst_md({s.mb, s.oc, s.oh(), s.ow()}, data_type::f32, s.dst);
  const memory::desc w_md =
      s.g > 1 ? memory::desc({s.g, s.oc / s.g, s.ic / s.g, s.k, s.k}, data_type::f32, ft::goihw)
              : memory::desc({s.oc, s.ic, s.k, s.k}, data_type::f32, ft::oihw);
  const memory::desc bias_md({s.oc}, data_type::f32, ft::a);
  const memory::desc add_md({1, s.oc, 1, 1}, data_type::f32, ft::nchw);
  const algorithm alg = s.linear_post_op ? algorithm::eltwise_linear : algorithm::eltwise_relu;
  const float alpha = s.linear_post_op ? 1.f : 0.f, beta = s.linear_post_op ? 1.f : 0.f;
  primitive_attr attr;
  post_ops ops;
  ops.append_eltwise(1.f, alg, alpha, beta);
  ops.append_binary(algorithm::binary_add, add_md);
  attr.set_post_ops(ops);
  const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                    src_md, w_md, bias_md, dst_md, {1, 1}, {s.pad, s.pad},
                                    {s.pad, s.pad});
  primitive_desc pd;
  if (config) {
    auto impl = ocl_internal::make_conv_pd(d.op, attr, backend::impl_of(eng), config);
    REQUIRE(impl.has_value());
    pd = backend::make_primitive_desc(impl.value(), eng);
  } else {
    pd = convolution_forward::primitive_desc(d, attr, eng);
  }
  REQUIRE(pd.impl_info_str() == "ocl:conv");
  REQUIRE(pd.dst_desc() == dst_md);
  primitive prim(pd);

  memory src(src_md, eng), wei(w_md, eng), bias(bias_md, eng), add(add_md, eng), dst(dst_md, eng);
  const auto sv = ocl_test::pattern(src_md.size_bytes() / 4, 41);
  const auto wv = ocl_test::pattern(w_md.size_bytes() / 4, 42);
  const auto bv = ocl_test::pattern(bias_md.size_bytes() / 4, 43);
  const auto av = ocl_test::pattern(add_md.size_bytes() / 4, 44);
  ocl_test::write_all(src, sv);
  ocl_test::write_all(wei, wv);
  ocl_test::write_all(bias, bv);
  ocl_test::write_all(add, av);
  ocl_test::write_all(dst, std::vector<float>(dst_md.size_bytes() / 4, std::nanf("")));
  prim.execute(strm, {{PRIMCACHE_ARG_SRC, src},
                      {PRIMCACHE_ARG_WEIGHTS, wei},
                      {PRIMCACHE_ARG_BIAS, bias},
                      {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1, add},
                      {PRIMCACHE_ARG_DST, dst}});
  strm.wait();
  const auto out = ocl_test::read_all(dst);

  const std::int64_t icg = s.ic / s.g, ocg = s.oc / s.g;
  std::size_t bad = 0;
  for (std::int64_t n = 0; n < s.mb; ++n)
    for (std::int64_t oc = 0; oc < s.oc; ++oc)
      for (std::int64_t oh = 0; oh < s.oh(); ++oh)
        for (std::int64_t ow = 0; ow < s.ow(); ++ow) {
          const std::int64_t g = oc / ocg, o = oc % ocg;
          double acc = 0, mag = 0;
          for (std::int64_t i = 0; i < icg; ++i)
            for (std::int64_t kh = 0; kh < s.k; ++kh)
              for (std::int64_t kw = 0; kw < s.k; ++kw) {
                const std::int64_t ih = oh - s.pad + kh, iw = ow - s.pad + kw;
                if (ih < 0 || ih >= s.ih || iw < 0 || iw >= s.iw) continue;
                const double x =
                    sv[static_cast<std::size_t>(src_md.offset_of({n, g * icg + i, ih, iw}))];
                const double y = wv[static_cast<std::size_t>(
                    s.g > 1 ? w_md.offset_of({g, o, i, kh, kw}) : w_md.offset_of({oc, i, kh, kw}))];
                acc += x * y;
                mag += std::abs(x * y);
              }
          acc += bv[static_cast<std::size_t>(oc)];
          acc = ocl_test::eltwise_reference(alg, acc, alpha, beta);
          acc += av[static_cast<std::size_t>(oc)];
          const float got = out[static_cast<std::size_t>(dst_md.offset_of({n, oc, oh, ow}))];
          // As conv_test.cpp's bound: (K + 12) 2^-23 (sum|x w| + 8).
          const double bound =
              static_cast<double>(icg * s.k * s.k + 12) * std::ldexp(1.0, -23) * (mag + 8.0);
          if (!(std::abs(got - acc) <= bound) && bad++ < 5) {
            UNSCOPED_INFO("n " << n << " oc " << oc << " oh " << oh << " ow " << ow << ": got "
                               << got << " want " << acc);
          }
        }
  REQUIRE(bad == 0);
  require_zero_channel_padding(out, dst_md);
}

}  // namespace

TEST_CASE("an OpenCL convolution writes a blocked dst's channel padding as zero",
          "[ocl][conv][padding][kernel_sweep]") {
  using ocl_internal::conv_config;
  // Output channels 24 of 32 (16c), 5 of 8 (8c), groups of 6 ending at 12 of
  // 16, depthwise 12 of 16; relu, and linear(1, 1), which maps 0 to 1.
  const auto s = GENERATE(conv_case{2, 1, 7, 24, 5, 6, 3, 1, ft::nchw, ft::nChw16c, false},
                          conv_case{1, 1, 3, 5, 4, 7, 3, 1, ft::nChw8c, ft::nChw8c, true},
                          conv_case{1, 2, 6, 12, 5, 5, 3, 1, ft::nhwc, ft::nChw8c, true},
                          conv_case{1, 12, 12, 12, 6, 5, 3, 1, ft::nChw16c, ft::nChw16c, false});
  // The default, and both kernels at their channel edges: a register tile
  // of 16 channels (the last block shifted back over its neighbour, or
  // clamped in a group narrower than it), one channel a work-item, and
  // local tiling with work-groups wider than the channels.
  static const conv_config configs[] = {
      conv_config{4, 1, 16, 8, 16, 4, false}, conv_config{1, 1, 1, 1, 1, 1, false},
      conv_config{2, 2, 4, 3, 4, 2, true}, conv_config{8, 2, 4, 3, 4, 5, true}};
  const int which = GENERATE(-1, 0, 1, 2, 3);
  const conv_config* c = which < 0 ? nullptr : &configs[which];
  if (c) {
    INFO("config wg " << c->wg_oc << "x" << c->wg_ow << " tile " << c->tile_oc << "x" << c->tile_ow
                      << " vec " << c->vec_width << " local " << c->local_tiling);
    check_conv(s, c);
  } else {
    INFO("default config");
    check_conv(s, nullptr);
  }
}

TEST_CASE("an OpenCL eltwise writes a blocked dst's channel padding as zero",
          "[ocl][eltwise][padding]") {
  struct eltwise_case {
    std::vector<std::int64_t> dims;
    ft src, dst;
    algorithm alg;
    float alpha, beta;
    bool linear_post_op;
  };
  const auto e = GENERATE(
      eltwise_case{{2, 21, 5, 3}, ft::nchw, ft::nChw16c, algorithm::eltwise_relu, 0.f, 0.f, false},
      eltwise_case{{1, 5, 3, 4}, ft::nChw8c, ft::nChw8c, algorithm::eltwise_linear, 1.f, 1.f, true},
      eltwise_case{{1, 13, 2, 3}, ft::nhwc, ft::nChw8c, algorithm::eltwise_exp, 0.f, 0.f, true});
  INFO("dims " << e.dims[0] << "x" << e.dims[1] << "x" << e.dims[2] << "x" << e.dims[3] << " src "
               << to_string(e.src) << " dst " << to_string(e.dst) << " alg " << to_string(e.alg));
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const memory::desc src_md(e.dims, data_type::f32, e.src), dst_md(e.dims, data_type::f32, e.dst);
  primitive_attr attr;
  if (e.linear_post_op) {
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_linear, 1.f, 1.f);
    attr.set_post_ops(ops);
  }
  eltwise_forward prim(eltwise_forward::primitive_desc(
      eltwise_forward::desc(prop_kind::forward_inference, e.alg, src_md, dst_md, e.alpha, e.beta),
      attr, eng));
  memory src(src_md, eng), dst(dst_md, eng);
  const auto in = ocl_test::pattern(src_md.size_bytes() / 4, 45);
  ocl_test::write_all(src, in);
  ocl_test::write_all(dst, std::vector<float>(dst_md.size_bytes() / 4, std::nanf("")));
  prim.execute(strm, {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
  strm.wait();
  const auto out = ocl_test::read_all(dst);
  for (const auto& idx : ocl_test::all_indices(e.dims)) {
    double want = ocl_test::eltwise_reference(
        e.alg, in[static_cast<std::size_t>(src_md.offset_of(idx))], e.alpha, e.beta);
    if (e.linear_post_op) want += 1.0;
    const double got = out[static_cast<std::size_t>(dst_md.offset_of(idx))];
    INFO("at " << idx[0] << "," << idx[1] << "," << idx[2] << "," << idx[3]);
    REQUIRE(std::abs(got - want) <= 1e-5 * std::abs(want) + 1e-6);
  }
  require_zero_channel_padding(out, dst_md);
}

TEST_CASE("an OpenCL reorder to a blocked layout writes the channel padding as zero",
          "[ocl][reorder][padding]") {
  const auto r =
      GENERATE(std::tuple{std::vector<std::int64_t>{2, 21, 5, 3}, ft::nchw, ft::nChw16c},
               std::tuple{std::vector<std::int64_t>{1, 5, 3, 4}, ft::nhwc, ft::nChw8c},
               std::tuple{std::vector<std::int64_t>{1, 13, 2, 2}, ft::nChw8c, ft::nChw16c});
  const auto& [dims, from, to] = r;
  INFO("src " << to_string(from) << " dst " << to_string(to) << " channels " << dims[1]);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const memory::desc src_md(dims, data_type::f32, from), dst_md(dims, data_type::f32, to);
  memory src(src_md, eng), dst(dst_md, eng);
  const auto in = ocl_test::pattern(src_md.size_bytes() / 4, 46);
  ocl_test::write_all(src, in);
  ocl_test::write_all(dst, std::vector<float>(dst_md.size_bytes() / 4, std::nanf("")));
  reorder(src, dst).execute(strm, src, dst);
  strm.wait();
  const auto out = ocl_test::read_all(dst);
  for (const auto& idx : ocl_test::all_indices(dims)) {
    REQUIRE(out[static_cast<std::size_t>(dst_md.offset_of(idx))] ==
            in[static_cast<std::size_t>(src_md.offset_of(idx))]);
  }
  require_zero_channel_padding(out, dst_md);
}
