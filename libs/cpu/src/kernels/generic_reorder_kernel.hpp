// kernels/generic_reorder_kernel.hpp — the shape-generic reorder built into
// the library (generic_reorder_generator.hpp), bound to one problem: a walk
// plan (the specialized kernel's joined loops where its vectors fit them,
// else plan_walk's) and the specialized kernel's chunk written into a
// parameter block, with the interface of reorder_kernel that a primitive's
// execution uses (execute, scratchpad_bytes).
//
//   auto g = generic_reorder_kernel::create(p, specialized_cfg, isa);  // no compilation
//   if (!g) return sync_creation();   // g.why() says why this problem has none
//   g.value()->execute(args, nullptr, pool);   // bit-identical to the specialized
//
// It takes every data type pair and scale kind the specialized kernel does.
// Layouts with padding (dimensions not exact in the walk plan: blocked dims
// not a multiple of the block) are walked as the specialized kernel walks
// them: real elements converted, dst's padding written as zero. create()
// declines (unimplemented): more than gw_max_checks padded dimensions, a
// transposing walk whose I and J loops both step one padded dimension (its
// straddling tiles would not clip to a rectangle), walks with more loops
// than the block holds, and programs without the built-in code (or an ISA
// below avx2).
//
// Thread-safety: immutable after creation; execute() may run on any number
// of threads at once. Exceptions: none from create(); execute() throws only
// what the pool rethrows.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/generic_reorder_generator.hpp"
#include "kernels/layout_walk.hpp"
#include "kernels/reorder_kernel.hpp"
#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

using generic_walk_params = std::array<std::int64_t, gw_slot_count>;

// The block of a plan walked in chunks of `chunk` (walk_chunk's rounding)
// with the logical index of `tracked_dim` (-1: none; a dimension the plan
// kept) available to scales and operands. A split loop joined by
// join_dst_runs or join_src_runs is taken for vectors of `run_lanes` (the
// code's; 0: none): one chunk, a multiple of run_lanes, runs of a multiple
// of it or of half of it, and no tracked or padded index stepping along the
// next loop out. Fails (unimplemented) for plans with more than
// gw_max_checks padded dimensions, a transposing walk whose I and J loops
// both step a padded dimension, too many loops, or a joined loop the
// vectors do not fit; `kernel` names the caller.
result<generic_walk_params> make_generic_walk_params(const char* kernel, const walk_plan& plan,
                                                     std::int64_t chunk, int tracked_dim,
                                                     int run_lanes = 0);

class generic_reorder_kernel {
 public:
  // `specialized`: the configuration the specialized kernel of `p` builds
  // with (its chunk, hence its work items, are reused).
  static result<std::unique_ptr<generic_reorder_kernel>> create(const reorder_problem& p,
                                                                const reorder_config& specialized,
                                                                cpu_isa isa);

  const reorder_problem& problem() const noexcept { return problem_; }
  // The ISA of the built-in code it runs.
  cpu_isa isa() const noexcept { return isa_; }
  // The parameter block its walk runs with.
  const generic_walk_params& params() const noexcept { return params_; }
  std::size_t scratchpad_bytes() const noexcept { return 0; }
  void execute(const reorder_args& args, void* scratchpad, thread_pool& pool) const;

 private:
  generic_reorder_kernel() = default;

  reorder_problem problem_;
  cpu_isa isa_ = cpu_isa::avx2;
  generic_walk_function* fn_ = nullptr;
  std::int64_t work_items_ = 0;
  generic_walk_params params_{};
};

// Runs work items [0, work_items) of a generic walk as run_walk does.
void run_generic_walk(generic_walk_function* fn, const generic_walk_params& params, const void* src,
                      void* dst, const float* scales, const float* const* operands,
                      std::int64_t work_items, int nthr, thread_pool& pool);

}  // namespace primcache::cpu_internal
