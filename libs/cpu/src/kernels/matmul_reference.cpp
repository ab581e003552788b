#include <vector>

#include "kernels/matmul_kernel.hpp"

namespace primcache::cpu_internal {

void matmul_reference(const matmul_problem& p, const matmul_args& args) {
  std::vector<float> operands(p.post_ops.size(), 0.f);
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t i = 0; i < p.m; ++i) {
      for (std::int64_t j = 0; j < p.n; ++j) {
        double acc = 0;
        for (std::int64_t k = 0; k < p.k; ++k) {
          acc += static_cast<double>(
                     args.src[b * p.src_strides[0] + i * p.src_strides[1] + k * p.src_strides[2]]) *
                 args.weights[b * p.wei_strides[0] + k * p.wei_strides[1] + j * p.wei_strides[2]];
        }
        if (p.with_bias) acc += args.bias[j];
        const std::int64_t off = b * p.dst_strides[0] + i * p.dst_strides[1] + j * p.dst_strides[2];
        for (std::size_t o = 0; o < p.post_ops.size(); ++o) {
          const post_op& op = p.post_ops[o];
          if (op.what != post_op::kind::binary_add) continue;
          const float* x = args.binary_operands[op.binary.arg_index];
          operands[o] = op.binary.broadcast == binary_broadcast::none          ? x[off]
                        : op.binary.broadcast == binary_broadcast::per_channel ? x[j]
                                                                               : x[0];
        }
        args.dst[off] =
            apply_post_ops_reference(static_cast<float>(acc), p.post_ops, operands.data());
      }
    }
  }
}

}  // namespace primcache::cpu_internal
