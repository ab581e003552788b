// kernels/conv_generator.hpp — the LLVM IR of the direct convolution
// kernel (conv_kernel.hpp describes the code) for one geometry and
// effective configuration.
//
//   jit_module::compile("conv_fwd_f32", isa,
//                       [&](llvm::Module& m) { generate_conv(p, ge, ec, m); });
//
// The geometry comes from analyze_conv (and flatten_conv_pointwise), the
// configuration from effective_conv_config. Thread-safety: generate_conv
// touches only the module it is given. Exceptions: what LLVM's allocation
// throws.
#pragma once

#include "kernels/conv_geometry.hpp"
#include "kernels/conv_kernel.hpp"

namespace llvm {
class Module;
}  // namespace llvm

namespace primcache::cpu_internal {

// The generated function, of type conv_kernel::entry_fn.
inline constexpr const char* conv_entry_symbol = "conv_fwd_f32";

// Defines conv_entry_symbol in m.
void generate_conv(const conv_problem& p, const conv_geometry& g, const conv_config& c,
                   llvm::Module& m);

}  // namespace primcache::cpu_internal
