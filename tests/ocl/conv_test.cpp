// The OpenCL convolution against a double-precision host loop written here
// (it shares no code with libs/ocl/src/kernels: every tensor is read through
// memory_desc::offset_of). The quick cases cover each feature once; the
// sweep ([.][sweep], run once in the release build: see CMakeLists.txt)
// crosses shapes, layouts, weights layouts, bias and post-ops.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include "host_reference.hpp"
#include "ocl_engine.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primitives/conv_impl.hpp"

using namespace primcache;

namespace {

struct conv_shape {
  std::int64_t mb, g, ic, oc, ih, iw, kh, kw;
  std::int64_t sh = 1, sw = 1, dh = 0, dw = 0;
  std::int64_t pt = 0, pl = 0, pb = 0, pr = 0;
  std::int64_t oh() const { return (ih + pt + pb - ((kh - 1) * (dh + 1) + 1)) / sh + 1; }
  std::int64_t ow() const { return (iw + pl + pr - ((kw - 1) * (dw + 1) + 1)) / sw + 1; }
  std::string str() const {
    std::ostringstream o;
    o << "mb" << mb << " g" << g << " ic" << ic << " oc" << oc << " " << ih << "x" << iw << " k"
      << kh << "x" << kw << " s" << sh << "x" << sw << " d" << dh << "x" << dw << " pad " << pt
      << "," << pl << "," << pb << "," << pr;
    return o.str();
  }
};

// conv_shape with the padding given as (top/left, bottom/right).
conv_shape make(std::int64_t mb, std::int64_t g, std::int64_t ic, std::int64_t oc, std::int64_t h,
                std::int64_t w, std::int64_t k, std::int64_t s, std::int64_t pad_begin,
                std::int64_t pad_end, std::int64_t dil = 0) {
  return {mb, g, ic, oc, h, w, k, k, s, s, dil, dil, pad_begin, pad_begin, pad_end, pad_end};
}

struct options {
  format_tag src_tag = format_tag::nchw;
  format_tag dst_tag = format_tag::nchw;
  bool weights_any = false;  // else oihw / goihw
  bool bias = false;
  bool post_ops = false;
  const ocl_internal::conv_config* config = nullptr;
};

struct reference_result {
  std::vector<double> value, magnitude;  // per logical dst element, row-major
};

// dst(n, oc, oh, ow) = bias(oc) + sum over the group's input channels and
// the kernel window of src * weights, zero outside the input; then
// relu(alpha 0.5), + addend(oc), linear(0.5 v + 0.25) * 2.
reference_result conv_reference(const conv_shape& s, const memory::desc& src_md,
                                const std::vector<float>& src, const memory::desc& w_md,
                                const std::vector<float>& w, const std::vector<float>* bias,
                                const memory::desc* add_md, const std::vector<float>* add) {
  const std::int64_t icg = s.ic / s.g, ocg = s.oc / s.g;
  const bool grouped = w_md.ndims() == 5;
  reference_result r;
  for (std::int64_t n = 0; n < s.mb; ++n) {
    for (std::int64_t oc = 0; oc < s.oc; ++oc) {
      const std::int64_t g = oc / ocg, o = oc % ocg;
      for (std::int64_t oh = 0; oh < s.oh(); ++oh) {
        for (std::int64_t ow = 0; ow < s.ow(); ++ow) {
          double acc = 0, mag = 0;
          for (std::int64_t i = 0; i < icg; ++i) {
            for (std::int64_t kh = 0; kh < s.kh; ++kh) {
              const std::int64_t ih = oh * s.sh - s.pt + kh * (s.dh + 1);
              if (ih < 0 || ih >= s.ih) continue;
              for (std::int64_t kw = 0; kw < s.kw; ++kw) {
                const std::int64_t iw = ow * s.sw - s.pl + kw * (s.dw + 1);
                if (iw < 0 || iw >= s.iw) continue;
                const double x =
                    src[static_cast<std::size_t>(src_md.offset_of({n, g * icg + i, ih, iw}))];
                const double y = w[static_cast<std::size_t>(
                    grouped ? w_md.offset_of({g, o, i, kh, kw}) : w_md.offset_of({oc, i, kh, kw}))];
                acc += x * y;
                mag += std::abs(x * y);
              }
            }
          }
          if (bias) acc += (*bias)[static_cast<std::size_t>(oc)];
          if (add) {
            acc = acc > 0 ? acc : 0.5 * acc;
            acc += (*add)[static_cast<std::size_t>(add_md->offset_of({0, oc, 0, 0}))];
            acc = (0.5 * acc + 0.25) * 2.0;
          }
          r.value.push_back(acc);
          r.magnitude.push_back(mag);
        }
      }
    }
  }
  return r;
}

memory::desc weights_md(const conv_shape& s, bool any) {
  const auto tag = any ? format_tag::any : (s.g > 1 ? format_tag::goihw : format_tag::oihw);
  if (s.g > 1) return memory::desc({s.g, s.oc / s.g, s.ic / s.g, s.kh, s.kw}, data_type::f32, tag);
  return memory::desc({s.oc, s.ic, s.kh, s.kw}, data_type::f32, tag);
}

backend::convolution_op op_of(const conv_shape& s, const memory::desc& src_md,
                              const memory::desc& w_md, const memory::desc& bias_md,
                              const memory::desc& dst_md) {
  return std::get<backend::convolution_op>(
      convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, src_md,
                                w_md, bias_md, dst_md, {s.sh, s.sw}, {s.dh, s.dw}, {s.pt, s.pl},
                                {s.pb, s.pr})
          .op);
}

