// kernels/conv_generator.hpp — the LLVM IR of the direct convolution
// kernel (conv_kernel.hpp describes the code) for one geometry and
// effective configuration.
//
//   jit_module::compile("conv_fwd_f32", isa, conv_compile_settings_for(ge, ec),
//                       [&](llvm::Module& m) { generate_conv(p, ge, ec, isa, m); });
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
// goes", fifth pass, and "The depthwise convolution at CodeGenOpt::None"):
// the generator emits one tile body per tile width (depthwise: one for the
// interior tiles and one per edge tile), SSA sums (no allocas), its loops
// in their final form, its addresses stepped and nothing to fold, so no IR
// pass runs, and code generation runs at CodeGenOpt::None with the greedy
// register allocator (process_jit.cpp), as the matmul's: 2.5-3 ms for
// bench_create's convolution, against 13 at Default, and the same inner
// loop. No loop strength reduction (the generator steps the addresses) and
// no machine scheduler (None runs none).
inline constexpr compile_settings conv_compile_settings{"", 0, false, false};

// Whether the generator steps the input-channel loop's addresses itself:
// when the channels of each reduction step [ic, ic + ic_unroll) lie at one
// stride from each other — always in a plain layout; in a 16-blocked one
// when ic_unroll divides 16 and the group's input channels, so that every
// step starts at a multiple of ic_unroll and none crosses a channel block.
inline bool conv_steps_channels(const conv_geometry& g, const conv_config& c) noexcept {
  return !g.src.blocked || (16 % c.ic_unroll == 0 && g.icg % c.ic_unroll == 0);
}

// The settings a convolution compiles under: conv_compile_settings, for
// every geometry and configuration (depthwise included since the depthwise
// tiles keep their sums in SSA values and step the kh loop's addresses).
inline compile_settings conv_compile_settings_for(const conv_geometry&,
                                                  const conv_config&) noexcept {
  return conv_compile_settings;
}

// Defines conv_entry_symbol in m, code for `isa` (the depthwise tiles'
// tap order depends on its vector registers).
void generate_conv(const conv_problem& p, const conv_geometry& g, const conv_config& c, cpu_isa isa,
                   llvm::Module& m);

}  // namespace primcache::cpu_internal
