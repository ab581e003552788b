// primcache/runtime/convolution.hpp — 2-D convolution, forward inference.
//
//   primcache::convolution_forward::desc d(
//       primcache::prop_kind::forward_inference, primcache::algorithm::convolution_direct,
//       src_md, weights_md, bias_md, dst_md,
//       /*strides=*/{1, 1}, /*padding_l=*/{1, 1}, /*padding_r=*/{1, 1});
//   primcache::convolution_forward::primitive_desc pd(d, eng);
//
// src (N, C, H, W); weights (O, I, KH, KW) or grouped (G, O/G, I/G, KH, KW);
// bias (O) or empty; dst (N, O, OH, OW) with
// OH = (H + pad_t + pad_b - ((KH - 1) * (dil_h + 1) + 1)) / stride_h + 1.
// Dilation 0 is a dense kernel. Exceptions: desc throws
// primcache::error(invalid_arguments) naming the first inconsistency.
#pragma once

#include "primcache/runtime/attr.hpp"
#include "primcache/runtime/backend/op_desc.hpp"
#include "primcache/runtime/primitive.hpp"

namespace primcache {

struct PRIMCACHE_API convolution_forward : public primitive {
  struct PRIMCACHE_API desc {
    desc(prop_kind prop, algorithm alg, const memory::desc& src, const memory::desc& weights,
         const memory::desc& bias, const memory::desc& dst, const memory::dims& strides,
         const memory::dims& padding_l, const memory::dims& padding_r);
    desc(prop_kind prop, algorithm alg, const memory::desc& src, const memory::desc& weights,
         const memory::desc& bias, const memory::desc& dst, const memory::dims& strides,
         const memory::dims& dilates, const memory::dims& padding_l, const memory::dims& padding_r);
    // The op as backends see it (a convolution_op).
    backend::op_desc op;
  };
  struct PRIMCACHE_API primitive_desc : public primcache::primitive_desc {
    primitive_desc() = default;
    primitive_desc(const desc& d, const engine& eng);
    primitive_desc(const desc& d, const primitive_attr& attr, const engine& eng);
  };
  convolution_forward() = default;
  explicit convolution_forward(const primitive_desc& pd) : primitive(pd) {}
};

}  // namespace primcache
