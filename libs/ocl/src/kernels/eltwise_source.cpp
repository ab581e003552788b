#include "kernels/eltwise_source.hpp"

#include "kernels/addressing.hpp"
#include "primcache/runtime/args.h"

namespace primcache::ocl_internal {
namespace {

// The OpenCL C expression of `alg` over the float `v`.
std::string expression(algorithm alg, float alpha, float beta) {
  const std::string a = float_literal(alpha), b = float_literal(beta);
  switch (alg) {
    case algorithm::eltwise_relu: return "(v > 0.0f ? v : " + a + " * v)";
    case algorithm::eltwise_gelu_erf: return "(0.5f * v * (1.0f + erf(v * M_SQRT1_2_F)))";
    case algorithm::eltwise_gelu_tanh:
      return "(0.5f * v * (1.0f + tanh(0.7978845608f * (v + 0.044715f * v * v * v))))";
    case algorithm::eltwise_tanh: return "tanh(v)";
    case algorithm::eltwise_logistic: return "(1.0f / (1.0f + exp(-v)))";
    case algorithm::eltwise_exp: return "exp(v)";
    case algorithm::eltwise_linear: return "(" + a + " * v + " + b + ")";
    case algorithm::eltwise_clip: return "fmin(fmax(v, " + a + "), " + b + ")";
    default: return {};
  }
}

}  // namespace

bool eltwise_supported(algorithm alg) noexcept {
  return !expression(alg, 0.f, 0.f).empty();
}

kernel_plan eltwise_plan(const eltwise_problem& p) {
  kernel_plan plan;
  plan.name = "primcache_eltwise";
  const int n = p.src.ndims();
  const std::int64_t count = p.src.nelems();
  std::string s = offset_function(p.src, "src_off") + offset_function(p.dst, "dst_off");
  s += "__kernel void primcache_eltwise(__global const float* src, __global float* dst) {\n";
  s += "  const long gid = get_global_id(0);\n";
  s += "  if (gid >= " + std::to_string(count) + "L) return;\n";
  s += index_split(p.src.dims(), "gid", "i");
  s += "  const float v = src[src_off(" + index_list(n, "i") + ")];\n";
  s += "  dst[dst_off(" + index_list(n, "i") + ")] = " + expression(p.alg, p.alpha, p.beta) +
       ";\n}\n";
  plan.source = std::move(s);
  plan.args = {PRIMCACHE_ARG_SRC, PRIMCACHE_ARG_DST};
  plan.arg_bytes = {p.src.size_bytes(), p.dst.size_bytes()};
  plan.global[0] = static_cast<std::size_t>(count == 0 ? 1 : count);
  return plan;
}

}  // namespace primcache::ocl_internal