// Returns the src and dst layouts the descriptor resolved.
std::pair<memory::desc, memory::desc> run_and_check(const conv_shape& s, const options& opt) {
  INFO(s.str() << " src " << to_string(opt.src_tag) << " dst " << to_string(opt.dst_tag)
               << " weights " << (opt.weights_any ? "any" : "oihw") << " bias " << opt.bias
               << " post-ops " << opt.post_ops);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  // `any` activations: the memories take the layouts the descriptor resolved.
  const memory::desc src_req({s.mb, s.ic, s.ih, s.iw}, data_type::f32, opt.src_tag);
  const memory::desc dst_req({s.mb, s.oc, s.oh(), s.ow()}, data_type::f32, opt.dst_tag);
  const memory::desc bias_md =
      opt.bias ? memory::desc({s.oc}, data_type::f32, format_tag::a) : memory::desc();
  const memory::desc add_md({1, s.oc, 1, 1}, data_type::f32, format_tag::nchw);
  primitive_attr attr;
  if (opt.post_ops) {
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.5f, 0.f);
    ops.append_binary(algorithm::binary_add, add_md);
    ops.append_eltwise(2.f, algorithm::eltwise_linear, 0.5f, 0.25f);
    attr.set_post_ops(ops);
  }
  const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                    src_req, weights_md(s, opt.weights_any), bias_md, dst_req,
                                    {s.sh, s.sw}, {s.dh, s.dw}, {s.pt, s.pl}, {s.pb, s.pr});
  primitive_desc pd;
  if (opt.config) {
    auto impl = ocl_internal::make_conv_pd(d.op, attr, backend::impl_of(eng), opt.config);
    REQUIRE(impl.has_value());
    pd = backend::make_primitive_desc(impl.value(), eng);
  } else {
    pd = convolution_forward::primitive_desc(d, attr, eng);
  }
  REQUIRE(pd.impl_info_str() == "ocl:conv");
  const memory::desc w_md = pd.weights_desc();
  REQUIRE(!w_md.is_any());
  const memory::desc src_md = pd.src_desc(), dst_md = pd.dst_desc();
  REQUIRE(!src_md.is_any());
  REQUIRE(!dst_md.is_any());
  if (!src_req.is_any()) REQUIRE(src_md == src_req);
  if (!dst_req.is_any()) REQUIRE(dst_md == dst_req);
  primitive prim(pd);

  memory src(src_md, eng), wei(w_md, eng), dst(dst_md, eng), bias, add(add_md, eng);
  const auto sv = ocl_test::pattern(src_md.size_bytes() / 4, 31);
  const auto wv = ocl_test::pattern(w_md.size_bytes() / 4, 32);
  const auto addv = ocl_test::pattern(add_md.size_bytes() / 4, 34);
  std::vector<float> bv;
  ocl_test::write_all(src, sv);
  ocl_test::write_all(wei, wv);
  ocl_test::write_all(add, addv);
  // dst starts as NaN: every logical element must be written.
  ocl_test::write_all(dst, std::vector<float>(dst_md.size_bytes() / 4, std::nanf("")));
  std::unordered_map<int, memory> args = {
      {PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}};
  if (opt.bias) {
    bias = memory(bias_md, eng);
    bv = ocl_test::pattern(bias_md.size_bytes() / 4, 33);
    ocl_test::write_all(bias, bv);
    args[PRIMCACHE_ARG_BIAS] = bias;
  }
  if (opt.post_ops) args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1] = add;
  prim.execute(strm, args);
  strm.wait();

  const auto out = ocl_test::read_all(dst);
  const auto want = conv_reference(s, src_md, sv, w_md, wv, opt.bias ? &bv : nullptr, &add_md,
                                   opt.post_ops ? &addv : nullptr);
  const std::int64_t k = (s.ic / s.g) * s.kh * s.kw;
  std::size_t i = 0, bad = 0;
  for (std::int64_t n = 0; n < s.mb; ++n) {
    for (std::int64_t oc = 0; oc < s.oc; ++oc) {
      for (std::int64_t oh = 0; oh < s.oh(); ++oh) {
        for (std::int64_t ow = 0; ow < s.ow(); ++ow, ++i) {
          const float got = out[static_cast<std::size_t>(dst_md.offset_of({n, oc, oh, ow}))];
          // f32 accumulation of K products in any order rounds each partial
          // sum once (2^-24 relative): at most (K + 3) 2^-24 sum|x w|; the
          // bias, the post-ops (relu, an add, a linear with slope 1) and the
          // final rounding add a few ulps of values bounded by sum|.| + 8.
          const double bound = (k + 12) * std::ldexp(1.0, -23) * (want.magnitude[i] + 8.0);
          if (!(std::abs(got - want.value[i]) <= bound) && bad++ < 5) {
            UNSCOPED_INFO("n " << n << " oc " << oc << " oh " << oh << " ow " << ow << ": got "
                               << got << " want " << want.value[i]);
          }
        }
      }
    }
  }
  REQUIRE(bad == 0);
  return {src_md, dst_md};
}

}  // namespace

