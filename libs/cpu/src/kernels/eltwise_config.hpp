// kernels/eltwise_config.hpp — the layout walk an eltwise problem runs,
// which its heuristic and its kernel share. The heuristic
// (default_eltwise_config) and the candidate space
// (eltwise_config_candidates) are declared with the configuration in
// eltwise_kernel.hpp and defined in eltwise_config.cpp.
//
//   auto plan = eltwise_walk_plan(p);  // keeps dimension 1 for per-channel operands
//   auto generic = plan_walk(p.src, p.dst, eltwise_keep_dims(p));  // the generic walk's
//
// Thread-safety: pure functions. Exceptions: std::bad_alloc only.
#pragma once

#include "kernels/eltwise_kernel.hpp"
#include "kernels/layout_walk.hpp"
#include "primcache/base/result.hpp"
#include "primcache/runtime/backend/kernel_config.hpp"

namespace primcache::cpu_internal {

// The dims an eltwise walk keeps apart: dimension 1 when a binary post-op
// broadcasts per channel.
unsigned eltwise_keep_dims(const eltwise_problem& p);

// The specialized kernel's walk over the problem's layouts: plan_walk's,
// its padded block batched (batch_padded_block). The generic kernel walks
// plan_walk's own.
result<walk_plan> eltwise_walk_plan(const eltwise_problem& p);

// The configuration as backend fields (vector_lanes, unroll, chunk) and back;
// from_fields checks the names and ranges.
backend::kernel_config to_fields(const eltwise_config& c);
result<eltwise_config> eltwise_config_from_fields(const backend::kernel_config& f);
// Whether create() builds `c` for `p` at `isa`, without compiling.
result<bool> validate_eltwise_config_for(const eltwise_problem& p, const eltwise_config& c,
                                         cpu_isa isa);

}  // namespace primcache::cpu_internal
