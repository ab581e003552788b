// kernels/generic_eltwise_generator.hpp — the LLVM IR of the shape-generic
// eltwise kernel: the generic layout walk (generic_reorder_generator.hpp)
// over src and dst of one layout, whose transform applies the algorithm and
// then the post-op chain read from the parameter block. Compiled once, when
// the library is built (tools/generic_kernels_aot.cpp), and run by tiered
// eltwise primitives until their specialized kernel is installed.
//
//   compile_object(generic_eltwise_name(isa), isa, generic_walk_compile_settings,
//                  [&](llvm::Module& m) { generate_generic_eltwise(isa, m); });
//
// One function per algorithm form and (src, dst) data type pair (f32,
// bf16): the algorithm is the specialized kernel's emit_eltwise with its
// constants (relu with alpha 0, the functions without parameters) or its IR
// with alpha and beta read at run time (relu with another alpha, linear,
// clip). Each post-op is picked at run time and applies the IR
// emit_post_ops emits for it (as the generic matmul's), so results equal
// the specialized kernel's bit for bit.
//
// Thread-safety: touches only the module it is given. Exceptions: what
// LLVM's allocation throws.
#pragma once

#include <string>

#include "kernels/post_ops.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/tensor/data_type.hpp"

namespace llvm {
class Module;
}  // namespace llvm

namespace primcache::cpu_internal {

// The algorithm forms: eltwise_alg, with relu split by alpha.
enum class generic_eltwise_form : int {
  relu_zero,   // relu, alpha 0
  relu_alpha,  // relu, alpha read at run time
  gelu_erf,
  gelu_tanh,
  tanh,
  sigmoid,
  exp,
  linear,
  clip,
};
inline constexpr int generic_eltwise_form_count = 9;
generic_eltwise_form generic_eltwise_form_of(const eltwise_op& op) noexcept;

// The function (a generic_walk_function) of a form and data types.
std::string generic_eltwise_symbol(generic_eltwise_form form, data_type src, data_type dst);

// Defines every generic eltwise function in m, for `isa` (avx2 or above).
void generate_generic_eltwise(cpu_isa isa, llvm::Module& m);

// "eltwise_generic_<isa>".
std::string generic_eltwise_name(cpu_isa isa);

}  // namespace primcache::cpu_internal
