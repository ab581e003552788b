// primcache/runtime/eltwise.hpp — element-wise functions, forward.
//
//   primcache::eltwise_forward::desc d(primcache::prop_kind::forward_inference,
//                                      primcache::algorithm::eltwise_relu, data_md, 0.f, 0.f);
//   primcache::eltwise_forward(primcache::eltwise_forward::primitive_desc(d, eng))
//       .execute(strm, {{PRIMCACHE_ARG_SRC, x}, {PRIMCACHE_ARG_DST, y}});
//
// The two-descriptor form lets dst have another layout than src.
// Exceptions: desc throws primcache::error(invalid_arguments) for a
// non-eltwise algorithm or mismatched dims.
#pragma once

#include "primcache/runtime/attr.hpp"
#include "primcache/runtime/backend/op_desc.hpp"
#include "primcache/runtime/primitive.hpp"

namespace primcache {

struct PRIMCACHE_API eltwise_forward : public primitive {
  struct PRIMCACHE_API desc {
    desc(prop_kind prop, algorithm alg, const memory::desc& data, float alpha = 0.f,
         float beta = 0.f);
    desc(prop_kind prop, algorithm alg, const memory::desc& src, const memory::desc& dst,
         float alpha = 0.f, float beta = 0.f);
    // The op as backends see it (a eltwise_fwd_op).
    backend::op_desc op;
  };
  struct PRIMCACHE_API primitive_desc : public primcache::primitive_desc {
    primitive_desc() = default;
    primitive_desc(const desc& d, const engine& eng);
    primitive_desc(const desc& d, const primitive_attr& attr, const engine& eng);
  };
  eltwise_forward() = default;
  explicit eltwise_forward(const primitive_desc& pd) : primitive(pd) {}
};

}  // namespace primcache
