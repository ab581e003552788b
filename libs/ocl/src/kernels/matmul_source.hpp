// kernels/matmul_source.hpp — the OpenCL C of an f32 matmul for one problem
// and one configuration (see matmul_config.hpp), with bias and the post-op
// chain fused into the store. Shapes, strides and the configuration are
// constants; the kernel takes only buffers.
#pragma once

#include "kernels/matmul_config.hpp"
#include "kernels/matmul_problem.hpp"
#include "program_binary.hpp"

namespace primcache::ocl_internal {

kernel_plan matmul_plan(const matmul_problem& p, const matmul_config& c);

}  // namespace primcache::ocl_internal
