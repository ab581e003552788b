// primitives/conv_impl.hpp — the OpenCL convolution's descriptor factory
// ("ocl:conv"): f32 2-D forward convolution (inference or training
// forward), groups (depthwise included), strides, dilation, padding
// (negative end padding included), optional bias, post-ops (eltwise chain,
// binary add with broadcast). Activations in any layout that blocks only
// channels (nchw, nhwc, nChw8c, nChw16c, ...; `any` becomes the layout
// conv_preferred_activation names for the device and shape; a blocked
// dst's channel padding is written as zero); weights
// in any layout (`any` becomes the one the kernel reads fastest: output
// channels innermost). The configuration is the heuristic's
// (default_conv_config) unless the caller passes one (tests, tuning).
#pragma once

#include <memory>

#include "kernels/conv_config.hpp"
#include "primcache/base/result.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"

namespace primcache::ocl_internal {

result<std::shared_ptr<const backend::primitive_desc_impl>> make_conv_pd(
    const backend::op_desc& op, const primitive_attr& attr, const backend::engine_impl& eng,
    const conv_config* forced_config);

}  // namespace primcache::ocl_internal
