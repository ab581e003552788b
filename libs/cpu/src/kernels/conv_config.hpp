// kernels/conv_config.hpp — how the convolution kernel's heuristics shape a
// problem and a configuration before code generation. The heuristic itself
// (default_conv_config), the candidate space (conv_config_candidates) and
// preferred_weights_desc are declared in conv_kernel.hpp and defined in
// conv_config.cpp.
//
//   const conv_geometry ge = flatten_conv_pointwise(analyze_conv(p).value());
//   const conv_config ec = effective_conv_config(ge, cfg);  // what the code uses
//
// Thread-safety: pure functions. Exceptions: none.
#pragma once

#include "kernels/conv_geometry.hpp"
#include "kernels/conv_kernel.hpp"
#include "primcache/base/result.hpp"
#include "primcache/runtime/backend/kernel_config.hpp"

namespace primcache::cpu_internal {

// A 1x1, stride-1, unpadded convolution over rows stored back to back, as
// the same computation over longer rows; any other geometry unchanged.
conv_geometry flatten_conv_pointwise(conv_geometry g);

// The config the generator really uses: blocks no larger than the problem.
conv_config effective_conv_config(const conv_geometry& g, conv_config c);

// Accumulators (16-float vectors) a register tile may hold at this ISA:
// 28 of 32 zmm at avx512_core and above, 6 (12 of 16 ymm) below, leaving
// registers for the weights and the broadcast input.
int conv_accumulator_budget(cpu_isa isa);

// The configuration as backend fields (ow_block, oc_blocks, ic_unroll,
// order) and back; from_fields checks the names and ranges.
backend::kernel_config to_fields(const conv_config& c);
result<conv_config> conv_config_from_fields(const backend::kernel_config& f);
// Whether create() builds `c` for `p` at `isa` within the ISA's accumulator
// budget (the tile the generator uses, effective_conv_config), without
// compiling.
result<bool> validate_conv_config_for(const conv_problem& p, const conv_config& c, cpu_isa isa);

}  // namespace primcache::cpu_internal
