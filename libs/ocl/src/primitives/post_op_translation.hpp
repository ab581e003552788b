// primitives/post_op_translation.hpp — a primitive's post-op attribute as
// the OpenCL generators' post_op_entry chain: eltwise entries the generator
// has an expression for, and binary adds whose f32 operand has dst's rank
// and broadcasts (each dim 1 or dst's). Anything else is unimplemented (or
// invalid_arguments for an operand that cannot broadcast).
#pragma once

#include <vector>

#include "kernels/post_op_source.hpp"
#include "primcache/base/result.hpp"
#include "primcache/runtime/attr.hpp"

namespace primcache::ocl_internal {

result<std::vector<post_op_entry>> translate_post_ops(const primitive_attr& attr,
                                                      const memory_desc& dst);

}  // namespace primcache::ocl_internal
