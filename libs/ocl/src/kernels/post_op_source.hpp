// kernels/post_op_source.hpp — OpenCL C for a post-op chain applied to the
// float `v` at a dst element: eltwise entries (scale included) and binary
// adds whose operand broadcasts over dims of size 1. Shared by every kernel
// that fuses post-ops.
//
//   s += post_op_functions(ops);                       // before the kernel
//   params += post_op_params(ops);                     // ", __global const float* po1"
//   s += post_op_statements(ops, {"b", "m", "n"});     // in the store
#pragma once

#include <string>
#include <vector>

#include "primcache/runtime/attr.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace primcache::ocl_internal {

struct post_op_entry {
  bool binary = false;  // false: eltwise
  algorithm alg = algorithm::undef;
  float scale = 1.f, alpha = 0.f, beta = 0.f;
  memory_desc src1;  // binary add: dims 1 or dst's
  int arg = 0;       // binary: PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(i) | SRC_1
};

std::string post_op_functions(const std::vector<post_op_entry>& ops);
std::string post_op_params(const std::vector<post_op_entry>& ops);
// `index` names the dst's logical index variables, outermost first.
std::string post_op_statements(const std::vector<post_op_entry>& ops,
                               const std::vector<std::string>& index);

}  // namespace primcache::ocl_internal