TEST_CASE("convolution on OpenCL equals the host reference, each feature once", "[ocl][conv]") {
  using ft = format_tag;
  struct quick {
    conv_shape s;
    options o;
  };
  const auto q = GENERATE(
      // 3x3, padding, odd channels, bias and post-ops, plain layouts
      quick{make(1, 1, 3, 5, 7, 7, 3, 1, 1, 1), {ft::nchw, ft::nchw, false, true, true}},
      // stride 2, primes, minibatch 2, channels last, weights `any`
      quick{make(2, 1, 13, 17, 11, 11, 3, 2, 1, 1), {ft::nhwc, ft::nhwc, true, true, false}},
      // 1x1 over a whole-tile channel count, layouts differing
      quick{make(1, 1, 16, 32, 8, 8, 1, 1, 0, 0), {ft::nhwc, ft::nchw, true, false, true}},
      // 1x1 stride 2 with negative end padding (as ResNet-50 describes it)
      quick{make(1, 1, 8, 24, 8, 8, 1, 2, 0, -1), {ft::nchw, ft::nhwc, false, true, false}},
      // groups
      quick{make(1, 3, 6, 9, 5, 6, 3, 1, 1, 1), {ft::nchw, ft::nchw, false, true, true}},
      // depthwise, stride 2
      quick{make(2, 8, 8, 8, 9, 9, 3, 2, 1, 1), {ft::nhwc, ft::nhwc, true, true, true}},
      // dilation
      quick{make(1, 1, 4, 7, 9, 10, 3, 1, 2, 2, 1), {ft::nchw, ft::nchw, false, false, false}},
      // asymmetric padding, non-square kernel and strides
      quick{conv_shape{1, 1, 5, 11, 10, 7, 2, 3, 1, 2, 0, 0, 0, 2, 1, 0},
            {ft::nhwc, ft::nchw, false, true, false}},
      // blocked activations with channel padding
      quick{make(1, 1, 13, 19, 6, 6, 3, 1, 1, 1), {ft::nChw8c, ft::nChw16c, true, true, true}},
      quick{make(1, 2, 32, 48, 5, 5, 3, 1, 1, 1), {ft::nChw16c, ft::nChw8c, false, false, true}},
      // the smallest
      quick{make(1, 1, 1, 1, 1, 1, 1, 1, 0, 0), {ft::nchw, ft::nchw, false, true, true}},
      // a 7x7 stride-2 input layer (3 channels), as ResNet-50's first
      quick{make(1, 1, 3, 16, 23, 23, 7, 2, 3, 3), {ft::nchw, ft::nhwc, true, true, false}});
  run_and_check(q.s, q.o);
}

TEST_CASE("convolution on OpenCL over shapes x layouts x bias x post-ops",
          "[.][ocl][conv][sweep]") {
  using ft = format_tag;
  const auto s =
      GENERATE(make(1, 1, 1, 1, 1, 1, 1, 1, 0, 0), make(1, 1, 7, 3, 5, 5, 3, 1, 1, 1),
               make(2, 1, 17, 31, 13, 11, 3, 1, 1, 1), make(1, 1, 64, 67, 9, 9, 3, 2, 1, 1),
               make(1, 1, 29, 64, 7, 7, 1, 1, 0, 0), make(1, 1, 37, 41, 15, 15, 1, 2, 0, -1),
               make(1, 4, 20, 36, 7, 9, 3, 1, 1, 1), make(2, 16, 16, 16, 8, 8, 3, 1, 1, 1),
               make(1, 5, 5, 5, 12, 12, 3, 2, 1, 0), make(1, 1, 3, 8, 19, 19, 5, 2, 2, 2),
               make(1, 1, 6, 10, 11, 11, 3, 1, 2, 2, 1));
  // Each shape meets six layout pairs; weights `any` and bias with post-ops
  // alternate across them.
  const options o = GENERATE(options{ft::nchw, ft::nchw, false, false, false},
                             options{ft::nhwc, ft::nhwc, true, true, true},
                             options{ft::nchw, ft::nhwc, true, false, false},
                             options{ft::nhwc, ft::nchw, false, true, true},
                             options{ft::nChw8c, ft::nChw16c, false, true, true},
                             options{ft::nChw16c, ft::nhwc, true, false, false});
  run_and_check(s, o);
}

