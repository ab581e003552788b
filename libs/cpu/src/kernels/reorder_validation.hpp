// kernels/reorder_validation.hpp — what the reorder kernel checks before it
// plans a walk: the problem (resolved layouts of the same dims, a known
// scale kind, no padded offsets) and a configuration's ranges.
// check_reorder_problem() (reorder_kernel.hpp) adds the walk's own checks.
//
//   if (auto ok = validate_reorder_problem(p); !ok) return ok.why();
//
// Failures are values: invalid_arguments for malformed input, unimplemented
// for what the kernel does not build. Thread-safety: pure functions.
// Exceptions: std::bad_alloc only (the messages).
#pragma once

#include "kernels/reorder_kernel.hpp"
#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

result<bool> validate_reorder_problem(const reorder_problem& p);
result<bool> validate_reorder_config(const reorder_config& c);

}  // namespace primcache::cpu_internal
