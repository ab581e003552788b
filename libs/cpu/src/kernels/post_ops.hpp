// kernels/post_ops.hpp — the post-operations every CPU kernel can fuse into
// its epilogue, and the IR that applies them.
//
// A primitive's attributes carry a chain of post-ops (eltwise functions,
// binary additions of another tensor); the runtime translates the chain into
// post_op values and each kernel applies it to the accumulator vectors it is
// about to store, so nothing is written twice.
//
//   llvm::Value* acc = ...;  // <16 x float> of dst values
//   acc = emit_post_ops(b, acc, problem.post_ops, [&](int i, const binary_add_op& op) {
//     return load_binary_operand(i, op);   // the kernel knows the addressing
//   });
//
// Thread-safety: pure functions on one kernel's builder. Exceptions: none.
#pragma once

#include <cstdint>
#include <vector>

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/IRBuilder.h>

#include "primcache/keyhash/key.hpp"

namespace primcache::cpu_internal {

// f(x), with alpha/beta as in the public API:
//   relu      x > 0 ? x : alpha * x
//   gelu_erf  0.5x(1 + erf(x / sqrt 2))        gelu_tanh  the tanh approximation
//   tanh, sigmoid, exp
//   linear    alpha * x + beta
//   clip      min(max(x, alpha), beta)
enum class eltwise_alg : std::uint8_t {
  relu,
  gelu_erf,
  gelu_tanh,
  tanh,
  sigmoid,
  exp,
  linear,
  clip
};

struct eltwise_op {
  eltwise_alg alg = eltwise_alg::relu;
  float alpha = 0.f;
  float beta = 0.f;
  // Applied after f (the post-op form scale * f(x)); 1 elsewhere.
  float scale = 1.f;
  friend bool operator==(const eltwise_op&, const eltwise_op&) = default;
};

// dst += operand. The operand is an f32 tensor; `broadcast` says which of
// dst's elements share an operand element. A kernel gets a pointer per
// operand: a per_channel or scalar operand's element 0 (the primitive
// applies its offset0), a `none` operand as the kernel's dst pointer is
// (see each kernel's args).
enum class binary_broadcast : std::uint8_t {
  none,         // same shape as dst, dense in dst's layout
  per_channel,  // one value per output channel (matmul: per column n; conv: per oc)
  scalar,       // one value for all
};

struct binary_add_op {
  int arg_index = 0;  // index into the kernel's binary operand pointer array
  binary_broadcast broadcast = binary_broadcast::none;
  friend bool operator==(const binary_add_op&, const binary_add_op&) = default;
};

struct post_op {
  enum class kind : std::uint8_t { eltwise, binary_add } what = kind::eltwise;
  eltwise_op eltwise;
  binary_add_op binary;
  friend bool operator==(const post_op&, const post_op&) = default;
};

using post_op_chain = std::vector<post_op>;

// Writes the chain into a key (floats by bit pattern).
void write_key(key_writer& w, const post_op_chain& chain);

// f(x) for x of type float or <N x float>.
llvm::Value* emit_eltwise(llvm::IRBuilderBase& b, llvm::Value* x, const eltwise_op& op);

// Returns the operand value (same type as x) of binary post-op number
// `index` in the chain, for the elements x holds.
using binary_operand_loader = llvm::function_ref<llvm::Value*(int index, const binary_add_op&)>;

// Applies the chain in order to x (float or <N x float>).
llvm::Value* emit_post_ops(llvm::IRBuilderBase& b, llvm::Value* x, const post_op_chain& chain,
                           binary_operand_loader load_operand);

// The chain applied to `count` vectors of one type, `group` of them at a
// time joined into one vector `group` times as wide (group a power of two;
// fewer at the end), so that the code generator emits each step for those
// vectors one after another: the chains of independent vectors interleave,
// where one vector's whole chain after another's leaves the core waiting
// on each step's latency. Group by group, vector(k) gives vector k (its
// code is emitted then), load_operand(i, op, k) binary post-op i's operand
// for it, and result(k, y) takes its result, so that no more than a group
// is live at once.
using post_op_vector = llvm::function_ref<llvm::Value*(std::size_t k)>;
using binary_operand_loader_at =
    llvm::function_ref<llvm::Value*(int index, const binary_add_op&, std::size_t k)>;
using post_op_result = llvm::function_ref<void(std::size_t k, llvm::Value* y)>;
void emit_post_ops(llvm::IRBuilderBase& b, std::size_t count, const post_op_chain& chain, int group,
                   post_op_vector vector, binary_operand_loader_at load_operand,
                   post_op_result result);

// Whether `alg`'s code is a long dependency chain a vector (the gelus,
// tanh, sigmoid, exp; gelu_erf is about a hundred instructions, most of
// them dependent): code that runs several vectors' chains side by side
// keeps the FMA units busy where one chain after the other waits on
// latency.
bool is_long_function(eltwise_alg alg) noexcept;
// Whether the chain holds an eltwise post-op with a long function.
bool has_long_function(const post_op_chain& chain) noexcept;

// How many vectors an epilogue should join for the chain (above), on an ISA
// of `vector_bits`-wide registers: 4 at 512 bits (32 registers), 2 below
// (16), for a chain with a long function (is_long_function); 1 for the
// rest (docs/PERFORMANCE.md, "Interleaved epilogues").
int post_op_group(const post_op_chain& chain, unsigned vector_bits);

// Reference semantics (scalar, plain C++), for reference implementations
// and tests. `operands[i]` is the operand value of binary post-op i.
float apply_post_ops_reference(float x, const post_op_chain& chain, const float* operands);
float eltwise_reference(float x, const eltwise_op& op);

}  // namespace primcache::cpu_internal
