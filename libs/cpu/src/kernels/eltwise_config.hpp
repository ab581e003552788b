// kernels/eltwise_config.hpp — the layout walk an eltwise problem runs,
// which its heuristic and its kernel share. The heuristic
// (default_eltwise_config) and the candidate space
// (eltwise_config_candidates) are declared with the configuration in
// eltwise_kernel.hpp and defined in eltwise_config.cpp.
//
//   auto plan = eltwise_walk_plan(p);  // keeps dimension 1 for per-channel operands
//
// Thread-safety: pure functions. Exceptions: std::bad_alloc only.
#pragma once

#include "kernels/eltwise_kernel.hpp"
#include "kernels/layout_walk.hpp"
#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

// The walk over the problem's (identical) layouts; dimension 1 is kept
// apart when a binary post-op broadcasts per channel.
result<walk_plan> eltwise_walk_plan(const eltwise_problem& p);

}  // namespace primcache::cpu_internal