TEST_CASE("every convolution configuration computes the same result",
          "[ocl][conv][config][kernel_sweep]") {
  using ocl_internal::conv_config;
  using ft = format_tag;
  const auto c =
      GENERATE(conv_config{1, 1, 1, 1, 1, 1, false}, conv_config{16, 1, 8, 8, 8, 4, false},
               conv_config{4, 4, 3, 5, 1, 2, false}, conv_config{2, 8, 16, 2, 16, 3, false},
               conv_config{8, 2, 4, 3, 4, 5, true}, conv_config{1, 1, 1, 1, 1, 1, true},
               conv_config{4, 4, 8, 4, 8, 8, true}, conv_config{4, 1, 16, 7, 16, 4, false},
               conv_config{2, 1, 8, 16, 4, 4, false});
  const auto s =
      GENERATE(make(1, 1, 11, 23, 9, 10, 3, 1, 1, 1), make(2, 3, 9, 12, 7, 7, 3, 2, 1, 0),
               make(1, 1, 6, 37, 6, 13, 1, 1, 0, 0));
  INFO("config wg " << c.wg_oc << "x" << c.wg_ow << " tile " << c.tile_oc << "x" << c.tile_ow
                    << " vec " << c.vec_width << " ic " << c.tile_ic << " local "
                    << c.local_tiling);
  // Each configuration meets both activation layouts across the shapes
  // (one program per pair keeps the case short under sanitizers).
  const bool channels_last = ((c.tile_oc + c.tile_ow + s.ic) % 2) == 0;
  const auto tag = channels_last ? ft::nhwc : ft::nchw;
  run_and_check(s, {tag, tag, channels_last, true, true, &c});
}

// The register-tiled kernel (no local tiling) at each of its edges, against
// the host reference (dst starts as NaN, so an element no work-item stores
// fails): a last column block shifted back over its neighbour (13 columns
// in tiles of 8 or 7) and a tile wider than the row (clamped columns past
// the output, read through the guarded path); a last channel block shifted
// back (40 channels in tiles of 16) and a group narrower than the tile
// (clamped channels); padding on either side and a window past the right
// edge (guarded taps beside unguarded ones); input channels that leave a
// remainder after the unrolled loop (19, 3) or fewer than one unroll;
// strides, dilation, groups; blocked src (channel offsets not linear) and
// weights whose output channels are not contiguous (per-lane loads, oihw)
// beside `any` (vector loads).
TEST_CASE("the register-tiled convolution is exact at every edge",
          "[ocl][conv][config][edges][kernel_sweep]") {
  using ocl_internal::conv_config;
  using ft = format_tag;
  // The last two unroll the channel loop explicitly (ic_unroll): 3 leaves
  // remainders, 16 exceeds most of the shapes' input channels.
  const auto c =
      GENERATE(conv_config{4, 1, 16, 8, 16, 4, false}, conv_config{2, 2, 16, 7, 8, 1, false},
               conv_config{1, 3, 4, 5, 2, 1, false}, conv_config{4, 1, 16, 8, 16, 4, false, 3},
               conv_config{1, 3, 4, 5, 2, 1, false, 16});
  struct edge_case {
    conv_shape s;
    ft src, dst;
    bool weights_any;
  };
  const auto e = GENERATE(
      // 13 columns, 40 channels, 19 input channels, pad 1 on both sides
      edge_case{make(1, 1, 19, 40, 6, 13, 3, 1, 1, 1), ft::nchw, ft::nhwc, true},
      // a row narrower than every tile, pad 2, 5x5, per-lane weights
      edge_case{make(2, 1, 3, 5, 4, 4, 5, 1, 2, 2), ft::nhwc, ft::nchw, false},
      // stride 2, window past the right edge only (no left padding)
      edge_case{make(1, 1, 9, 33, 9, 17, 3, 2, 0, 2), ft::nChw16c, ft::nchw, true},
      // dilation with padding, groups of 24 output channels
      edge_case{make(1, 2, 16, 48, 11, 15, 3, 1, 2, 2, 1), ft::nChw8c, ft::nhwc, true},
      // 1x1, 70 input channels (remainder 6), negative end padding
      edge_case{make(1, 1, 70, 17, 9, 9, 1, 2, 0, -1), ft::nhwc, ft::nhwc, false});
  INFO("config wg " << c.wg_oc << "x" << c.wg_ow << " tile " << c.tile_oc << "x" << c.tile_ow
                    << " vec " << c.vec_width << " ic_unroll " << c.ic_unroll);
  const bool extras = (c.tile_ow + e.s.ic) % 2 == 1;  // bias and post-ops on half
  run_and_check(e.s, {e.src, e.dst, e.weights_any, extras, extras, &c});
}

