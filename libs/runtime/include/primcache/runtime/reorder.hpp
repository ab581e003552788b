// primcache/runtime/reorder.hpp — copies a tensor into another layout and/or
// data type.
//
//   primcache::reorder(src_mem, dst_mem).execute(strm, src_mem, dst_mem);
//   // int8 with a scale: dst = saturate(round_half_even(src * 0.5))
//   primcache::primitive_attr attr;
//   attr.set_output_scales(0, {0.5f});
//   primcache::reorder::primitive_desc pd(eng, f32_md, eng, s8_md, attr);
//
// Data types: f32, bf16, f16 (round to nearest even), s8, u8, s32
// (round to nearest even, then saturate). Exceptions: primcache::error
// (invalid_arguments when dims differ).
#pragma once

#include "primcache/runtime/attr.hpp"
#include "primcache/runtime/backend/op_desc.hpp"
#include "primcache/runtime/primitive.hpp"

namespace primcache {

struct PRIMCACHE_API reorder : public primitive {
  struct PRIMCACHE_API primitive_desc : public primcache::primitive_desc {
    primitive_desc() = default;
    primitive_desc(const engine& src_engine, const memory::desc& src, const engine& dst_engine,
                   const memory::desc& dst, const primitive_attr& attr = primitive_attr());
    primitive_desc(const memory& src, const memory& dst,
                   const primitive_attr& attr = primitive_attr());
  };
  reorder() = default;
  explicit reorder(const primitive_desc& pd) : primitive(pd) {}
  reorder(const memory& src, const memory& dst, const primitive_attr& attr = primitive_attr());

  using primitive::execute;
  void execute(const stream& strm, const memory& src, const memory& dst) const;
};

}  // namespace primcache
