// kernels/matmul_kernel.hpp — the f32 matmul kernel of the CPU backend:
// dst[b] = post_ops(src[b] x weights[b] + bias), 2-D or batched 3-D, with
// every shape, stride and blocking factor baked into the generated code.
//
// The generated code is a cache-blocked loop nest around an MR x NR
// register-blocked micro-kernel (broadcast a src element, FMA it into NR/W
// vector accumulators of one row). Panels of the weights are packed into
// the caller's scratchpad when that pays (or when the weights are not dense
// along n); bias and post-ops are applied to the accumulators before the
// only store of the last K block. docs/kernels-matmul.md has the details.
//
//   matmul_problem p = matmul_problem::dense(1, 128, 768, 3072);
//   p.with_bias = true;
//   p.nthr = pool.size();
//   auto cfg = default_matmul_config(p, effective_isa());
//   auto k = matmul_kernel::create(p, cfg, effective_isa());
//   if (!k) return k.why();
//   std::vector<std::byte> scratch(k.value()->scratchpad_bytes() + 64);  // then align to 64
//   k.value()->execute({src, wei, bias, dst, nullptr}, aligned_scratch, pool);
//
// Thread-safety: a kernel is immutable after creation; execute() may run on
// any number of threads at once, each with its own scratchpad. create() and
// load() may run concurrently. Exceptions: none escape create() and load()
// (failures are values); execute() throws only what the pool rethrows.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "jit/jit_module.hpp"
#include "kernels/config_space.hpp"
#include "kernels/post_ops.hpp"
#include "primcache/base/result.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/thread_pool.hpp"

namespace primcache::cpu_internal {

// Shapes and strides in elements. Strides may be any non-negative values
// for src and weights (transposed weights: k stride 1, n stride K; weights
// shared by every batch: batch stride 0); dst must be dense along n (n
// stride 1) with rows and batches that do not overlap.
struct matmul_problem {
  std::int64_t batch = 1;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::array<std::int64_t, 3> src_strides{};  // batch, m, k
  std::array<std::int64_t, 3> wei_strides{};  // batch, k, n
  std::array<std::int64_t, 3> dst_strides{};  // batch, m, n
  // One f32 per column n (shape 1xN or 1x1xN), dense.
  bool with_bias = false;
  // Binary operands: broadcast none has dst's shape and strides,
  // per_channel one value per column n (dense), scalar one value.
  post_op_chain post_ops;
  int nthr = 1;
  // The weights arrive prepacked (matmul_pack_weights with the kernel's nr):
  // per weights batch, ceil(N / nr) column blocks of K rows of nr floats,
  // zero-padded past N. wei_strides still describe the unpacked weights
  // (what the pack function reads; batch stride 0: one packed copy for every
  // batch). The configuration must not pack (pack_b false).
  bool prepacked_weights = false;

  // Row-major src (batch, m, k), weights (batch, k, n), dst (batch, m, n).
  static matmul_problem dense(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k);

  void write_key(key_writer& w) const;
};

// The blocking of the loop nest. Valid values depend on the ISA (nr is a
// multiple of its vector width, mr * nr / width + nr / width + 1 vector
// registers at most); create() refuses others.
struct matmul_config {
  int mr = 8;              // register block: rows of dst per micro-kernel
  int nr = 48;             // register block: columns (a multiple of the vector width)
  std::int64_t kc = 256;   // K cache block: the depth of one micro-kernel pass
  std::int64_t mc = 512;   // M cache block (a multiple of mr): rows per B-panel sweep
  std::int64_t nc = 1536;  // N cache block (a multiple of nr): columns packed at once
  int k_unroll = 4;        // copies of the K-loop body per iteration
  bool pack_b = true;      // pack kc x nc weight panels into the scratchpad
  bool n_inner = false;    // innermost loop over nr blocks (else over mr blocks)
  int thr_m = 1;           // thread grid over batch x M blocks ...
  int thr_n = 1;           // ... times N blocks; thr_m * thr_n <= problem.nthr

