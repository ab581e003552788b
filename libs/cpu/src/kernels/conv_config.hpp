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

// The config the generator really uses: blocks no larger than the problem,
// and the fields that change nothing for this geometry in one form (no K
// panel at or beyond the group's input channels or for depthwise; no thread
// partition on one thread; no N panel with oc_outer or beyond a part's
// chunks, and a spatial_outer walk in panels of one chunk as oc_outer).
conv_config effective_conv_config(const conv_geometry& g, conv_config c);

// Whether an effective configuration runs its items through a conv_walk
// (an N panel or a thread partition) instead of the items in loop order
// split into balanced ranges.
bool conv_config_walks(const conv_config& ec) noexcept;

// Whether the kernel of an effective configuration sums each output in the
// generic kernel's order: bias, then kh, input channels, kw. A K panel
// (ic_block) runs the kh loop once per pass, so its order is input-channel
// block, kh, channel, kw: the same sequence only where the kernel has one
// row (kh = 1). Everything else (tiles, unroll, loop order, panels,
// partitions) changes no output's sequence.
bool conv_config_sums_as_generic(const conv_geometry& g, const conv_config& ec) noexcept;

// Accumulators (16-float vectors) a register tile may hold at this ISA:
// 28 of 32 zmm at avx512_core and above, 6 (12 of 16 ymm) below, leaving
// registers for the weights and the broadcast input.
int conv_accumulator_budget(cpu_isa isa);

// The configuration as backend fields (ow_block, oc_blocks, ic_unroll,
// order, ic_block, oc_panel, thr_oc) and back; from_fields checks the names
// and ranges.
backend::kernel_config to_fields(const conv_config& c);
result<conv_config> conv_config_from_fields(const backend::kernel_config& f);
// Whether create() builds `c` for `p` at `isa` within the ISA's accumulator
// budget (the tile the generator uses, effective_conv_config), with a
// thread partition that divides the problem's threads and has a chunk for
// each part, without compiling.
result<bool> validate_conv_config_for(const conv_problem& p, const conv_config& c, cpu_isa isa);

}  // namespace primcache::cpu_internal
