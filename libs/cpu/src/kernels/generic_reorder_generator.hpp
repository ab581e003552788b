// kernels/generic_reorder_generator.hpp — the LLVM IR of the shape-generic
// layout walk (the walk of layout_walk.hpp with its loops read from a
// parameter block at run time instead of baked in) and of the generic
// reorder built on it; the generic eltwise (generic_eltwise_generator.hpp)
// is the same walk with a transform. Compiled once, when the library is
// built (tools/generic_kernels_aot.cpp), and run by tiered primitives until
// their specialized kernel is installed (tiered/tiered_impl.hpp).
//
//   compile_object(generic_reorder_name(isa), isa, generic_walk_compile_settings,
//                  [&](llvm::Module& m) { generate_generic_reorder(isa, m); });
//
// The walk: the C++ driver plans the walk as the specialized kernel does
// (plan_walk, the specialized walk's joined loops where the vectors fit
// them, the same chunk) and writes its loops into the block: the loops
// outside the split loop and the split loop's chunks are an odometer of
// "levels" (extent, strides, the step of the tracked dimension's logical
// index), the split loop (and for a transposing walk the J loop inside it)
// are walked as the specialized code walks them: full vectors of the ISA's
// width where both strides are 1 (a memcpy for a plain copy), square tiles
// transposed in registers (src unit stride along I, dst along J), and single
// elements at the ends and for other strides. Each element goes through the
// specialized code's IR: the same conversions (ir_math.hpp), the scale
// multiply only where there are scales, the same transform, so results equal
// the specialized kernel's bit for bit. Layouts with padding (dimensions not
// exact in the plan, at most gw_max_checks of them) take a second copy of
// the walk, chosen once per call: as the specialized code, vectors and tiles
// whose elements are all real take the fast path; the others are clipped to
// their real part (the indices only grow along a vector or tile, so its real
// lanes, rows and columns are prefixes, counted from the block's steps):
// masked loads of the real src elements (and of the scales and operands of
// real lanes only), the same conversion, and masked stores of dst's in-bound
// lanes, the padding among them written as zero; so are the partial vectors
// and tiles at the ends of the loops. Walks with other strides go element by
// element. Exact walks run the first copy, which checks nothing. A reorder
// whose split loop is joined (nChw8c <-> nChw16c: one side in runs of a
// block, gw_runs) runs a function of its own (generic_walk_form::runs),
// padded or not: its items in runs along the next loop out, each split loop
// in whole vectors of one or two loads and stores, clipped where they pass
// the real elements.
//
// One function per (src, dst) data type pair and walk form, and a bit copy
// per element size: generic_reorder_symbol names them.
//
// Thread-safety: the generators touch only the module they are given.
// Exceptions: what LLVM's allocation throws.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "jit/compiler.hpp"
#include "kernels/generic_post_ops.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/tensor/data_type.hpp"

namespace llvm {
class IRBuilderBase;
class Module;
class Value;
}  // namespace llvm

