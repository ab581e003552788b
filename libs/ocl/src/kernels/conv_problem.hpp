// kernels/conv_problem.hpp — a 2-D forward convolution as the OpenCL
// generator sees it: resolved descriptors (any layout the addressing
// helpers can express: nchw, nhwc, nChw8c, nChw16c, any strides; weights
// 4-D (O, I, KH, KW) or grouped 5-D (G, O/G, I/G, KH, KW)), the spatial
// parameters and the post-op chain.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/post_op_source.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace primcache::ocl_internal {

struct conv_problem {
  memory_desc src;      // (N, IC, H, W)
  memory_desc weights;  // (OC, IC, KH, KW) or (G, OC/G, IC/G, KH, KW)
  memory_desc bias;     // empty or (OC)
  memory_desc dst;      // (N, OC, OH, OW)
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t dilate_h = 0, dilate_w = 0;  // 0: dense
  std::int64_t pad_t = 0, pad_l = 0;        // start padding (end padding may be negative)
  std::int64_t pad_b = 0, pad_r = 0;
  std::vector<post_op_entry> post_ops;
  // Constant weights in another layout than `weights` (the kernel's):
  // the user's descriptor, packed into `weights` by the plan's packing
  // kernel (constant_weights.hpp). Zero when the kernel reads them as given.
  memory_desc user_weights;

  bool grouped() const { return weights.ndims() == 5; }
  std::int64_t groups() const { return grouped() ? weights.dims()[0] : 1; }
  std::int64_t mb() const { return src.dims()[0]; }
  std::int64_t ic() const { return src.dims()[1]; }
  std::int64_t ih() const { return src.dims()[2]; }
  std::int64_t iw() const { return src.dims()[3]; }
  std::int64_t oc() const { return dst.dims()[1]; }
  std::int64_t oh() const { return dst.dims()[2]; }
  std::int64_t ow() const { return dst.dims()[3]; }
  std::int64_t kh() const { return weights.dims()[weights.ndims() - 2]; }
  std::int64_t kw() const { return weights.dims()[weights.ndims() - 1]; }
  std::int64_t ic_per_group() const { return ic() / groups(); }
  std::int64_t oc_per_group() const { return oc() / groups(); }
};

}  // namespace primcache::ocl_internal
