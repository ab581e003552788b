// primcache/runtime/matmul.hpp — matrix multiplication.
//
// dst(M, N) = src(M, K) * weights(K, N) [+ bias(1, N)], then post-ops; 3-D
// tensors add a batch dimension (weights may have batch 1, broadcast).
//
//   primcache::matmul::desc d(src_md, weights_md, bias_md, dst_md);
//   primcache::matmul::primitive_desc pd(d, eng);
//   primcache::matmul(pd).execute(strm, {{PRIMCACHE_ARG_SRC, a}, ...});
//
// Exceptions: desc throws primcache::error(invalid_arguments) when shapes do
// not agree; the message names the mismatch.
#pragma once

#include "primcache/runtime/attr.hpp"
#include "primcache/runtime/backend/op_desc.hpp"
#include "primcache/runtime/primitive.hpp"

namespace primcache {

struct PRIMCACHE_API matmul : public primitive {
  struct PRIMCACHE_API desc {
    desc(const memory::desc& src, const memory::desc& weights, const memory::desc& dst);
    desc(const memory::desc& src, const memory::desc& weights, const memory::desc& bias,
         const memory::desc& dst);
    // The op as backends see it (a matmul_op).
    backend::op_desc op;
  };
  struct PRIMCACHE_API primitive_desc : public primcache::primitive_desc {
    primitive_desc() = default;
    primitive_desc(const desc& d, const engine& eng);
    primitive_desc(const desc& d, const primitive_attr& attr, const engine& eng);
  };
  matmul() = default;
  explicit matmul(const primitive_desc& pd) : primitive(pd) {}
};

}  // namespace primcache
