// kernels/conv_validation.hpp — what the convolution kernel checks before
// it builds or loads code, and the geometry it derives from a problem that
// passes: analyze_conv() validates every descriptor, size and parameter and
// returns the conv_geometry (conv_geometry.hpp) that the heuristics, the
// generator, the weight packer and the reference use.
// check_conv_problem() and conv_output_size() (conv_kernel.hpp) are defined
// here too.
//
//   auto g = analyze_conv(p);
//   if (!g) return g.why();  // invalid_arguments or unimplemented, with the reason
//
// Thread-safety: pure functions. Exceptions: std::bad_alloc only.
#pragma once

#include "kernels/conv_geometry.hpp"
#include "kernels/conv_kernel.hpp"
#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

result<conv_geometry> analyze_conv(const conv_problem& p);

// A configuration's ranges, whatever the problem.
result<bool> check_conv_config(const conv_config& c);

}  // namespace primcache::cpu_internal
