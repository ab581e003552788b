#include "kernels/post_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "jit/ir_math.hpp"
#include "kernels/generic_post_ops.hpp"

namespace primcache::cpu_internal {

void write_key(key_writer& w, const post_op_chain& chain) {
  w.u32(static_cast<std::uint32_t>(chain.size()));
  for (const post_op& op : chain) {
    w.enumeration(op.what);
    if (op.what == post_op::kind::eltwise) {
      w.enumeration(op.eltwise.alg)
          .f32(op.eltwise.alpha)
          .f32(op.eltwise.beta)
          .f32(op.eltwise.scale);
    } else {
      w.i32(op.binary.arg_index).enumeration(op.binary.broadcast);
    }
  }
}

namespace {
llvm::Value* splat_like(llvm::IRBuilderBase& b, llvm::Value* like, float v) {
  llvm::Constant* c = llvm::ConstantFP::get(b.getFloatTy(), v);
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like->getType())) {
    return llvm::ConstantVector::getSplat(vt->getElementCount(), c);
  }
  return c;
}
}  // namespace

llvm::Value* emit_eltwise(llvm::IRBuilderBase& b, llvm::Value* x, const eltwise_op& op) {
  llvm::Value* y = nullptr;
  switch (op.alg) {
    case eltwise_alg::relu: {
      // x > 0 ? x : alpha * x, with no multiply when alpha is 0 (the
      // common case). NaN propagates: alpha * NaN is NaN, and for alpha 0,
      // where the select would give 0, "x > 0 or unordered" keeps x.
      llvm::Value* zero = splat_like(b, x, 0.f);
      if (op.alpha == 0.f) {
        y = b.CreateSelect(b.CreateFCmpUGT(x, zero), x, zero);
      } else {
        y = b.CreateSelect(b.CreateFCmpOGT(x, zero), x,
                           b.CreateFMul(x, splat_like(b, x, op.alpha)));
      }
      break;
    }
    case eltwise_alg::gelu_erf: y = emit_gelu_erf(b, x); break;
    case eltwise_alg::gelu_tanh: y = emit_gelu_tanh(b, x); break;
    case eltwise_alg::tanh: y = emit_tanh(b, x); break;
    case eltwise_alg::sigmoid: y = emit_sigmoid(b, x); break;
    case eltwise_alg::exp: y = emit_exp(b, x); break;
    case eltwise_alg::linear:
      y = b.CreateFAdd(b.CreateFMul(x, splat_like(b, x, op.alpha)), splat_like(b, x, op.beta));
      break;
    case eltwise_alg::clip: {
      llvm::Value* lo = splat_like(b, x, op.alpha);
      llvm::Value* hi = splat_like(b, x, op.beta);
      llvm::Value* above = b.CreateSelect(b.CreateFCmpOLT(x, lo), lo, x);
      y = b.CreateSelect(b.CreateFCmpOGT(above, hi), hi, above);
      break;
    }
  }
  if (op.scale != 1.f) y = b.CreateFMul(y, splat_like(b, x, op.scale));
  return y;
}

llvm::Value* emit_post_ops(llvm::IRBuilderBase& b, llvm::Value* x, const post_op_chain& chain,
                           binary_operand_loader load_operand) {
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const post_op& op = chain[i];
    if (op.what == post_op::kind::eltwise) {
      x = emit_eltwise(b, x, op.eltwise);
    } else {
      x = b.CreateFAdd(x, load_operand(static_cast<int>(i), op.binary));
    }
  }
  return x;
}

namespace {

// The vectors `parts` (of one type) as one, in order.
llvm::Value* join_vectors(llvm::IRBuilderBase& b, std::vector<llvm::Value*> parts) {
  while (parts.size() > 1) {
    std::vector<llvm::Value*> joined;
    for (std::size_t i = 0; i + 1 < parts.size(); i += 2) {
      const auto n = llvm::cast<llvm::FixedVectorType>(parts[i]->getType())->getNumElements();
      std::vector<int> order(2 * n);
      for (unsigned j = 0; j < 2 * n; ++j) order[j] = static_cast<int>(j);
      joined.push_back(b.CreateShuffleVector(parts[i], parts[i + 1], order));
    }
    parts = std::move(joined);
  }
  return parts[0];
}

// Part `k` of `wide`, `n` lanes.
llvm::Value* vector_part(llvm::IRBuilderBase& b, llvm::Value* wide, unsigned k, unsigned n) {
  std::vector<int> order(n);
  for (unsigned j = 0; j < n; ++j) order[j] = static_cast<int>(k * n + j);
  return b.CreateShuffleVector(wide, order);
}

}  // namespace

