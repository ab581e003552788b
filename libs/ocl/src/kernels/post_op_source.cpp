#include "kernels/post_op_source.hpp"

#include "kernels/addressing.hpp"
#include "kernels/eltwise_expression.hpp"

namespace primcache::ocl_internal {

std::string post_op_functions(const std::vector<post_op_entry>& ops) {
  std::string s;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    if (ops[k].binary) s += offset_function(ops[k].src1, "po" + std::to_string(k) + "_off");
  }
  return s;
}

std::string post_op_params(const std::vector<post_op_entry>& ops) {
  std::string s;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    if (ops[k].binary) s += ", __global const float* po" + std::to_string(k);
  }
  return s;
}

std::string post_op_statements(const std::vector<post_op_entry>& ops,
                               const std::vector<std::string>& index) {
  std::string s;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const post_op_entry& op = ops[k];
    if (op.binary) {
      std::string args;
      for (int d = 0; d < op.src1.ndims(); ++d) {
        args += (d ? ", " : "") +
                (op.src1.dims()[d] == 1 ? std::string("0L") : index[static_cast<std::size_t>(d)]);
      }
      const std::string p = "po" + std::to_string(k);
      s += "      v += " + p + "[" + p + "_off(" + args + ")];\n";
    } else {
      s += "      v = " + eltwise_expression(op.alg, op.alpha, op.beta) + ";\n";
      if (op.scale != 1.f) s += "      v *= " + float_literal(op.scale) + ";\n";
    }
  }
  return s;
}

}  // namespace primcache::ocl_internal
