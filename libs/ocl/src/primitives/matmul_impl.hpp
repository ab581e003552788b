// primitives/matmul_impl.hpp — the OpenCL matmul's descriptor factory
// ("ocl:matmul"): f32, plain layouts of any strides (row-major, transposed,
// batched, batch-1 broadcast), optional bias, post-ops (eltwise chain,
// binary add with broadcast). The configuration is the heuristic's
// (default_matmul_config) unless the caller passes one (tests, tuning).
#pragma once

#include <memory>

#include "kernels/matmul_config.hpp"
#include "primcache/base/result.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"

namespace primcache::ocl_internal {

result<std::shared_ptr<const backend::primitive_desc_impl>> make_matmul_pd(
    const backend::op_desc& op, const primitive_attr& attr, const backend::engine_impl& eng,
    const matmul_config* forced_config);

}  // namespace primcache::ocl_internal