// Activations `any` take the layout the device's default kernel runs
// faster for the shape (docs/ocl.md; bench_ocl_conv in docs/PERFORMANCE.md,
// "Which layout `any` activations take"): on CPU devices (PoCL) nhwc when
// a group has 8 or more output channels, nchw for depthwise and narrow
// groups; nchw on GPUs.
TEST_CASE("the convolution's preferred activation layout follows the device and the groups",
          "[ocl][conv][any]") {
  using ocl_internal::conv_preferred_activation;
  ocl_internal::device_entry cpu, gpu;
  cpu.type = CL_DEVICE_TYPE_CPU;
  gpu.type = CL_DEVICE_TYPE_GPU;
  CHECK(conv_preferred_activation(cpu, 64, 256) == format_tag::nhwc);
  CHECK(conv_preferred_activation(cpu, 3, 64) == format_tag::nhwc);  // ResNet-50's first layer
  CHECK(conv_preferred_activation(cpu, 2048, 8) == format_tag::nhwc);
  CHECK(conv_preferred_activation(cpu, 16, 7) == format_tag::nchw);
  CHECK(conv_preferred_activation(cpu, 4, 4) == format_tag::nchw);  // ResNeXt's groups of 4
  CHECK(conv_preferred_activation(cpu, 1, 1) == format_tag::nchw);  // depthwise
  CHECK(conv_preferred_activation(gpu, 64, 256) == format_tag::nchw);
  CHECK(conv_preferred_activation(gpu, 1, 1) == format_tag::nchw);
}

TEST_CASE("a convolution's `any` activations resolve to the preferred layout and compute right",
          "[ocl][conv][any]") {
  using ft = format_tag;
  engine eng(engine_kind::gpu, 0);
  const bool gpu = (ocl_internal::ocl_engine_of(backend::impl_of(eng)).device_info().type &
                    CL_DEVICE_TYPE_GPU) != 0;
  struct any_case {
    conv_shape s;
    options o;
    ft src_on_cpu, dst_on_cpu;  // what `any` must resolve to on a CPU device
  };
  const auto a = GENERATE(
      // 3x3 with 32 output channels, bias and post-ops
      any_case{make(1, 1, 16, 32, 8, 8, 3, 1, 1, 1),
               {ft::any, ft::any, true, true, true},
               ft::nhwc,
               ft::nhwc},
      // stride 2, primes, minibatch 2, weights oihw
      any_case{make(2, 1, 13, 17, 11, 11, 3, 2, 1, 1),
               {ft::any, ft::any, false, true, false},
               ft::nhwc,
               ft::nhwc},
      // depthwise: nchw
      any_case{make(2, 8, 8, 8, 9, 9, 3, 2, 1, 1),
               {ft::any, ft::any, true, true, true},
               ft::nchw,
               ft::nchw},
      // groups of 2 -> 3 channels: nchw
      any_case{make(1, 3, 6, 9, 5, 6, 3, 1, 1, 1),
               {ft::any, ft::any, false, true, true},
               ft::nchw,
               ft::nchw},
      // only src `any`: dst keeps its explicit layout
      any_case{make(1, 1, 16, 24, 7, 7, 1, 1, 0, 0),
               {ft::any, ft::nchw, true, false, true},
               ft::nhwc,
               ft::nchw},
      // only dst `any`
      any_case{make(1, 1, 5, 40, 9, 9, 3, 1, 1, 1),
               {ft::nChw8c, ft::any, true, true, false},
               ft::nChw8c,
               ft::nhwc});
  const auto [src, dst] = run_and_check(a.s, a.o);
  auto expected = [&](ft requested, ft on_cpu) {
    return requested != ft::any ? requested : gpu ? ft::nchw : on_cpu;
  };
  CHECK(src == memory::desc({a.s.mb, a.s.ic, a.s.ih, a.s.iw}, data_type::f32,
                            expected(a.o.src_tag, a.src_on_cpu)));
  CHECK(dst == memory::desc({a.s.mb, a.s.oc, a.s.oh(), a.s.ow()}, data_type::f32,
                            expected(a.o.dst_tag, a.dst_on_cpu)));
}