void emit_post_ops(llvm::IRBuilderBase& b, std::size_t count, const post_op_chain& chain, int group,
                   post_op_vector vector, binary_operand_loader_at load_operand,
                   post_op_result result) {
  const auto most = static_cast<std::size_t>(std::max(group, 1));
  for (std::size_t first = 0; first < count;) {
    std::size_t n = 1;
    while (2 * n <= most && first + 2 * n <= count) n *= 2;
    std::vector<llvm::Value*> parts;
    for (std::size_t k = 0; k < n; ++k) parts.push_back(vector(first + k));
    const auto lanes = llvm::cast<llvm::FixedVectorType>(parts[0]->getType())->getNumElements();
    llvm::Value* x = join_vectors(b, std::move(parts));
    x = emit_post_ops(b, x, chain, [&](int i, const binary_add_op& op) {
      std::vector<llvm::Value*> operands;
      for (std::size_t k = 0; k < n; ++k) operands.push_back(load_operand(i, op, first + k));
      return join_vectors(b, std::move(operands));
    });
    for (std::size_t k = 0; k < n; ++k) {
      result(first + k, n == 1 ? x : vector_part(b, x, static_cast<unsigned>(k), lanes));
    }
    first += n;
  }
}

bool is_long_function(eltwise_alg alg) noexcept {
  switch (alg) {
    case eltwise_alg::gelu_erf:
    case eltwise_alg::gelu_tanh:
    case eltwise_alg::tanh:
    case eltwise_alg::sigmoid:
    case eltwise_alg::exp: return true;
    case eltwise_alg::relu:
    case eltwise_alg::linear:
    case eltwise_alg::clip: return false;
  }
  return false;
}

bool has_long_function(const post_op_chain& chain) noexcept {
  return std::any_of(chain.begin(), chain.end(), [](const post_op& op) {
    return op.what == post_op::kind::eltwise && is_long_function(op.eltwise.alg);
  });
}

int post_op_group(const post_op_chain& chain, unsigned vector_bits) {
  if (!has_long_function(chain)) return 1;
  return vector_bits >= 512 ? 4 : 2;
}

float eltwise_reference(float x, const eltwise_op& op) {
  double v = x;
  double y = 0;
  switch (op.alg) {
    // alpha 0 gives 0 for every non-positive x, -inf included (where
    // alpha * x would be NaN), as the generated select does.
    case eltwise_alg::relu:
      y = std::isnan(v) ? v : (v > 0 ? v : (op.alpha == 0.f ? 0.0 : op.alpha * v));
      break;
    // Both gelus in forms free of the cancellation in 1 + erf and 1 + tanh
    // for large negative x (in double, 1 + erf(-6) keeps only a few
    // correct digits): erfc, and 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)).
    // Their limit at -inf is -0, as the generated code gives.
    case eltwise_alg::gelu_erf:
      y = std::isinf(v) && v < 0 ? -0.0 : 0.5 * v * std::erfc(-v / std::sqrt(2.0));
      break;
    case eltwise_alg::gelu_tanh: {
      const double k = std::sqrt(2.0 / 3.14159265358979323846);
      y = std::isinf(v) && v < 0 ? -0.0
                                 : v / (1.0 + std::exp(-2.0 * k * (v + 0.044715 * v * v * v)));
      break;
    }
    case eltwise_alg::tanh: y = std::tanh(v); break;
    case eltwise_alg::sigmoid: y = 1.0 / (1.0 + std::exp(-v)); break;
    case eltwise_alg::exp: y = std::exp(v); break;
    case eltwise_alg::linear: y = static_cast<double>(op.alpha) * v + op.beta; break;
    case eltwise_alg::clip:
      y = std::isnan(v) ? v : std::min<double>(std::max<double>(v, op.alpha), op.beta);
      break;
  }
  return static_cast<float>(y * op.scale);
}

float apply_post_ops_reference(float x, const post_op_chain& chain, const float* operands) {
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const post_op& op = chain[i];
    x = op.what == post_op::kind::eltwise ? eltwise_reference(x, op.eltwise) : x + operands[i];
  }
  return x;
}

void put_generic_f32(std::int64_t& slot, float v) {
  slot = 0;
  std::memcpy(&slot, &v, sizeof v);
}

void write_generic_post_ops(const std::vector<post_op>& chain, std::int64_t& count,
                            std::int64_t* slots) {
  count = static_cast<std::int64_t>(chain.size());
  for (std::size_t i = 0; i < chain.size(); ++i) {
    std::int64_t* op = slots + generic_post_op_slots * i;
    const post_op& po = chain[i];
    if (po.what == post_op::kind::eltwise) {
      op[0] = static_cast<std::int64_t>(po.eltwise.alg);
      put_generic_f32(op[3], po.eltwise.alpha);
      put_generic_f32(op[4], po.eltwise.beta);
      put_generic_f32(op[5], po.eltwise.scale);
    } else {
      op[0] = generic_binary_code;
      op[1] = po.binary.arg_index;
      op[2] = static_cast<std::int64_t>(po.binary.broadcast);
    }
  }
}

}  // namespace primcache::cpu_internal
