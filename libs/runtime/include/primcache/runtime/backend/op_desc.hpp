// primcache/runtime/backend/op_desc.hpp — operation descriptors as backends
// see them: plain structs of memory descriptors and parameters.
//
// The public op classes (matmul::desc, convolution_forward::desc, ...) build
// these after checking the user's arguments; implementations read them in
// their primitive-descriptor factories. Memory descriptors may still be
// `any` here: the implementation that accepts the op resolves them.
//
// Thread-safety: value types. Exceptions: none.
#pragma once

#include <cstdint>
#include <string_view>
#include <variant>

#include "primcache/base/export.hpp"
#include "primcache/runtime/attr.hpp"
#include "primcache/runtime/engine.hpp"
#include "primcache/tensor/dims.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace primcache::backend {

enum class primitive_kind : std::uint8_t { matmul = 1, convolution, eltwise, reorder };
PRIMCACHE_API std::string_view to_string(primitive_kind kind) noexcept;

struct matmul_op {
  memory_desc src;      // (M, K) or (B, M, K)
  memory_desc weights;  // (K, N) or (B | 1, K, N)
  memory_desc bias;     // absent, or (1, N) / (1, 1, N)
  memory_desc dst;      // (M, N) or (B, M, N)
};

struct convolution_op {
  prop_kind prop = prop_kind::forward_inference;
  algorithm alg = algorithm::convolution_direct;
  memory_desc src;      // (N, C, H, W)
  memory_desc weights;  // (O, I, KH, KW) or (G, O/G, I/G, KH, KW)
  memory_desc bias;     // absent or (O)
  memory_desc dst;      // (N, O, OH, OW)
  // Spatial parameters (H then W). Dilation 0 is a dense kernel (the
  // effective kernel extent is (k - 1) * (dilation + 1) + 1).
  std::int64_t strides[2] = {1, 1};
  std::int64_t dilates[2] = {0, 0};
  std::int64_t padding_l[2] = {0, 0};
  std::int64_t padding_r[2] = {0, 0};
  bool grouped() const noexcept { return weights.ndims() == 5; }
};

struct eltwise_fwd_op {
  prop_kind prop = prop_kind::forward_inference;
  algorithm alg = algorithm::eltwise_relu;
  memory_desc src;
  memory_desc dst;  // same dims; layout may differ from src's
  float alpha = 0.f;
  float beta = 0.f;
};

struct reorder_op {
  memory_desc src;
  memory_desc dst;
  engine_kind src_engine = engine_kind::cpu;
  engine_kind dst_engine = engine_kind::cpu;
};

using op_desc = std::variant<matmul_op, convolution_op, eltwise_fwd_op, reorder_op>;

PRIMCACHE_API primitive_kind kind_of(const op_desc& op) noexcept;

}  // namespace primcache::backend
