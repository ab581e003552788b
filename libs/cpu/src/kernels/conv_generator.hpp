// kernels/conv_generator.hpp — the LLVM IR of the direct convolution
// kernel (conv_kernel.hpp describes the code) for one geometry and
// effective configuration.
//
//   jit_module::compile("conv_fwd_f32", isa, conv_compile_settings_for(ge),
//                       [&](llvm::Module& m) { generate_conv(p, ge, ec, m); });
//
// The geometry comes from analyze_conv (and flatten_conv_pointwise), the
// configuration from effective_conv_config. Thread-safety: generate_conv
// touches only the module it is given. Exceptions: what LLVM's allocation
// throws.
#pragma once

#include "jit/compiler.hpp"
#include "kernels/conv_geometry.hpp"
#include "kernels/conv_kernel.hpp"

namespace llvm {
class Module;
}  // namespace llvm

namespace primcache::cpu_internal {

// The generated function, of type conv_kernel::entry_fn.
inline constexpr const char* conv_entry_symbol = "conv_fwd_f32";

// How the kernel is compiled (docs/PERFORMANCE.md, "Where a compilation
// goes"). The generator emits the vector code and its unrolling, so O3 only
// costs time: the pipeline cleans up (promotes the accumulators, folds the
// address arithmetic, hoists what is invariant) and rotates the loops into
// the bottom-tested form O3 leaves them in, which the register allocator
// keeps the accumulators in registers across (top-tested, the 7x7 layer of
// bench_conv spilled in its input-channel loop and ran 1.3-2x slower).
// Loop strength reduction depends on the geometry: conv_compile_settings_for.
inline constexpr compile_settings conv_compile_settings{
    "function(mem2reg,early-cse<memssa>,instcombine,simplifycfg,loop(loop-rotate),"
    "loop-mssa(licm),early-cse<memssa>)",
    2, true};

// conv_compile_settings with loop strength reduction where it pays: on when
// the input-channel loop is long (without it the 3x3 layers of bench_conv ran
// up to 13% slower), off when a group has fewer than 16 input channels (with
// it the 7x7 layer over 3 channels ran 1.3x slower in two runs of three).
inline compile_settings conv_compile_settings_for(const conv_geometry& g) noexcept {
  compile_settings s = conv_compile_settings;
  s.loop_strength_reduction = g.icg >= 16;
  return s;
}

// Defines conv_entry_symbol in m.
void generate_conv(const conv_problem& p, const conv_geometry& g, const conv_config& c,
                   llvm::Module& m);

}  // namespace primcache::cpu_internal