TEST_CASE("the convolution's channel unroll keeps an iteration within 128 FMAs and IC/G",
          "[ocl][conv][config]") {
  using ocl_internal::conv_config;
  using ocl_internal::conv_ic_unroll;
  CHECK(conv_ic_unroll(conv_config{4, 1, 16, 8, 16, 4, false}, 64) == 8);  // 8 FMAs
  CHECK(conv_ic_unroll(conv_config{4, 1, 16, 16, 8, 4, false}, 64) == 4);  // 32
  CHECK(conv_ic_unroll(conv_config{4, 1, 16, 16, 1, 4, false}, 64) == 1);  // 256
  CHECK(conv_ic_unroll(conv_config{4, 1, 16, 8, 16, 4, false}, 3) == 2);
  CHECK(conv_ic_unroll(conv_config{4, 1, 16, 8, 16, 4, false}, 1) == 1);
  // Set in the configuration, it is taken as given.
  CHECK(conv_ic_unroll(conv_config{4, 1, 16, 8, 16, 4, false, 3}, 64) == 3);
  CHECK(conv_ic_unroll(conv_config{4, 1, 16, 16, 1, 4, false, 2}, 64) == 2);
}

TEST_CASE("the default convolution's channel unroll is 8 for long channel loops and 2 otherwise",
          "[ocl][conv][config]") {
  using ocl_internal::conv_problem;
  using ocl_internal::default_conv_config;
  auto problem = [](const conv_shape& s) {
    conv_problem p;
    p.src = memory::desc({s.mb, s.ic, s.ih, s.iw}, data_type::f32, format_tag::nhwc);
    p.weights = weights_md(s, false);
    p.dst = memory::desc({s.mb, s.oc, s.oh(), s.ow()}, data_type::f32, format_tag::nhwc);
    p.stride_h = s.sh;
    p.stride_w = s.sw;
    p.pad_t = s.pt;
    p.pad_l = s.pl;
    p.pad_b = s.pb;
    p.pad_r = s.pr;
    return p;
  };
  ocl_internal::device_entry cpu, gpu;
  cpu.type = CL_DEVICE_TYPE_CPU;
  cpu.max_work_group_size = 4096;
  cpu.local_mem_size = 4 << 20;
  gpu = cpu;
  gpu.type = CL_DEVICE_TYPE_GPU;
  gpu.max_work_group_size = 1024;
  gpu.local_mem_size = 48 << 10;
  struct unroll_case {
    conv_shape s;
    int want;  // on the CPU device
  };
  for (const auto& [s, want] :
       {// ResNet-50: IC/G * KH * KW below 2048 takes 2 ...
        unroll_case{make(1, 1, 64, 64, 56, 56, 3, 1, 1, 1), 2},     // 576
        unroll_case{make(1, 1, 128, 128, 56, 56, 3, 2, 1, 1), 2},   // 1152
        unroll_case{make(1, 1, 512, 128, 28, 28, 1, 1, 0, 0), 2},   // 512
        unroll_case{make(1, 1, 1024, 256, 14, 14, 1, 1, 0, 0), 2},  // 1024
        unroll_case{make(1, 1, 3, 64, 224, 224, 7, 2, 3, 3), 2},    // 147 (3 channels: 2)
        unroll_case{make(1, 1, 128, 128, 7, 7, 3, 1, 1, 1),
                    2},  // 1152 on 7x7
                         // ... and from 2048 on the unroll of 8 ...
        unroll_case{make(1, 1, 256, 256, 14, 14, 3, 1, 1, 1), 8},  // 2304
        unroll_case{make(1, 1, 512, 512, 7, 7, 3, 1, 1, 1), 8},    // 4608
        unroll_case{make(1, 1, 2048, 512, 7, 7, 1, 1, 0, 0), 8},   // 2048
        unroll_case{make(1, 1, 2047, 64, 7, 7, 1, 1, 0, 0), 2},    // 2047
        unroll_case{make(1, 1, 256, 256, 56, 56, 3, 1, 1, 1),
                    8},  // 2304 on 56x56
                         // ... within conv_ic_unroll's caps: no more than IC/G.
        unroll_case{make(1, 32, 32, 32, 112, 112, 3, 1, 1, 1), 1},  // depthwise
        unroll_case{make(1, 2, 2, 64, 9, 9, 3, 1, 1, 1), 1}}) {     // 1 channel a group
    INFO(s.str());
    const auto c = default_conv_config(cpu, problem(s));
    CHECK_FALSE(c.local_tiling);
    CHECK(c.ic_unroll == want);
    CHECK(ocl_internal::conv_default_ic_unroll(c, problem(s)) == want);
    // GPUs stage channels in local memory: no unroll (canonically 0).
    const auto g = default_conv_config(gpu, problem(s));
    if (g.local_tiling) CHECK(g.ic_unroll == 0);
  }
  CHECK(ocl_internal::kConvLongChannelLoop == 2048);
}

