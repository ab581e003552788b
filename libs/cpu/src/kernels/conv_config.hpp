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

namespace primcache::cpu_internal {

// A 1x1, stride-1, unpadded convolution over rows stored back to back, as
// the same computation over longer rows; any other geometry unchanged.
conv_geometry flatten_conv_pointwise(conv_geometry g);

// The config the generator really uses: blocks no larger than the problem.
conv_config effective_conv_config(const conv_geometry& g, conv_config c);

}  // namespace primcache::cpu_internal
