// kernels/eltwise_validation.hpp — what the eltwise kernel checks before it
// plans its walk: the problem (resolved, identical layouts of f32 or bf16,
// known algorithms and post-ops) and a configuration's ranges.
// check_eltwise_problem() (eltwise_kernel.hpp) is the problem check.
//
//   if (auto ok = validate_eltwise_problem(p); !ok) return ok.why();
//
// Failures are values: invalid_arguments for malformed input, unimplemented
// for what the kernel does not build. Thread-safety: pure functions.
// Exceptions: std::bad_alloc only (the messages).
#pragma once

#include "kernels/eltwise_kernel.hpp"
#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

result<bool> validate_eltwise_problem(const eltwise_problem& p);
result<bool> validate_eltwise_config(const eltwise_config& c);

}  // namespace primcache::cpu_internal
