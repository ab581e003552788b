#include "kernels/reorder_source.hpp"

#include "kernels/addressing.hpp"
#include "primcache/runtime/args.h"

namespace primcache::ocl_internal {

kernel_plan reorder_plan(const memory_desc& src, const memory_desc& dst) {
  kernel_plan plan;
  plan.name = "primcache_reorder";
  const int n = dst.ndims();
  std::int64_t count = 1;
  for (std::int64_t d : dst.padded_dims()) count *= d;
  std::string s = offset_function(src, "src_off") + offset_function(dst, "dst_off");
  s += "__kernel void primcache_reorder(__global const float* src, __global float* dst) {\n";
  s += "  const long gid = get_global_id(0);\n";
  s += "  if (gid >= " + std::to_string(count) + "L) return;\n";
  s += index_split(dst.padded_dims(), "gid", "i");
  std::string inside = "1";
  for (int d = 0; d < n; ++d) {
    inside += " && i" + std::to_string(d) + " < " + std::to_string(dst.dims()[d]) + "L";
  }
  s += "  dst[dst_off(" + index_list(n, "i") + ")] = (" + inside + ") ? src[src_off(" +
       index_list(n, "i") + ")] : 0.0f;\n}\n";
  plan.source = std::move(s);
  plan.args = {PRIMCACHE_ARG_FROM, PRIMCACHE_ARG_TO};
  plan.arg_bytes = {src.size_bytes(), dst.size_bytes()};
  plan.global[0] = static_cast<std::size_t>(count == 0 ? 1 : count);
  return plan;
}

}  // namespace primcache::ocl_internal