TEST_CASE("the default configuration computes right on both sides of the unroll rule",
          "[ocl][conv][config][kernel_sweep]") {
  engine eng(engine_kind::gpu, 0);
  const bool gpu = (ocl_internal::ocl_engine_of(backend::impl_of(eng)).device_info().type &
                    CL_DEVICE_TYPE_GPU) != 0;
  struct rule_case {
    conv_shape s;
    int want;  // ic_unroll on a CPU device
  };
  // Odd sizes: channels not a multiple of the unroll (remainder loops),
  // columns not a multiple of the tile, padding on every side.
  for (const auto& [s, want] : {rule_case{make(1, 1, 37, 40, 9, 11, 3, 1, 1, 1), 2},
                                rule_case{make(1, 1, 229, 24, 7, 7, 3, 1, 1, 1), 8},
                                rule_case{make(1, 1, 2051, 19, 5, 5, 1, 1, 0, 0), 8},
                                rule_case{make(2, 1, 2045, 17, 3, 5, 1, 1, 0, 0), 2}}) {
    INFO(s.str());
    options o;
    o.src_tag = o.dst_tag = format_tag::nhwc;
    o.weights_any = true;
    o.bias = true;
    run_and_check(s, o);
    const convolution_forward::desc d(
        prop_kind::forward_inference, algorithm::convolution_direct,
        memory::desc({s.mb, s.ic, s.ih, s.iw}, data_type::f32, format_tag::nhwc),
        weights_md(s, true), memory::desc(),
        memory::desc({s.mb, s.oc, s.oh(), s.ow()}, data_type::f32, format_tag::nhwc), {s.sh, s.sw},
        {s.pt, s.pl}, {s.pb, s.pr});
    const convolution_forward::primitive_desc pd(d, eng);
    const auto& cfg = backend::impl_of(pd).config();
    REQUIRE(cfg.has_value());
    if (!gpu) CHECK(cfg->get("ic_unroll") == want);
  }
}

// Without a GPU the suite still runs the kernel a GPU gets by default
// (local tiling, 16x8 groups, 4x4 tiles, float4): its configuration for a
// GPU-like entry (1024 work-items a group, 48 KiB of local memory, within
// this device's limits), forced on this device, odd shapes included.
TEST_CASE("the GPU default convolution configuration computes right on this device",
          "[ocl][conv][config][gpu_default][kernel_sweep]") {
  using ft = format_tag;
  const engine eng(engine_kind::gpu, 0);
  const auto& here = ocl_internal::ocl_engine_of(backend::impl_of(eng)).device_info();
  ocl_internal::device_entry gpu = here;
  gpu.type = CL_DEVICE_TYPE_GPU;
  gpu.max_work_group_size = std::min<std::size_t>(here.max_work_group_size, 1024);
  gpu.local_mem_size = std::min<cl_ulong>(here.local_mem_size, 48 << 10);
  struct gpu_case {
    conv_shape s;
    ft src, dst;
  };
  const auto g =
      GENERATE(gpu_case{make(1, 1, 19, 40, 6, 13, 3, 1, 1, 1), ft::nchw, ft::nchw},
               gpu_case{make(2, 1, 13, 17, 11, 11, 3, 2, 1, 1), ft::nhwc, ft::nchw},
               gpu_case{make(1, 1, 64, 64, 14, 14, 3, 1, 1, 1), ft::nchw, ft::nchw},
               gpu_case{make(1, 8, 8, 8, 9, 9, 3, 2, 1, 1), ft::nchw, ft::nChw8c},  // depthwise
               gpu_case{make(1, 1, 37, 41, 15, 15, 1, 2, 0, -1), ft::nChw16c, ft::nhwc},  // 1x1/2
               gpu_case{make(1, 1, 1, 1, 1, 1, 1, 1, 0, 0), ft::nchw, ft::nchw});
  ocl_internal::conv_problem p;
  const memory::desc src_md({g.s.mb, g.s.ic, g.s.ih, g.s.iw}, data_type::f32, g.src);
  const memory::desc dst_md({g.s.mb, g.s.oc, g.s.oh(), g.s.ow()}, data_type::f32, g.dst);
  p.src = src_md;
  p.dst = dst_md;
  p.weights = weights_md(g.s, false);
  p.stride_h = g.s.sh;
  p.stride_w = g.s.sw;
  p.pad_t = g.s.pt;
  p.pad_l = g.s.pl;
  p.pad_b = g.s.pb;
  p.pad_r = g.s.pr;
  const auto c = ocl_internal::default_conv_config(gpu, p);
  INFO("config wg " << c.wg_oc << "x" << c.wg_ow << " tile " << c.tile_oc << "x" << c.tile_ow
                    << " vec " << c.vec_width << " ic " << c.tile_ic << " local "
                    << c.local_tiling);
  CHECK(ocl_internal::check_conv_config(c, gpu, p).has_value());
  const bool extras = (g.s.ic % 2) == 1;  // bias and post-ops on half
  run_and_check(g.s, {g.src, g.dst, false, extras, extras, &c});
}

