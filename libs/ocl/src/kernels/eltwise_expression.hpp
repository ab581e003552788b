// kernels/eltwise_expression.hpp — the OpenCL C expression of one eltwise
// algorithm, shared by the eltwise kernel and post-op chains.
#pragma once

#include <string>

#include "primcache/runtime/attr.hpp"

namespace primcache::ocl_internal {

// The expression of `alg` over the float variable `v`, alpha and beta baked
// in bit-exactly; empty when the algorithm has none.
std::string eltwise_expression(algorithm alg, float alpha, float beta);

}  // namespace primcache::ocl_internal
