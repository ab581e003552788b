#include "primitives/post_op_translation.hpp"

#include <string>

#include "kernel_primitive.hpp"
#include "kernels/eltwise_expression.hpp"
#include "primcache/runtime/args.h"

namespace primcache::ocl_internal {

result<std::vector<post_op_entry>> translate_post_ops(const primitive_attr& attr,
                                                      const memory_desc& dst) {
  std::vector<post_op_entry> out;
  const auto& entries = attr.get_post_ops().entries();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    post_op_entry op;
    if (e.kind == post_ops::kind::eltwise) {
      if (eltwise_expression(e.alg, 0.f, 0.f).empty()) {
        return unimplemented("OpenCL post-op " + std::string(to_string(e.alg)));
      }
      op.alg = e.alg;
      op.scale = e.scale;
      op.alpha = e.alpha;
      op.beta = e.beta;
    } else {
      if (e.alg != algorithm::binary_add) {
        return unimplemented("OpenCL binary post-op " + std::string(to_string(e.alg)));
      }
      if (e.src1.ndims() != dst.ndims()) {
        return failure{status::invalid_arguments, "binary post-op operand " + e.src1.to_string() +
                                                      " and dst " + dst.to_string() +
                                                      " differ in rank"};
      }
      for (int d = 0; d < dst.ndims(); ++d) {
        if (e.src1.dims()[d] != 1 && e.src1.dims()[d] != dst.dims()[d]) {
          return failure{status::invalid_arguments, "binary post-op operand " + e.src1.to_string() +
                                                        " does not broadcast to dst " +
                                                        dst.to_string()};
        }
      }
      if (e.src1.data_type() != data_type::f32 || !e.src1.is_blocked()) {
        return unimplemented("OpenCL binary post-op operand " + e.src1.to_string() +
                             " is not a resolved f32 tensor");
      }
      op.binary = true;
      op.alg = e.alg;
      op.src1 = e.src1;
      op.arg = PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | PRIMCACHE_ARG_SRC_1;
    }
    out.push_back(std::move(op));
  }
  return out;
}

}  // namespace primcache::ocl_internal
