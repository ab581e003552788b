// kernels/layout_walk.hpp — the walk over two layouts of one logical
// tensor that the reorder and eltwise kernels share: a plan (the loops the
// two layouts split into, sorted by dst stride, merged where contiguous in
// both) and the IR of a function that walks it, converting, scaling and
// transforming each element on the way.
//
//   auto plan = plan_walk(src_md, dst_md, /*keep_dims=*/0);
//   if (!plan) return plan.why();
//   walk_codegen g;                       // f32 to f32, no scales
//   g.chunk = walk_chunk(plan.value(), 0, g.vector_lanes);
//   emit_walk_function(module, "copy", plan.value(), g);
//   // the function walks work items [0, plan.value().work_items(g.chunk))
//
// Thread-safety: plan_walk and walk_chunk are pure; emit_walk_function
// touches only the module it is given. Exceptions: plan_walk reports
// failures as values; the IR emission throws only what LLVM's allocation
// throws.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/result.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace llvm {
class IRBuilderBase;
class Module;
class Value;
}  // namespace llvm

namespace primcache::cpu_internal {

// How a walk scales each element (a run-time argument of the function):
// not at all, by scales[0], or by scales[index along scale_dim].
enum class reorder_scales : std::uint8_t { none, common, per_dim };

// One loop of a walk over two layouts of the same logical tensor.
struct walk_loop {
  std::int64_t extent = 1;
  std::int64_t src_stride = 0;  // elements
  std::int64_t dst_stride = 0;
  int dim = -1;           // logical dimension; -1 for loops merged across dims
  std::int64_t mult = 0;  // logical index step of one iteration
  // > 0: the loop walks blocks of `period` elements of dim `dim` one after
  // another (batch_padded_block); the logical index at iteration j is then
  // (j % period) * mult, plus the outer loops' part.
  std::int64_t period = 0;
  // > 0: src is read in runs of `src_run` iterations (join_dst_runs): the
  // src offset at iteration j is (j / src_run) * src_run_stride +
  // (j % src_run) * src_stride.
  std::int64_t src_run = 0;
  std::int64_t src_run_stride = 0;
  // The same for dst (join_src_runs): written in runs of `dst_run`.
  std::int64_t dst_run = 0;
  std::int64_t dst_run_stride = 0;
};

struct walk_plan {
  enum class inner_kind : std::uint8_t { stream, tile };
  std::vector<walk_loop> loops;  // outer to inner; never empty
  int ndims = 0;
  dims_array dims{};
  dims_array bound{};                   // dst padded dims: indices in [dims, bound) are dst padding
  std::array<bool, max_ndims> exact{};  // the loops of this dim cover exactly [0, dims)
  std::array<bool, max_ndims> known{};  // no loop of this dim was merged with another dim
  std::int64_t src_offset0 = 0;
  std::int64_t dst_offset0 = 0;
  // stream: loops.back() is walked by vectors; tile: the last two loops are
  // I (src stride 1) then J (dst stride 1), walked by square tiles.
  inner_kind inner = inner_kind::stream;
  std::size_t split_loop() const {
    return inner == inner_kind::tile ? loops.size() - 2 : loops.size() - 1;
  }
  // Work items for a chunk (see reorder_config::chunk, already rounded).
  std::int64_t work_items(std::int64_t chunk) const;
};

// Fails (unimplemented) when a dimension's blocks in the two layouts do not
// nest (each block size dividing the next), (invalid_arguments) when dst's
// strides overlap. Dims in keep_dims (bit d) are never merged away, so their
// logical index is known at every element.
result<walk_plan> plan_walk(const memory_desc& src, const memory_desc& dst, unsigned keep_dims);

// The specialized walk's form of a stream whose innermost loop is the
// innermost block of a padded dimension (unit strides in both layouts, a
// power-of-two extent, the dimension not in keep_dims) and whose next loop
// out continues it in both layouts over dimensions it need not track: an
// eltwise on nChw8c with 20 channels (8 channels, then the pixels), a
// reorder between two such layouts. The two loops become one of `period`
// blocks, so that vectors run across blocks: whole where the work item's
// block is real, masked by each lane's place in its block where it is
// padded, instead of element by element. Other plans come back as they are.
// The generic walks take plan_walk's plan (a config's chunk, counted along
// the batched loop, is rounded to theirs by walk_chunk: mostly their whole
// split loop); the elements are the same, each computed alone.
walk_plan batch_padded_block(walk_plan plan, unsigned keep_dims);

// The specialized reorder's form of a stream whose innermost loop is a
// short block of one dimension (unit strides in both layouts, a power-of-two
// extent) that dst continues in the next loop out (the same dimension, dst
// stride the block's extent) and src does not: nChw8c to nChw16c (8
// channels, then the other 8 of dst's block, 8 x H x W further in src). The
// two loops become one of dst-contiguous iterations read from src in runs
// (walk_loop::src_run), so that a vector spans them (two loads, one
// store) and the work items, each of which costs the odometer's step, are
// fewer. Up to 64 iterations; other plans come back as they are.
walk_plan join_dst_runs(walk_plan plan);

// The other way round: a short block that src continues in some loop further
// out and dst does not (nChw16c to nChw8c: 8 channels, then the other 8 of
// src's block, which dst keeps 8 x H x W further) becomes one loop of
// src-contiguous iterations written to dst in runs (walk_loop::dst_run): a
// vector is one load and a store per run. The continuing loop need not be
// the next one out (by dst stride it comes after the pixels): it moves in.
walk_plan join_src_runs(walk_plan plan);

// Both joins (join_dst_runs, then join_src_runs): a short block that one
// layout continues and the other does not, whichever of them continues it.
walk_plan join_runs(walk_plan plan);

// What the lanes of a value hold, for a transform that loads more operands.
struct walk_lanes {
  llvm::Value* operands = nullptr;    // the function's `const float* const*` argument
  llvm::Value* dst_offset = nullptr;  // i64 element offset of lane 0 in dst, offset0 included
  std::int64_t dst_step = 0;          // between lanes
  std::array<llvm::Value*, max_ndims> index{};  // i64 logical index of lane 0; null if unknown
  std::array<std::int64_t, max_ndims> index_step{};
  // The lanes (an i1 vector) whose operands may be read; null: every lane.
  llvm::Value* live = nullptr;
};

using walk_transform =
    std::function<llvm::Value*(llvm::IRBuilderBase&, llvm::Value* x, const walk_lanes& lanes)>;

struct walk_codegen {
  data_type src_dt = data_type::f32;
  data_type dst_dt = data_type::f32;
  reorder_scales scales = reorder_scales::none;
  int scale_dim = 0;
  int tile = 16;
  int vector_lanes = 16;
  int unroll = 1;
  std::int64_t chunk = 0;  // rounded: a multiple of tile (tile walk) or vector_lanes
  bool use_memcpy = true;
  // Tile walk: I elements per block (> tile: each block is walked J tile by
  // J tile, so that src rows are read in runs of a block; otherwise a row of
  // tiles along the whole J loop at a time).
  std::int64_t tile_block = 0;
  // Tile walk: J elements per block (> tile: takes precedence; the I range
  // is walked I tile by I tile inside each block, so that dst rows are
  // written in runs of a block).
  std::int64_t tile_block_j = 0;
  // Full vectors written to consecutive dst elements go out with
  // non-temporal stores where aligned (for outputs that do not stay in
  // cache); the function ends with a store fence.
  bool nontemporal = false;
  walk_transform transform;  // on f32 values (scalar or vector) after scaling; may be empty
};

// Defines `void symbol(const void* src, void* dst, const float* scales,
// const float* const* operands, int64_t begin, int64_t end)`, which walks
// work items [begin, end).
void emit_walk_function(llvm::Module& m, const std::string& symbol, const walk_plan& plan,
                        const walk_codegen& g);

// The chunk a config asks for, rounded for the plan: 0 or beyond the split
// loop gives the whole loop.
std::int64_t walk_chunk(const walk_plan& plan, std::int64_t chunk, int unit);

// What every walk needs of its tensors: resolved layouts of the same dims,
// and at least one thread. Failures (invalid_arguments) name `kernel`.
result<bool> validate_walk_tensors(std::string_view kernel, const memory_desc& src,
                                   const memory_desc& dst, int nthr);

// A streaming walk's vector shape: lanes a power of two in [4, 64], unroll
// in [1, 8], a non-negative chunk. Failures (invalid_arguments) name `kernel`.
result<bool> validate_walk_vectors(std::string_view kernel, int vector_lanes, int unroll,
                                   std::int64_t chunk);

// The function emit_walk_function defines.
using walk_function = void(const void* src, void* dst, const float* scales,
                           const float* const* operands, std::int64_t begin, std::int64_t end);

// Runs work items [0, work_items) of a walk function, split evenly over up
// to nthr threads of the pool; on the calling thread alone when one thread
// (or one item) is all there is.
void run_walk(walk_function* fn, const void* src, void* dst, const float* scales,
              const float* const* operands, std::int64_t work_items, int nthr, thread_pool& pool);

}  // namespace primcache::cpu_internal
