// kernels/reorder_kernel.hpp — the reorder kernel: copies a tensor from one
// memory descriptor to another (any two resolved layouts of the same dims),
// converting the element type and applying scales on the way.
//
// Semantics, element by element (logical index i):
//   same data type, no scales      dst[i] = src[i], bit for bit
//   otherwise                      v = to_f32(src[i]) * scale(i)
//                                  dst[i] = from_f32(v): f32 as is; bf16 and
//                                  f16 round to nearest even; s8, u8, s32
//                                  round to nearest even, then saturate
//                                  (NaN gives 0)
// Elements of dst's padding (blocked layouts whose padded dims exceed dims)
// are written as zeros: consumers rely on zero padding.
//
// Scales are a runtime argument (args.scales), not baked into the code: a
// kernel serves every scale value of its shape, and the key holds only the
// scale kind and dimension. `common` reads scales[0]; `per_dim` reads
// scales[i[scale_dim]], dims[scale_dim] values.
//
// The code walks the logical index space with every extent and stride baked
// in: the two layouts are split into loops (one per inner block level of
// either layout, plus the outer dims), sorted by dst stride, and loops that
// are contiguous in both layouts are merged. The innermost loop streams
// full-width vectors when the walk is unit-stride in both layouts (a memcpy
// call for plain copies); when dst is unit-stride along one loop and src
// along another (nchw <-> nhwc, ab <-> ba, blocking), it transposes tiles of
// tile x tile elements in registers with shuffles, a block at a time
// (the config's block_i / block_j; by default tile_blocks_for's): 4 KiB of
// src rows walked J tile by J tile where dst
// rows are the shorter (nchw -> nhwc), a run of dst rows walked I tile by I
// tile where src rows are (nhwc -> nchw), so that one side streams in long
// runs and the other stays within a few hundred KiB. When src and dst together exceed
// reorder_streaming_bytes (reorder_config.hpp) the full vectors go out with non-temporal stores
// where dst is aligned for them (a second copy of the loops otherwise). A
// transposing walk's threads each take one range of I (the default chunk).
// The walk, which the eltwise kernel shares, is kernels/layout_walk.hpp.
//
//   reorder_problem p{src_md, dst_md, reorder_scales::common, 0, /*nthr=*/2};
//   auto k = reorder_kernel::create(p, default_reorder_config(p, isa), isa);
//   if (!k) return k.why();
//   float scale = 0.5f;
//   k.value()->execute({src, dst, &scale}, nullptr, default_thread_pool());
//
// Thread-safety: a kernel is immutable after create()/load(); execute() may
// run from any number of threads at once. Exceptions: create() and load()
// report failures as values; execute() throws nothing of its own.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "jit/jit_module.hpp"
#include "kernels/config_space.hpp"
#include "kernels/layout_walk.hpp"
#include "primcache/base/result.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace primcache::cpu_internal {

struct reorder_problem {
  memory_desc src;
  memory_desc dst;
  reorder_scales scales = reorder_scales::none;
  int scale_dim = 0;  // per_dim only
  int nthr = 1;
  void write_key(key_writer& w) const;
};

struct reorder_config {
  // Edge of the square tile a transposing walk moves through registers:
  // 4, 8 or 16.
  int tile = 16;
  // Lanes of one vector in a streaming walk (power of two, 4..64).
  int vector_lanes = 16;
  // Vectors per iteration of a streaming walk: 1..8.
  int unroll = 1;
  // Elements of the innermost split loop in one work item (the unit the
  // threads share); rounded up to whole vectors or tiles. 0: the whole loop.
  std::int64_t chunk = 0;
  // Plain same-type contiguous runs are copied with memcpy.
  bool use_memcpy = true;
  // A transposing walk's blocks, multiples of tile (0: none; a streaming
  // walk has none). block_i: I elements per block, each block walked J tile
  // by J tile, so that src rows are read in runs of a block. block_j (takes
  // precedence): J elements per block, walked I tile by I tile, so that dst
  // rows are written in runs of a block. Neither: a row of tiles along the
  // whole J loop at a time. default_reorder_config takes tile_blocks_for's.
  std::int64_t block_i = 0;
  std::int64_t block_j = 0;
  void write_key(key_writer& w) const;
  friend bool operator==(const reorder_config&, const reorder_config&) = default;
};

reorder_config default_reorder_config(const reorder_problem& p, cpu_isa isa);
// The candidate space: tile edges, blocks and chunks for transposing walks; vector
// widths, unrolls, chunks and memcpy for streaming ones; each in the form
// create() uses (distinct candidates, distinct code). Every candidate
// validates.
enumerated_configs<reorder_config> reorder_config_candidates(const reorder_problem& p, cpu_isa isa);
// Valid configurations other than the default, each giving different code:
// what the kernel tests compile.
std::vector<reorder_config> reorder_config_variants(const reorder_problem& p, cpu_isa isa);

struct reorder_args {
  const void* src = nullptr;
  void* dst = nullptr;
  const float* scales = nullptr;  // required unless problem.scales is none
};

class reorder_kernel {
 public:
  static result<std::unique_ptr<reorder_kernel>> create(const reorder_problem& p,
                                                        const reorder_config& c, cpu_isa isa);
  static result<std::unique_ptr<reorder_kernel>> load(const reorder_problem& p,
                                                      const reorder_config& c,
                                                      std::span<const std::byte> object,
                                                      cpu_isa highest = effective_isa());

  const std::vector<std::byte>& object() const { return module_->object(); }
  // The ISA the object was compiled for (recorded in it).
  cpu_isa isa() const noexcept { return module_->isa(); }
  std::size_t scratchpad_bytes() const { return 0; }
  void execute(const reorder_args& args, void* scratchpad, thread_pool& pool) const;

  const reorder_problem& problem() const { return problem_; }
  const reorder_config& config() const { return config_; }

 private:
  using fn_type = walk_function;
  reorder_kernel() = default;
  static result<std::unique_ptr<reorder_kernel>> finish(const reorder_problem& p,
                                                        const reorder_config& c,
                                                        std::unique_ptr<jit_module> m,
                                                        std::int64_t work_items);

  reorder_problem problem_;
  reorder_config config_;
  std::unique_ptr<jit_module> module_;
  fn_type* fn_ = nullptr;
  std::int64_t work_items_ = 0;
};

// Plain loops over the logical index space; dst padding is zeroed.
// What create() checks of the problem alone (no configuration, no ISA, no
// compilation), the layout walk included; reorder_reference() needs the same.
result<bool> check_reorder_problem(const reorder_problem& p);

void reorder_reference(const reorder_problem& p, const reorder_args& args);

}  // namespace primcache::cpu_internal