TEST_CASE("the default convolution configuration fits the device for ResNet-50's layers",
          "[ocl][conv][config]") {
  engine eng(engine_kind::gpu, 0);
  for (const auto& s :
       {make(1, 1, 3, 64, 224, 224, 7, 2, 3, 3), make(1, 1, 64, 256, 56, 56, 1, 1, 0, 0),
        make(1, 1, 128, 128, 56, 56, 3, 2, 1, 1), make(1, 1, 512, 512, 7, 7, 3, 1, 1, 1),
        make(1, 32, 32, 32, 112, 112, 3, 1, 1, 1)}) {
    INFO(s.str());
    const memory::desc src_md({s.mb, s.ic, s.ih, s.iw}, data_type::f32, format_tag::nhwc);
    const memory::desc dst_md({s.mb, s.oc, s.oh(), s.ow()}, data_type::f32, format_tag::nhwc);
    const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                      src_md, weights_md(s, true), memory::desc(), dst_md,
                                      {s.sh, s.sw}, {s.pt, s.pl}, {s.pb, s.pr});
    convolution_forward::primitive_desc pd(d, eng);
    REQUIRE(pd.impl_info_str() == "ocl:conv");
  }
}

TEST_CASE("what the OpenCL convolution cannot do is declined with a reason", "[ocl][conv]") {
  engine eng(engine_kind::gpu, 0);
  const conv_shape s = make(1, 1, 4, 4, 5, 5, 3, 1, 1, 1);
  const memory::desc src_md({1, 4, 5, 5}, data_type::f32, format_tag::nchw);
  const memory::desc dst_md({1, 4, 5, 5}, data_type::f32, format_tag::nchw);
  auto declined = [&](const convolution_forward::desc& d, const primitive_attr& attr) {
    try {
      convolution_forward::primitive_desc pd(d, attr, eng);
    } catch (const error& e) {
      REQUIRE(e.code() == status::unimplemented);
      return std::string(e.what());
    }
    FAIL("accepted");
    return std::string();
  };
  SECTION("output scales") {
    primitive_attr attr;
    attr.set_output_scales(0, {0.5f});
    const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                      src_md, weights_md(s, false), memory::desc(), dst_md, {1, 1},
                                      {1, 1}, {1, 1});
    REQUIRE(declined(d, attr).find("output scales on OpenCL convolution") != std::string::npos);
  }
  SECTION("data types other than f32") {
    const memory::desc bf({1, 4, 5, 5}, data_type::bf16, format_tag::nchw);
    const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                      bf, weights_md(s, false), memory::desc(), dst_md, {1, 1},
                                      {1, 1}, {1, 1});
    REQUIRE(declined(d, primitive_attr()).find("is not f32") != std::string::npos);
  }
  SECTION("a binary post-op operand that does not broadcast is invalid, by name") {
    primitive_attr attr;
    post_ops ops;
    ops.append_binary(algorithm::binary_add,
                      memory::desc({1, 3, 1, 1}, data_type::f32, format_tag::nchw));
    attr.set_post_ops(ops);
    const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                      src_md, weights_md(s, false), memory::desc(), dst_md, {1, 1},
                                      {1, 1}, {1, 1});
    try {
      convolution_forward::primitive_desc pd(d, attr, eng);
      FAIL("accepted");
    } catch (const error& e) {
      REQUIRE(e.code() == status::invalid_arguments);
      REQUIRE(std::string(e.what()).find("does not broadcast") != std::string::npos);
    }
  }
}

TEST_CASE("a convolution configuration the device cannot run is refused with a reason",
          "[ocl][conv][config]") {
  engine eng(engine_kind::gpu, 0);
  const conv_shape s = make(1, 1, 64, 64, 14, 14, 7, 1, 3, 3);
  const memory::desc src_md({1, 64, 14, 14}, data_type::f32, format_tag::nchw);
  const auto op = op_of(s, src_md, weights_md(s, false), memory::desc(), src_md);
  ocl_internal::conv_config c;
  c.vec_width = 3;
  auto r = ocl_internal::make_conv_pd(op, primitive_attr(), backend::impl_of(eng), &c);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.why().message.find("vec_width") != std::string::npos);
  c = {};
  c.wg_oc = c.wg_ow = 4096;
  r = ocl_internal::make_conv_pd(op, primitive_attr(), backend::impl_of(eng), &c);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.why().message.find("exceeds the device") != std::string::npos);
  c = {};
  c.ic_unroll = 17;
  r = ocl_internal::make_conv_pd(op, primitive_attr(), backend::impl_of(eng), &c);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.why().message.find("ic_unroll not in 0..16") != std::string::npos);
  c = {16, 1, 16, 16, 16, 64, true};  // 64 channels x 7x7 x 256 outputs: megabytes
  r = ocl_internal::make_conv_pd(op, primitive_attr(), backend::impl_of(eng), &c);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.why().message.find("local memory") != std::string::npos);
}