  void write_key(key_writer& w) const;
  friend bool operator==(const matmul_config&, const matmul_config&) = default;
};

matmul_config default_matmul_config(const matmul_problem& p, cpu_isa isa);
// The candidate space (matmul_config.cpp has the parameters): every
// register tile the ISA's registers hold, times cache blocks, K unroll,
// packing, loop order and thread grids. Every candidate validates.
enumerated_configs<matmul_config> matmul_config_candidates(const matmul_problem& p, cpu_isa isa);
// A few valid configurations other than the default (at least three), each
// different code: what the kernel tests compile.
std::vector<matmul_config> matmul_config_variants(const matmul_problem& p, cpu_isa isa);

// Every pointer is a tensor's element 0 (the primitive applies the
// descriptors' offset0; the problem has none): src, weights, bias and dst
// from there by the problem's strides, each binary operand too (a `none`
// one by dst's strides).
struct matmul_args {
  const float* src = nullptr;
  const float* weights = nullptr;
  const float* bias = nullptr;  // with_bias only
  float* dst = nullptr;
  // Indexed by binary_add_op::arg_index.
  const float* const* binary_operands = nullptr;
};

class matmul_kernel {
 public:
  // Fails with invalid_arguments for malformed problems or configurations
  // (non-positive sizes, negative or overlapping strides, overflow) and with
  // unimplemented for valid ones this kernel does not handle (dst not dense
  // along n, an ISA below avx2 or above the host's).
  static result<std::unique_ptr<matmul_kernel>> create(const matmul_problem& p,
                                                       const matmul_config& cfg, cpu_isa isa);
  // The same kernel from object code create() produced for this problem and
  // configuration (no compilation). The object must match them: nothing in
  // its bytes says which problem it was built for. Refuses (unimplemented)
  // an object compiled above `highest` (jit_module::load).
  static result<std::unique_ptr<matmul_kernel>> load(const matmul_problem& p,
                                                     const matmul_config& cfg,
                                                     std::span<const std::byte> object,
                                                     cpu_isa highest = effective_isa());

  const std::vector<std::byte>& object() const noexcept { return module_->object(); }
  const matmul_problem& problem() const noexcept { return problem_; }
  const matmul_config& config() const noexcept { return config_; }
  // The ISA the object was compiled for (recorded in it).
  cpu_isa isa() const noexcept { return module_->isa(); }
  // Bytes of 64-byte aligned scratch one execute() needs; 0 without packing.
  std::size_t scratchpad_bytes() const noexcept;
  void execute(const matmul_args& args, void* scratchpad, thread_pool& pool) const;

  // One call of the generated function: batch b, row blocks [mb0, mb1) of
  // mr rows, column blocks [nb0, nb1) of nr columns, packing into `pack`.
  using function = void(const float* src, const float* wei, const float* bias, float* dst,
                        const float* const* binary, float* pack, std::int64_t b, std::int64_t mb0,
                        std::int64_t mb1, std::int64_t nb0, std::int64_t nb1);

 private:
  matmul_kernel(const matmul_problem& p, const matmul_config& cfg,
                std::unique_ptr<jit_module> module, function* fn);
  static result<std::unique_ptr<matmul_kernel>> finish(const matmul_problem& p,
                                                       const matmul_config& cfg,
                                                       result<std::unique_ptr<jit_module>> module);

  matmul_problem problem_;
  matmul_config config_;
  std::unique_ptr<jit_module> module_;
  function* fn_;
};

// What create() checks of the problem alone (no configuration, no ISA, no
// compilation), so that a primitive descriptor accepts only problems the
// kernel builds. With `for_reference`: what matmul_reference() needs (dst may
// have any strides whose elements do not overlap).
result<bool> check_matmul_problem(const matmul_problem& p, bool for_reference = false);

// Plain loops in double precision, then bias and post-ops as the reference
// semantics of post_ops.hpp define them. Reads unpacked weights (the
// problem's prepacked_weights is ignored).
void matmul_reference(const matmul_problem& p, const matmul_args& args);

// ---- prepacked weights ----
// The packed layout depends only on the weights (K, N, their strides,
// whether batches share them) and the register block's nr: every kernel of
// those, whatever its M, blocking or post-ops, reads the same packed bytes.
struct matmul_packing {
  std::int64_t k = 0, n = 0;
  std::array<std::int64_t, 3> wei_strides{};  // of the unpacked weights
  std::int64_t batches = 1;                   // 1 when batches share the weights
  int nr = 0;

  static matmul_packing of(const matmul_problem& p, const matmul_config& c);
  std::int64_t column_blocks() const noexcept { return (n + nr - 1) / nr; }
  // Floats between two packed batches (0 when batches share the weights).
  std::int64_t batch_stride() const noexcept { return batches > 1 ? column_blocks() * k * nr : 0; }
  std::size_t bytes() const noexcept;
  // What identifies the packed bytes besides the weights' identity.
  void write_key(key_writer& w) const;
};

// Packs `weights` (laid out as the packing's wei_strides say) into `packed`
// (packing.bytes(), 4-byte aligned), in parallel on `pool` over column
// blocks. Plain C++: packing runs once per constant weights, and copying
// nr-float rows is bound by memory, not by code (docs/kernels-matmul.md).
void matmul_pack_weights(const matmul_packing& packing, const float* weights, float* packed,
                         thread_pool& pool);

}  // namespace primcache::cpu_internal
