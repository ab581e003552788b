// kernels/generic_matmul_kernel.hpp — the shape-generic matmul kernel built
// into the library (generic_matmul_generator.hpp), bound to one problem: its
// parameter block and blocking, with the interface of matmul_kernel that a
// primitive's execution uses (execute, config, scratchpad_bytes).
//
//   auto g = generic_matmul_kernel::create(p, specialized_cfg, isa);  // no compilation
//   if (!g) return sync_creation();   // g.why() says why this problem has none
//   g.value()->execute(args, scratchpad, pool);   // bit-identical to the specialized
//
// The register block is the generic kernel's (generic_matmul_shape); the
// thread grid is the specialized configuration's. create() declines
// (unimplemented) what it cannot run with results bit-identical to the
// specialized kernel, or at all: weights prepacked for another nr (their
// packed layout differs), more than gm_max_post_ops post-ops, a program
// without the built-in code.
//
// Thread-safety: immutable after creation; execute() may run on any number
// of threads at once, each with its own scratchpad. Exceptions: none from
// create(); execute() throws only what the pool rethrows.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/generic_matmul_generator.hpp"
#include "kernels/matmul_kernel.hpp"
#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

class generic_matmul_kernel {
 public:
  // `specialized`: the configuration the specialized kernel of `p` builds
  // with (its nr must match for prepacked weights; its grid is reused).
  static result<std::unique_ptr<generic_matmul_kernel>> create(const matmul_problem& p,
                                                               const matmul_config& specialized,
                                                               cpu_isa isa);

  const matmul_problem& problem() const noexcept { return problem_; }
  // The blocking it runs with: the generic register block, packing unless
  // the weights arrive prepacked.
  const matmul_config& config() const noexcept { return config_; }
  // The ISA of the built-in code it runs.
  cpu_isa isa() const noexcept { return isa_; }
  std::size_t scratchpad_bytes() const noexcept;
  void execute(const matmul_args& args, void* scratchpad, thread_pool& pool) const;

 private:
  generic_matmul_kernel(const matmul_problem& p, const matmul_config& c, cpu_isa isa,
                        generic_matmul_function* fn);

  matmul_problem problem_;
  matmul_config config_;
  cpu_isa isa_;
  generic_matmul_function* fn_;
  std::array<std::int64_t, gm_slot_count> params_{};
};

}  // namespace primcache::cpu_internal
