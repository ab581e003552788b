// kernels/eltwise_kernel.hpp — the eltwise forward kernel: dst = chain(f(src))
// element by element, f one of relu, gelu (erf and tanh), tanh, sigmoid,
// exp, linear, clip (eltwise_op, from post_ops.hpp), then an optional
// post-op chain.
//
// src and dst share one layout (padded dims, strides, inner blocks; offset0
// may differ) and are f32 or bf16 each (bf16 values are computed in f32 and
// rounded to nearest even on the store). Elements of dst's padding are
// written as zeros, not f(0): sigmoid(0) is 0.5, and consumers rely on zero
// padding. Binary post-op operands are f32: `none` is laid out like dst
// (the operand of dst element at physical offset p, offset0 included, is
// operand[p]); `per_channel` holds one value per index of dimension 1;
// `scalar` one value.
//
// The code is the layout walk of the reorder kernel (layout_walk.hpp) over
// identical layouts: dimensions without padding merge into one flat loop
// over the physical buffer, streamed by full-width vectors (unrolled) and
// split across threads in chunks; a padded blocked dimension keeps its
// loops, and vectors that reach into the padding store zeros there.
//
//   eltwise_problem p{src_md, dst_md, {eltwise_alg::gelu_erf}, {}, /*nthr=*/2};
//   auto k = eltwise_kernel::create(p, default_eltwise_config(p, isa), isa);
//   if (!k) return k.why();
//   k.value()->execute({src, dst, nullptr}, nullptr, default_thread_pool());
//
// Thread-safety: a kernel is immutable after create()/load(); execute() may
// run from any number of threads at once. Exceptions: create() and load()
// report failures as values; execute() throws nothing of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "jit/jit_module.hpp"
#include "kernels/config_space.hpp"
#include "kernels/layout_walk.hpp"
#include "kernels/post_ops.hpp"
#include "primcache/base/result.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace primcache::cpu_internal {

struct eltwise_problem {
  memory_desc src;
  memory_desc dst;
  eltwise_op op;
  post_op_chain post_ops;
  int nthr = 1;
  void write_key(key_writer& w) const;
};

struct eltwise_config {
  int vector_lanes = 16;   // power of two, 4..64
  int unroll = 2;          // vectors per loop iteration, 1..8
  std::int64_t chunk = 0;  // elements of the innermost loop per work item; 0: all
  void write_key(key_writer& w) const;
  friend bool operator==(const eltwise_config&, const eltwise_config&) = default;
};

eltwise_config default_eltwise_config(const eltwise_problem& p, cpu_isa isa);
// The candidate space: vector widths x unrolls x work-item chunks, each in
// the form create() uses (distinct candidates, distinct code). Every
// candidate validates.
enumerated_configs<eltwise_config> eltwise_config_candidates(const eltwise_problem& p, cpu_isa isa);
// A few valid configurations other than the default, each different code:
// what the kernel tests compile.
std::vector<eltwise_config> eltwise_config_variants(const eltwise_problem& p, cpu_isa isa);

struct eltwise_args {
  const void* src = nullptr;
  void* dst = nullptr;
  const float* const* binary_operands = nullptr;  // indexed by binary_add_op::arg_index
};

class eltwise_kernel {
 public:
  static result<std::unique_ptr<eltwise_kernel>> create(const eltwise_problem& p,
                                                        const eltwise_config& c, cpu_isa isa);
  static result<std::unique_ptr<eltwise_kernel>> load(const eltwise_problem& p,
                                                      const eltwise_config& c,
                                                      std::span<const std::byte> object,
                                                      cpu_isa highest = effective_isa());

  const std::vector<std::byte>& object() const { return module_->object(); }
  // The ISA the object was compiled for (recorded in it).
  cpu_isa isa() const noexcept { return module_->isa(); }
  std::size_t scratchpad_bytes() const { return 0; }
  void execute(const eltwise_args& args, void* scratchpad, thread_pool& pool) const;

  const eltwise_problem& problem() const { return problem_; }
  const eltwise_config& config() const { return config_; }

 private:
  using fn_type = walk_function;
  eltwise_kernel() = default;
  // The kernel around a linked module: looks its entry point up.
  static result<std::unique_ptr<eltwise_kernel>> finish(const eltwise_problem& p,
                                                        const eltwise_config& c,
                                                        std::unique_ptr<jit_module> m,
                                                        std::int64_t work_items);

  eltwise_problem problem_;
  eltwise_config config_;
  std::unique_ptr<jit_module> module_;
  fn_type* fn_ = nullptr;
  std::int64_t work_items_ = 0;
};

// Plain loops: f, then the chain, per logical element; dst padding zeroed.
// What create() checks of the problem alone (no configuration, no ISA, no
// compilation); eltwise_reference() needs the same.
result<bool> check_eltwise_problem(const eltwise_problem& p);

void eltwise_reference(const eltwise_problem& p, const eltwise_args& args);

}  // namespace primcache::cpu_internal
