// kernels/matmul_validation.hpp — what the matmul kernel checks before it
// builds or loads code: the problem, a configuration against it, the ISA.
// check_matmul_problem() (matmul_kernel.hpp) is the problem check that
// primitive descriptors call.
//
//   if (auto bad = validate_matmul_problem(p, true)) return *bad;
//
// Each returns the first failure found (invalid_arguments for malformed
// input, unimplemented for valid input the kernel does not build), nullopt
// when all holds. Thread-safety: pure functions. Exceptions: std::bad_alloc
// only (the messages).
#pragma once

#include <optional>

#include "kernels/matmul_kernel.hpp"
#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

// With need_dense_n, also that dst is dense along n (the kernel's need; the
// reference takes any non-overlapping dst).
std::optional<failure> validate_matmul_problem(const matmul_problem& p, bool need_dense_n = true);

// Checks that hold whatever the ISA; `lanes` and `registers` add the ISA's
// (0: unknown, as when loading an object).
std::optional<failure> validate_matmul_config(const matmul_problem& p, const matmul_config& c,
                                              int lanes, int registers);

// avx2 or better, and no better than the host's.
std::optional<failure> validate_matmul_isa(cpu_isa isa);

}  // namespace primcache::cpu_internal
