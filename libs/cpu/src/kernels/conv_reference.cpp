#include <vector>

#include "kernels/conv_geometry.hpp"
#include "kernels/conv_kernel.hpp"
#include "kernels/conv_validation.hpp"
#include "kernels/integer_math.hpp"

namespace primcache::cpu_internal {
namespace {

constexpr int lanes = conv_lanes;

}  // namespace

void conv_reference(const conv_problem& p, const conv_args& args) {
  const conv_geometry g = analyze_conv(p).value();
  const auto* src = static_cast<const float*>(args.src);
  const auto* wei = static_cast<const float*>(args.weights);
  const auto* bias = static_cast<const float*>(args.bias);
  auto* dst = static_cast<float*>(args.dst);
  const memory_desc& wmd = p.weights;
  const bool five = wmd.ndims() == 5;
  std::vector<float> operands(p.post_ops.size());
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t grp = 0; grp < g.g; ++grp)
      for (std::int64_t o = 0; o < g.ocg; ++o)
        for (std::int64_t oh = 0; oh < g.oh; ++oh)
          for (std::int64_t ow = 0; ow < g.ow; ++ow) {
            const std::int64_t oc = grp * g.ocg + o;
            double acc = g.has_bias ? bias[oc] : 0.0;
            for (std::int64_t i = 0; i < g.icg; ++i)
              for (std::int64_t kh = 0; kh < g.kh; ++kh) {
                const std::int64_t ih = oh * g.sh - g.pt + kh * (g.dh + 1);
                if (ih < 0 || ih >= g.ih) continue;
                for (std::int64_t kw = 0; kw < g.kw; ++kw) {
                  const std::int64_t iw = ow * g.sw - g.pl + kw * (g.dw + 1);
                  if (iw < 0 || iw >= g.iw) continue;
                  const std::int64_t widx[5] = {grp, o, i, kh, kw};
                  const float wv = wei[conv_md_offset(wmd, five ? widx : widx + 1)];
                  acc += static_cast<double>(src[g.src.offset(n, grp * g.icg + i, ih, iw)]) * wv;
                }
              }
            const std::int64_t off = g.dst.offset(n, oc, oh, ow);
            for (std::size_t k = 0; k < p.post_ops.size(); ++k) {
              const post_op& op = p.post_ops[k];
              if (op.what != post_op::kind::binary_add) continue;
              const float* operand = args.binary_operands[op.binary.arg_index];
              operands[k] = op.binary.broadcast == binary_broadcast::scalar        ? operand[0]
                            : op.binary.broadcast == binary_broadcast::per_channel ? operand[oc]
                                                                                   : operand[off];
            }
            dst[off] =
                apply_post_ops_reference(static_cast<float>(acc), p.post_ops, operands.data());
          }
  // The channel padding of a blocked dst holds zeros.
  if (g.dst.blocked) {
    const std::int64_t padded = div_up(g.oc, lanes) * lanes;
    for (std::int64_t n = 0; n < g.n; ++n)
      for (std::int64_t oc = g.oc; oc < padded; ++oc)
        for (std::int64_t oh = 0; oh < g.oh; ++oh)
          for (std::int64_t ow = 0; ow < g.ow; ++ow) dst[g.dst.offset(n, oc, oh, ow)] = 0.f;
  }
}

}  // namespace primcache::cpu_internal
