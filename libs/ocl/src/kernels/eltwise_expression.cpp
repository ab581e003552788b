#include "kernels/eltwise_expression.hpp"

#include "kernels/addressing.hpp"

namespace primcache::ocl_internal {

std::string eltwise_expression(algorithm alg, float alpha, float beta) {
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

}  // namespace primcache::ocl_internal
