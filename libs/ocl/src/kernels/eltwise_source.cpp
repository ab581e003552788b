#include "kernels/eltwise_source.hpp"

#include <algorithm>

#include "kernels/addressing.hpp"
#include "kernels/eltwise_expression.hpp"
#include "primcache/runtime/args.h"

namespace primcache::ocl_internal {

bool eltwise_supported(algorithm alg) noexcept {
  return !eltwise_expression(alg, 0.f, 0.f).empty();
}

kernel_plan eltwise_plan(const eltwise_problem& p) {
  kernel_plan plan;
  plan.name = "primcache_eltwise";
  const int n = p.src.ndims();
  // A dst with padding (a blocked dimension not a multiple of its block):
  // one work-item per element of its padded dims, those past the logical
  // dims writing zero (never alg(0) or post-op(0)), as the reorder does; a
  // blocked layout promises its next reader zeros there. Without padding
  // the kernel is the one it always was.
  const bool padded =
      !std::equal(p.dst.dims().begin(), p.dst.dims().end(), p.dst.padded_dims().begin());
  std::int64_t count = 1;
  for (std::int64_t d : padded ? p.dst.padded_dims() : p.src.dims()) count *= d;
  std::vector<std::string> index;
  for (int d = 0; d < n; ++d) index.push_back("i" + std::to_string(d));
  std::string s = offset_function(p.src, "src_off") + offset_function(p.dst, "dst_off") +
                  post_op_functions(p.post_ops);
  s += "__kernel void primcache_eltwise(__global const float* src" + post_op_params(p.post_ops) +
       ", __global float* dst) {\n";
  s += "  const long gid = get_global_id(0);\n";
  s += "  if (gid >= " + std::to_string(count) + "L) return;\n";
  s += index_split(padded ? p.dst.padded_dims() : p.src.dims(), "gid", "i");
  if (padded) {
    std::string outside = "0";
    for (int d = 0; d < n; ++d) {
      outside += " || i" + std::to_string(d) + " >= " + std::to_string(p.dst.dims()[d]) + "L";
    }
    s += "  if (" + outside + ") {\n    dst[dst_off(" + index_list(n, "i") +
         ")] = 0.0f;\n    return;\n  }\n";
  }
  s += "  float v = src[src_off(" + index_list(n, "i") + ")];\n";
  s += "  v = " + eltwise_expression(p.alg, p.alpha, p.beta) + ";\n";
  s += post_op_statements(p.post_ops, index);
  s += "  dst[dst_off(" + index_list(n, "i") + ")] = v;\n}\n";
  plan.source = std::move(s);
  plan.args = {PRIMCACHE_ARG_SRC};
  plan.arg_bytes = {p.src.size_bytes()};
  for (const auto& op : p.post_ops) {
    if (!op.binary) continue;
    plan.args.push_back(op.arg);
    plan.arg_bytes.push_back(op.src1.size_bytes());
  }
  plan.args.push_back(PRIMCACHE_ARG_DST);
  plan.arg_bytes.push_back(p.dst.size_bytes());
  plan.global[0] = static_cast<std::size_t>(count == 0 ? 1 : count);
  return plan;
}

}  // namespace primcache::ocl_internal
