#include "kernels/conv_validation.hpp"

#include <string>

#include "kernels/conv_geometry.hpp"
#include "kernels/integer_math.hpp"
#include "kernels/kernel_failure.hpp"

namespace primcache::cpu_internal {
namespace {

constexpr int lanes = conv_lanes;
// Bound on stride, dilation and padding: every index the kernel forms from
// them and a tensor dimension stays far inside int64.
constexpr std::int64_t max_param = std::int64_t{1} << 24;

failure invalid(const std::string& message) {
  return kernel_invalid("convolution", message);
}
failure unimplemented(const std::string& message) {
  return kernel_unimplemented("convolution", message);
}

result<conv_act_layout> activation_layout(const memory_desc& md, const char* what) {
  const std::string name(what);
  if (md.is_zero() || md.is_any()) return invalid(name + " has no resolved layout");
  if (md.ndims() != 4) {
    return invalid(name + " must be 4-D (N, C, H, W), got " + md.to_string());
  }
  if (md.data_type() != data_type::f32) {
    return unimplemented(name + " must be f32, got " + md.to_string());
  }
  conv_act_layout l;
  const auto s = md.strides();
  l.off0 = md.offset0();
  l.n_stride = s[0];
  l.c_stride = s[1];
  l.h_stride = s[2];
  l.w_stride = s[3];
  if (md.is_plain()) return l;
  if (md.inner_nblks() == 1 && md.inner_idxs()[0] == 1 && md.inner_blks()[0] == lanes) {
    l.blocked = true;
    return l;
  }
  return unimplemented(name + " layout " + md.to_string() +
                       " is not supported (plain layouts and nChw16c are)");
}

}  // namespace

result<conv_geometry> analyze_conv(const conv_problem& p) {
  auto src = activation_layout(p.src, "src");
  if (!src) return src.why();
  auto dst = activation_layout(p.dst, "dst");
  if (!dst) return dst.why();
  conv_geometry g;
  g.src = src.value();
  g.dst = dst.value();

  const std::pair<const char*, std::int64_t> params[] = {
      {"stride_h", p.stride_h},     {"stride_w", p.stride_w}, {"dilation_h", p.dilation_h},
      {"dilation_w", p.dilation_w}, {"pad_t", p.pad_t},       {"pad_l", p.pad_l},
      {"pad_b", p.pad_b},           {"pad_r", p.pad_r},       {"groups", p.groups}};
  for (const auto& [name, v] : params) {
    const bool positive =
        std::string_view(name).starts_with("stride") || name == std::string("groups");
    // End padding may be negative (as in oneDNN): the stride leaves the last
    // input rows or columns unread.
    const bool end_pad = name == std::string("pad_b") || name == std::string("pad_r");
    const std::int64_t lo = positive ? 1 : end_pad ? -max_param : 0;
    if (v < lo || v > max_param) {
      return invalid(std::string(name) + " = " + std::to_string(v) + " is outside [" +
                     std::to_string(lo) + ", " + std::to_string(max_param) + "]");
    }
  }
  if (p.nthr < 1) return invalid("nthr = " + std::to_string(p.nthr) + " must be at least 1");

  g.n = p.src.dims()[0];
  g.ic = p.src.dims()[1];
  g.ih = p.src.dims()[2];
  g.iw = p.src.dims()[3];
  g.g = p.groups;
  g.oc = p.dst.dims()[1];
  g.oh = p.dst.dims()[2];
  g.ow = p.dst.dims()[3];
  if (p.dst.dims()[0] != g.n) {
    return invalid("src has " + std::to_string(g.n) + " images but dst has " +
                   std::to_string(p.dst.dims()[0]));
  }
  if (g.ic % g.g != 0 || g.oc % g.g != 0) {
    return invalid("channels (IC " + std::to_string(g.ic) + ", OC " + std::to_string(g.oc) +
                   ") are not divisible by groups = " + std::to_string(g.g));
  }
  g.icg = g.ic / g.g;
  g.ocg = g.oc / g.g;

  const memory_desc& w = p.weights;
  if (w.is_zero() || w.is_any()) return invalid("weights have no resolved layout");
  if (w.data_type() != data_type::f32) {
    return unimplemented("weights must be f32, got " + w.to_string());
  }
  const int wnd = g.g == 1 ? 4 : 5;
  if (w.ndims() != wnd && !(g.g == 1 && w.ndims() == 5)) {
    return invalid("weights " + w.to_string() + " must be " +
                   (g.g == 1 ? "(OC, IC, KH, KW)" : "(G, OC/G, IC/G, KH, KW)"));
  }
  const auto wd = w.dims();
  const int o = w.ndims() - 4;
  if ((o == 1 && wd[0] != g.g) || wd[o] != g.ocg || wd[o + 1] != g.icg) {
    return invalid("weights " + w.to_string() + " do not match groups " + std::to_string(g.g) +
                   ", IC " + std::to_string(g.ic) + " and OC " + std::to_string(g.oc));
  }
  g.kh = wd[o + 2];
  g.kw = wd[o + 3];

  if (!p.bias.is_zero()) {
    const memory_desc& b = p.bias;
    if (b.data_type() != data_type::f32) {
      return unimplemented("bias must be f32, got " + b.to_string());
    }
    if (b.ndims() != 1 || b.dims()[0] != g.oc) {
      return invalid("bias " + b.to_string() + " must be 1-D with OC = " + std::to_string(g.oc) +
                     " elements");
    }
    // Any offset0: the primitive passes the bias from its element 0.
    if (!b.is_plain() || b.strides()[0] != 1) {
      return unimplemented("bias " + b.to_string() + " must be dense");
    }
    g.has_bias = true;
  }

  auto oh = conv_output_size(g.ih, g.kh, p.stride_h, p.dilation_h, p.pad_t, p.pad_b);
  if (!oh) return oh.why();
  auto ow = conv_output_size(g.iw, g.kw, p.stride_w, p.dilation_w, p.pad_l, p.pad_r);
  if (!ow) return ow.why();
  if (oh.value() != g.oh || ow.value() != g.ow) {
    return invalid("dst " + p.dst.to_string() + " has output size " + std::to_string(g.oh) + "x" +
                   std::to_string(g.ow) + " but the shapes give " + std::to_string(oh.value()) +
                   "x" + std::to_string(ow.value()));
  }
  for (const post_op& op : p.post_ops) {
    if (op.what == post_op::kind::binary_add && (op.binary.arg_index < 0)) {
      return invalid("binary post-op arg_index " + std::to_string(op.binary.arg_index) +
                     " is negative");
    }
  }
  g.sh = p.stride_h;
  g.sw = p.stride_w;
  g.dh = p.dilation_h;
  g.dw = p.dilation_w;
  g.pt = p.pad_t;
  g.pl = p.pad_l;
  g.depthwise = g.g > 1 && g.icg == 1 && g.ocg == 1;
  g.nb = g.depthwise ? div_up(g.g, lanes) : div_up(g.ocg, lanes);
  g.nthr = p.nthr;
  return g;
}

result<bool> check_conv_config(const conv_config& c) {
  if (c.ow_block < 1 || c.ow_block > 64) {
    return invalid("config ow_block = " + std::to_string(c.ow_block) + " is outside [1, 64]");
  }
  if (c.oc_blocks < 1 || c.oc_blocks > 16) {
    return invalid("config oc_blocks = " + std::to_string(c.oc_blocks) + " is outside [1, 16]");
  }
  if (c.ow_block * c.oc_blocks > 64) {
    return invalid("config ow_block x oc_blocks = " + std::to_string(c.ow_block * c.oc_blocks) +
                   " exceeds 64 accumulators");
  }
  if (c.ic_unroll != 1 && c.ic_unroll != 2 && c.ic_unroll != 4 && c.ic_unroll != 8 &&
      c.ic_unroll != 16) {
    return invalid("config ic_unroll = " + std::to_string(c.ic_unroll) +
                   " is not one of 1, 2, 4, 8, 16");
  }
  if (c.order != conv_loop_order::oc_outer && c.order != conv_loop_order::spatial_outer) {
    return invalid("config loop order " + std::to_string(static_cast<int>(c.order)) +
                   " is unknown");
  }
  if (c.ic_block < 0 || c.ic_block > (1 << 24)) {
    return invalid("config ic_block = " + std::to_string(c.ic_block) + " is outside [0, 2^24]");
  }
  // Each pass starts at a multiple of the unroll, so a blocked source's
  // channel steps stay inside its 16-channel blocks (conv_steps_channels).
  if (c.ic_block % c.ic_unroll != 0) {
    return invalid("config ic_block = " + std::to_string(c.ic_block) +
                   " is not a multiple of ic_unroll = " + std::to_string(c.ic_unroll));
  }
  if (c.oc_panel < 0 || c.oc_panel > (1 << 24)) {
    return invalid("config oc_panel = " + std::to_string(c.oc_panel) + " is outside [0, 2^24]");
  }
  if (c.thr_oc < 0 || c.thr_oc > (1 << 16)) {
    return invalid("config thr_oc = " + std::to_string(c.thr_oc) + " is outside [0, 65536]");
  }
  return true;
}

result<std::int64_t> conv_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                                      std::int64_t dilation, std::int64_t pad_before,
                                      std::int64_t pad_after) {
  if (in < 1 || kernel < 1 || stride < 1 || dilation < 0 || pad_before < 0 ||
      pad_after < -max_param || kernel > (std::int64_t{1} << 31) || stride > max_param ||
      dilation > max_param || pad_before > max_param || pad_after > max_param ||
      in > (std::int64_t{1} << 40)) {
    return invalid("output size of input " + std::to_string(in) + ", kernel " +
                   std::to_string(kernel) + ", stride " + std::to_string(stride) + ", dilation " +
                   std::to_string(dilation) + ", padding " + std::to_string(pad_before) + "+" +
                   std::to_string(pad_after) + ": an argument is out of range");
  }
  const std::int64_t extent = (kernel - 1) * (dilation + 1) + 1;
  const std::int64_t padded = in + pad_before + pad_after;
  if (padded < extent) {
    return invalid("the dilated kernel extent " + std::to_string(extent) +
                   " exceeds the padded input " + std::to_string(padded));
  }
  return (padded - extent) / stride + 1;
}

result<bool> check_conv_problem(const conv_problem& p) {
  auto g = analyze_conv(p);
  if (!g) return g.why();
  return true;
}

}  // namespace primcache::cpu_internal
