// kernels/generic_eltwise_kernel.hpp — the shape-generic eltwise built into
// the library (generic_eltwise_generator.hpp), bound to one problem: the
// specialized kernel's walk plan, chunk and work items, the algorithm's
// constants and the post-op chain in a parameter block, with the interface
// of eltwise_kernel that a primitive's execution uses.
//
//   auto g = generic_eltwise_kernel::create(p, specialized_cfg, isa);  // no compilation
//   if (!g) return sync_creation();
//   g.value()->execute(args, nullptr, pool);   // bit-identical to the specialized
//
// Layouts with padding (blocked dims not a multiple of the block) are
// walked as the specialized kernel walks them, dst's padding written as
// zero. create() declines (unimplemented): more than gw_max_checks padded
// dimensions, walks with more loops than the block holds, more than gw_max_post_ops
// post-ops, and programs without the built-in code (or an ISA below avx2).
//
// Thread-safety: immutable after creation; execute() may run on any number
// of threads at once. Exceptions: none from create(); execute() throws only
// what the pool rethrows.
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/eltwise_kernel.hpp"
#include "kernels/generic_reorder_kernel.hpp"
#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

class generic_eltwise_kernel {
 public:
  static result<std::unique_ptr<generic_eltwise_kernel>> create(const eltwise_problem& p,
                                                                const eltwise_config& specialized,
                                                                cpu_isa isa);

  const eltwise_problem& problem() const noexcept { return problem_; }
  cpu_isa isa() const noexcept { return isa_; }
  std::size_t scratchpad_bytes() const noexcept { return 0; }
  void execute(const eltwise_args& args, void* scratchpad, thread_pool& pool) const;

 private:
  generic_eltwise_kernel() = default;

  eltwise_problem problem_;
  cpu_isa isa_ = cpu_isa::avx2;
  generic_walk_function* fn_ = nullptr;
  std::int64_t work_items_ = 0;
  generic_walk_params params_{};
};

}  // namespace primcache::cpu_internal
