// kernels/layout_walk_ir.hpp — the IR pieces of a layout walk that the
// specialized walk (layout_walk_ir.cpp, baked-in loops) and the generic one
// (generic_reorder_generator.cpp, loops read at run time) share, so that the
// two give the same bits: the storage type of an element, the conversions
// to and from the f32 a walk computes in, the in-register transpose of a
// square tile, and the mask of a clipped vector's leading lanes.
//
//   llvm::Type* sty = walk_storage_type(b, data_type::bf16, /*raw=*/false);  // i16
//   llvm::Value* f = walk_to_f32(b, data_type::bf16, false, loaded);          // floats
//   walk_transpose(b, rows);  // rows[r][c] -> rows[c][r]
//   llvm::Value* m = emit_lane_mask(b, count, 16);  // lanes below count
//
// Thread-safety: each touches only the builder's insertion point.
// Exceptions: what LLVM's allocation throws.
#pragma once

#include <vector>

#include "primcache/tensor/data_type.hpp"

namespace llvm {
class IRBuilderBase;
class Type;
class Value;
}  // namespace llvm

namespace primcache::cpu_internal {

// The type an element of `dt` is loaded and stored as: an integer of its
// size for a raw (bit-copying) walk; otherwise f32 as float, bf16 and f16
// as i16, s8 and u8 as i8, s32 as i32.
llvm::Type* walk_storage_type(llvm::IRBuilderBase& b, data_type dt, bool raw);

// A loaded element (scalar or vector of walk_storage_type(src_dt)) as f32;
// as is when raw.
llvm::Value* walk_to_f32(llvm::IRBuilderBase& b, data_type src_dt, bool raw, llvm::Value* x);

// An f32 value stored as dst_dt (ir_math.hpp's rounding and saturation); as
// is when raw.
llvm::Value* walk_from_f32(llvm::IRBuilderBase& b, data_type dst_dt, bool raw, llvm::Value* v);

// The <n x i1> mask of lanes e < count (an i64 in [0, n]).
llvm::Value* emit_lane_mask(llvm::IRBuilderBase& b, llvm::Value* count, int n);

// Transposes rows.size() vectors (a power of two of them) of as many lanes
// in place by shuffles: element c of row r moves to element r of row c.
// Rows of more lanes (a multiple) are transposed block by block: element
// k * n + c of row r (n = rows.size(), c < n) moves to element k * n + r of
// row c.
void walk_transpose(llvm::IRBuilderBase& b, std::vector<llvm::Value*>& rows);

}  // namespace primcache::cpu_internal
