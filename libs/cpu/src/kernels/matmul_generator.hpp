// kernels/matmul_generator.hpp — the LLVM IR of the matmul kernel: the
// cache-blocked loop nest around the register-blocked micro-kernel that
// matmul_kernel.hpp describes, for one problem, configuration and ISA.
//
//   jit_module::compile(matmul_module_name(p), isa,
//                       [&](llvm::Module& m) { generate_matmul(p, cfg, isa, m); });
//
// The problem and configuration must have passed matmul_validation.hpp.
// Thread-safety: generate_matmul touches only the module it is given.
// Exceptions: what LLVM's allocation throws.
#pragma once

#include <string>

#include "kernels/matmul_kernel.hpp"

namespace llvm {
class Module;
}  // namespace llvm

namespace primcache::cpu_internal {

// The generated function, of type matmul_kernel::function.
inline constexpr const char* matmul_symbol = "matmul_f32";

// Defines matmul_symbol in m.
void generate_matmul(const matmul_problem& p, const matmul_config& c, cpu_isa isa, llvm::Module& m);

// The kernel's name for the JIT (messages, the JITDylib): its shape.
std::string matmul_module_name(const matmul_problem& p);

}  // namespace primcache::cpu_internal
