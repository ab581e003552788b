// kernels/layout_walk_ir.hpp — the IR pieces of a layout walk that the
// specialized walk (layout_walk_ir.cpp, baked-in loops) and the generic one
// (generic_reorder_generator.cpp, loops read at run time) share, so that the
// two give the same bits: the storage type of an element, the conversions
// to and from the f32 a walk computes in, the in-register transpose of a
// square tile, the mask of a clipped vector's leading lanes, and vectors
// read and written in runs (a part per block of a short-blocked layout).
//
//   llvm::Type* sty = walk_storage_type(b, data_type::bf16, /*raw=*/false);  // i16
//   llvm::Value* f = walk_to_f32(b, data_type::bf16, false, loaded);          // floats
//   walk_transpose(b, rows);  // rows[r][c] -> rows[c][r]
//   llvm::Value* m = emit_lane_mask(b, count, 16);  // lanes below count
//   llvm::Value* v = walk_load_parts(b, f32, src, 16, 8, 1, part_offset, m, count);
//
// Thread-safety: each touches only the builder's insertion point.
// Exceptions: what LLVM's allocation throws.
#pragma once

#include <cstdint>
#include <functional>
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

// The vectors of `parts` (a power of two of them, of one type) one after
// the other, as one vector.
llvm::Value* walk_concat_lanes(llvm::IRBuilderBase& b, std::vector<llvm::Value*> parts);

// The first element offset of each part of a vector accessed in runs:
// called with the part's first lane.
using walk_part_offset = std::function<llvm::Value*(int first_lane)>;

// n lanes of `elem` read from `base` in parts of `per` lanes (per divides
// n; a part's lanes `stride` elements apart), part k at offset_of(k). With
// `mask` (<n x i1>: the lanes below `count`; contiguous parts only) a
// masked load per part, unread lanes zero; a part with no lane below count
// reads at the first part's address instead: its own may lie past the
// buffer (src's missing block of nChw8c to nChw16c), where a masked access,
// even with no lane set, can cost a microcode assist (masked stores there
// did, on the Zen 5 host: 20x). A select, not a branch: a branch around
// each part cost 15%.
llvm::Value* walk_load_parts(llvm::IRBuilderBase& b, llvm::Type* elem, llvm::Value* base, int n,
                             int per, std::int64_t stride, const walk_part_offset& offset_of,
                             llvm::Value* mask, llvm::Value* count);

// v (n lanes of `elem`) written to `base` in contiguous parts of `per`
// lanes, part k at offset_of(k); with `mask` only the lanes below `count`,
// a part with none of them at the first part's address (as
// walk_load_parts).
void walk_store_parts(llvm::IRBuilderBase& b, llvm::Type* elem, llvm::Value* base, llvm::Value* v,
                      int n, int per, const walk_part_offset& offset_of, llvm::Value* mask,
                      llvm::Value* count);

// Transposes rows.size() vectors (a power of two of them) of as many lanes
// in place by shuffles: element c of row r moves to element r of row c.
// Rows of more lanes (a multiple) are transposed block by block: element
// k * n + c of row r (n = rows.size(), c < n) moves to element k * n + r of
// row c.
void walk_transpose(llvm::IRBuilderBase& b, std::vector<llvm::Value*>& rows);

}  // namespace primcache::cpu_internal
