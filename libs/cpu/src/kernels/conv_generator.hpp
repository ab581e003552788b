// kernels/conv_generator.hpp — the LLVM IR of the direct convolution
// kernel (conv_kernel.hpp describes the code) for one geometry and
// effective configuration.
//
//   jit_module::compile("conv_fwd_f32", isa, conv_compile_settings_for(ge, ec),
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
// costs time: the pipeline cleans up (promotes the accumulators, removes the
// address arithmetic repeated per tap, hoists what is invariant) and rotates
// the loops into the bottom-tested form O3 leaves them in, which the register
// allocator keeps the accumulators in registers across (top-tested, the 7x7
// layer of bench_conv spilled in its input-channel loop and ran 1.3-2x
// slower). No instcombine: the generator's IR has little for it to fold
// (the object is the same size without it) and it was a third of the
// pipeline's time. The machine scheduler stays: without it bench_conv's
// conv3_3x3_128to128_28 ran 3-14% slower (it never reached its fast mode in
// nine processes; third pass, docs/PERFORMANCE.md). Loop strength reduction
// depends on the addressing: conv_compile_settings_for.
inline constexpr compile_settings conv_compile_settings{
    "function(mem2reg,early-cse<memssa>,simplifycfg,loop(loop-rotate),loop-mssa(licm),"
    "early-cse<memssa>)",
    2, false, true};

// A convolution that is not depthwise: its generator emits one tile body
// per tile width (conv_generator.cpp), its loops in their final form, its
// addresses stepped and nothing to fold, so no IR pass runs, and code
// generation runs at CodeGenOpt::None with the greedy register allocator
// (process_jit.cpp), as the matmul's: 2.5-3 ms for bench_create's
// convolution, against 13 at Default, and the same inner loop
// (docs/PERFORMANCE.md, fifth pass). The depthwise kernel keeps
// conv_compile_settings.
inline constexpr compile_settings conv_dense_compile_settings{"", 0, false, false};

// Whether the generator steps the input-channel loop's addresses itself:
// when the channels of each reduction step [ic, ic + ic_unroll) lie at one
// stride from each other — always in a plain layout; in a 16-blocked one
// when ic_unroll divides 16 and the group's input channels, so that every
// step starts at a multiple of ic_unroll and none crosses a channel block.
inline bool conv_steps_channels(const conv_geometry& g, const conv_config& c) noexcept {
  return !g.src.blocked || (16 % c.ic_unroll == 0 && g.icg % c.ic_unroll == 0);
}

// conv_dense_compile_settings where not depthwise; else
// conv_compile_settings, with loop strength reduction only where the
// generator cannot step the input-channel loop's addresses itself (a
// 16-blocked source whose group's input channels are not a multiple of
// ic_unroll) and the loop is long (at least 16 channels per group: without
// it the 3x3 layers of bench_conv ran up to 13% slower; with it the 7x7 layer
// over 3 channels ran 1.3x slower in two runs of three).
inline compile_settings conv_compile_settings_for(const conv_geometry& g,
                                                  const conv_config& c) noexcept {
  if (!g.depthwise) return conv_dense_compile_settings;
  compile_settings s = conv_compile_settings;
  s.loop_strength_reduction = !conv_steps_channels(g, c) && g.icg >= 16;
  return s;
}

// Defines conv_entry_symbol in m.
void generate_conv(const conv_problem& p, const conv_geometry& g, const conv_config& c,
                   llvm::Module& m);

}  // namespace primcache::cpu_internal