namespace primcache::cpu_internal {

// void fn(const int64_t* params, const void* src, void* dst, const float*
// scales, const float* const* operands, int64_t begin, int64_t end): walks
// work items [begin, end) (the specialized walk's numbering).
using generic_walk_function = void(const std::int64_t* params, const void* src, void* dst,
                                   const float* scales, const float* const* operands,
                                   std::int64_t begin, std::int64_t end);

// The padded dimensions a generic walk checks at most.
inline constexpr int gw_max_checks = 2;

// The slots of the parameter block (int64; floats in the low four bytes).
enum generic_walk_slot : int {
  gw_levels,            // odometer levels: the loops outside the split loop, then its chunks
  gw_split_extent,      // the split loop (stream: the innermost; tile: I)
  gw_split_src_stride,  // elements
  gw_split_dst_stride,
  gw_split_track,  // the tracked dimension's index step per iteration (0: another dim)
  gw_chunk,        // split-loop iterations per chunk (the last level counts chunks)
  gw_j_extent,     // tile: the J loop (dst stride 1)
  gw_j_src_stride,
  gw_j_track,
  gw_src_offset0,
  gw_dst_offset0,
  gw_scales,  // reorder_scales (functions built with scales)
  gw_alpha,   // eltwise: the algorithm's alpha and beta (floats)
  gw_beta,
  gw_post_op_count,  // eltwise
  // Padding: the dimensions not exact in the plan (0: none, the walk runs
  // with no checks), each checked as the specialized walk checks it: an
  // element whose logical index is below the dimension's real extent is
  // converted, one in [extent, dst's padded bound) is written as zero.
  gw_checks,
  gw_check_dims,                                    // gw_max_checks: the real extents
  gw_check_bound = gw_check_dims + gw_max_checks,   // dst's padded bounds
  gw_split_check = gw_check_bound + gw_max_checks,  // the split loop's index steps
  gw_j_check = gw_split_check + gw_max_checks,      // the J loop's
  // 1: a padded stream whose split loop (one chunk, unit strides, a power
  // of two no longer than a vector) continues in the innermost level (its
  // strides the split extent, no checked or tracked index along either):
  // the checked copy walks runs of work items along that level as one
  // dense stream, each vector holding several split loops.
  gw_batch = gw_j_check + gw_max_checks,
  // A stream whose split loop is joined (join_dst_runs, join_src_runs: one
  // side read or written in runs, the other contiguous): a gw_run_form, the
  // walk's work items taken in runs along the innermost level (whose steps
  // no tracked or checked index follows), each split loop whole vectors.
  gw_runs,
  // Per side: iteration j of the split loop is at element
  // (j >> shift) * stride + (j & mask) (a side without runs: shift 63,
  // mask INT64_MAX).
  gw_src_run_shift,
  gw_src_run_mask,
  gw_src_run_stride,
  gw_dst_run_shift,
  gw_dst_run_mask,
  gw_dst_run_stride,
  gw_level0,  // gw_level_slots per level, outer to inner
};

// gw_runs: how a vector of the joined split loop meets the runs.
enum class gw_run_form : std::int64_t {
  none,        // no joined loop
  whole,       // runs of a multiple of the vector's lanes: each vector in one
  src_halves,  // src runs of half a vector: two loads a vector
  dst_halves,  // dst runs of half a vector: two stores a vector
};
// Per level: extent, src stride, dst stride, tracked-index step, then the
// index step of each checked dimension.
inline constexpr int gw_level_slots = 4 + gw_max_checks;
inline constexpr int gw_max_levels = 16;
inline constexpr int gw_post_ops = gw_level0 + gw_level_slots * gw_max_levels;
// The post-op chain: generic_post_op_slots per post-op (generic_post_ops.hpp).
inline constexpr int gw_post_op_slots = generic_post_op_slots;
inline constexpr int gw_max_post_ops = generic_max_post_ops;
inline constexpr int gw_slot_count = gw_post_ops + gw_post_op_slots * gw_max_post_ops;
inline constexpr std::int64_t gw_binary_code = generic_binary_code;

// The vector shapes of an ISA's generic walks: the specialized defaults'
// (default_reorder_config, default_eltwise_config).
struct generic_walk_shape {
  int lanes;   // f32 per vector
  int unroll;  // vectors per iteration of a streaming loop
  int tile;    // edge of a transposed tile
  // Masked loads and stores of 8- and 16-bit elements are instructions
  // (avx512bw), not a branch per lane: clipped tiles may take the unrolled
  // form for every data type, not only for 32-bit ones.
  bool narrow_masks = false;
  // A transposing walk converts its src rows to dst's type before the
  // transpose (narrower elements move through cheaper permutes: avx512bw's
  // word permutes on half-width vectors), not after it (avx2, where 8- and
  // 16-bit shuffles take several instructions each).
  bool convert_before_transpose = false;
};
generic_walk_shape generic_walk_shape_for(cpu_isa isa) noexcept;

// What the lanes of a value hold, for a transform that reads more operands.
struct generic_walk_lanes {
  llvm::Value* params = nullptr;
  llvm::Value* operands = nullptr;     // the function's operands argument
  llvm::Value* dst_offset = nullptr;   // i64: element offset of lane 0 in dst, offset0 included
  llvm::Value* dst_step = nullptr;     // i64: between lanes
  llvm::Value* track_index = nullptr;  // i64: the tracked dimension's index at lane 0
  llvm::Value* track_step = nullptr;   // i64: between lanes
  int lanes = 1;
  // i64: the lanes, a prefix, whose operands may be read (a vector clipped
  // to its real part: the others are padding or past the loop, and their
  // results are thrown away); null: all of them.
  llvm::Value* live = nullptr;
};
using generic_walk_transform = std::function<llvm::Value*(llvm::IRBuilderBase&, llvm::Value* x,
                                                          const generic_walk_lanes& lanes)>;

// A walk's form: a stream, a transposing tile walk, or a stream whose split
// loop is joined (gw_runs; a function of its own, so that the stream's code
// stays as it was).
enum class generic_walk_form { stream, tile, runs };

// One generated walk function.
struct generic_walk_variant {
  data_type src_dt = data_type::f32;
  data_type dst_dt = data_type::f32;
  bool raw = false;  // a bit copy (src_dt == dst_dt, no scales, no transform)
  generic_walk_form form = generic_walk_form::stream;
  bool scales = false;  // multiplies by the scales gw_scales names
  // > 1: the dense loop steps by one vector of lanes * wide (instead of
  // `unroll` vectors), so a transform's run-time dispatch (the post-op
  // chain) runs once per wide vector; full vectors of lanes follow.
  int wide = 1;
  generic_walk_transform transform;  // on f32 values; may be empty
};

void emit_generic_walk(llvm::Module& m, const std::string& symbol, const generic_walk_shape& shape,
                       const generic_walk_variant& v);

// Loads n f32 lanes at base[index + e * step] (step a run-time i64: a splat
// for 0, one vector load for 1, single loads otherwise). With `live` (an
// i64 in [1, n]), only lanes e < live are read (a masked load or gather),
// the others are zero: lane 0's element is read in every case.
llvm::Value* emit_load_f32_lanes(llvm::IRBuilderBase& b, llvm::Value* base, llvm::Value* index,
                                 llvm::Value* step, int n, llvm::Value* live = nullptr);

// The data types the generic reorder converts between (all six), and its
// symbols: converting walks per pair and form, bit copies per element size.
std::string generic_reorder_symbol(data_type src, data_type dst, generic_walk_form form);
std::string generic_reorder_raw_symbol(std::size_t element_bytes, generic_walk_form form);

// Defines every generic reorder function in m, for `isa` (avx2 or above).
void generate_generic_reorder(cpu_isa isa, llvm::Module& m);

// "reorder_generic_<isa>".
std::string generic_reorder_name(cpu_isa isa);

// The passes of the generic walks (as the generic convolution's): the IR is
// emitted with its loops and vectors decided; the cleanup passes change no
// result (no fast-math flags).
inline constexpr compile_settings generic_walk_compile_settings{
    "function(mem2reg,early-cse<memssa>,instcombine,simplifycfg,loop(loop-rotate),"
    "loop-mssa(licm),early-cse<memssa>)",
    2, true};

}  // namespace primcache::cpu_internal
