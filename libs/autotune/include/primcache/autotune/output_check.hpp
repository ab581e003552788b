// primcache/autotune/output_check.hpp — whether a candidate configuration's
// output equals the default's, up to the rounding that summing in another
// order may change.
//
// Configurations of one primitive compute the same sums in different orders
// (register blocks, K panels, unroll). For n terms added in any order in a
// floating-point type with unit roundoff u, each result is within
// gamma(n) * sum|terms| of the exact sum, gamma(n) = n u / (1 - n u)
// (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., 3.1),
// so two orders differ by at most 2 gamma(n) * sum|terms|:
//
//   // K = 512 products of inputs in [-1, 1]: sum|terms| <= 512.
//   const double tol = primcache::reordered_sum_tolerance(512) * 512.0;
//   primcache::output_check c = primcache::compare_outputs(default_out, candidate_out, tol);
//   if (!c.ok) reject(c.detail);   // "element 17: 3.5 vs 3.25 (|diff| 0.25 > tolerance 3.1e-05)"
//
// A tolerance so derived never rejects a correct configuration and rejects
// any that drops, repeats or misplaces a term larger than it (a wrong block
// edge, a skipped tail), which is what a wrong configuration does.
//
// Thread-safety: pure functions. Exceptions: none but std::bad_alloc.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "primcache/base/export.hpp"

namespace primcache {

// The result of comparing a candidate's output with the default's.
struct output_check {
  bool ok = true;
  double max_error = 0;  // the largest |got - expected| seen (NaN mismatches excluded)
  double tolerance = 0;  // the bound it was held to
  std::string detail;    // the first offending element, when !ok
};

// 2 gamma(n) for unit roundoff u (default: f32's, 2^-24): the bound, relative
// to sum|terms|, on the difference between two orders of summing n terms.
// n <= 0 gives 0; an n for which n u >= 1 (no bound) gives infinity.
PRIMCACHE_API double reordered_sum_tolerance(std::int64_t n, double unit_roundoff = 0x1p-24);

// Element-wise: |got[i] - expected[i]| <= abs_tolerance, NaN only where the
// other is NaN, infinities equal. Sizes must match (else !ok with a
// detail saying so).
PRIMCACHE_API output_check compare_outputs(std::span<const float> expected,
                                           std::span<const float> got, double abs_tolerance);

}  // namespace primcache
