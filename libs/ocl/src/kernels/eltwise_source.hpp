// kernels/eltwise_source.hpp — the OpenCL C of an eltwise forward: one
// work-item per logical element, src and dst addressed through their own
// layouts, the algorithm and alpha/beta baked in, then the post-op chain.
// A dst with padding (blocked, dims not a multiple of the block) gets one
// work-item per element of its padded dims: the padding is written as zero.
#pragma once

#include <vector>

#include "kernels/post_op_source.hpp"
#include "primcache/runtime/attr.hpp"
#include "primcache/tensor/memory_desc.hpp"
#include "program_binary.hpp"

namespace primcache::ocl_internal {

struct eltwise_problem {
  memory_desc src;
  memory_desc dst;
  algorithm alg = algorithm::eltwise_relu;
  float alpha = 0.f;
  float beta = 0.f;
  std::vector<post_op_entry> post_ops;  // applied after the algorithm
};

// Whether the generator has an expression for `alg`.
bool eltwise_supported(algorithm alg) noexcept;
kernel_plan eltwise_plan(const eltwise_problem& p);

}  // namespace primcache::ocl_internal
