// kernels/eltwise_generator.hpp — the LLVM IR of the eltwise kernel: the
// layout walk (layout_walk.hpp) with a transform that applies the
// algorithm and the post-ops to each vector of values.
//
//   jit_module::compile(name, isa, [&](llvm::Module& m) {
//     generate_eltwise(m, p, plan, gen);
//   });
//
// Thread-safety: touches only the module it is given. Exceptions: what
// LLVM's allocation throws.
#pragma once

#include "kernels/eltwise_kernel.hpp"
#include "kernels/layout_walk.hpp"

namespace llvm {
class Module;
}  // namespace llvm

namespace primcache::cpu_internal {

// The generated function, a walk function (emit_walk_function).
inline constexpr const char* eltwise_symbol = "eltwise";

// Sets gen.transform (which refers to p: p must outlive the call) and
// defines eltwise_symbol in m.
void generate_eltwise(llvm::Module& m, const eltwise_problem& p, const walk_plan& plan,
                      walk_codegen& gen);

}  // namespace primcache::cpu_internal
