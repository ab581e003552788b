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

// A depthwise convolution's: the same, but code generation at Default.
// Its taps share source vectors (stride 1: a vector serves up to three)
// and weight vectors (every pixel of the tile); at None every FMA is the
// 213 form, tied to a multiplicand, so each shared vector is copied before
// it is overwritten (72 register copies in dw_3x3_512_14's object) and no
// load folds into an FMA. At Default the FMAs are the 231 form with their
// loads folded: 0.99-1.13x the speed at None on bench_conv's nine depthwise
// layers (dw_object_ab), and dw_3x3_512_14 back at e17cb22's speed (0.94
// at None), for about twice the compile time (docs/PERFORMANCE.md, "The
// depthwise convolution at CodeGenOpt::Default").
inline constexpr compile_settings dw_conv_compile_settings{"", 2, false, false};

// The settings a convolution compiles under: dw_conv_compile_settings for a
// depthwise one, else conv_compile_settings.
inline compile_settings conv_compile_settings_for(const conv_geometry& g,
                                                  const conv_config&) noexcept {
  return g.depthwise ? dw_conv_compile_settings : conv_compile_settings;
}

// Defines conv_entry_symbol in m, code for `isa` (the depthwise tiles'
// tap order depends on its vector registers).
void generate_conv(const conv_problem& p, const conv_geometry& g, const conv_config& c, cpu_isa isa,
                   llvm::Module& m);

}  // namespace primcache::cpu_internal
