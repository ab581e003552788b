// primcache/autotune/output_check.hpp — whether a candidate configuration's
// output equals the default's, up to the rounding that summing in another
// order may change.
//
// Configurations of one primitive compute the same sums in different orders
// (register blocks, K panels, unroll). Choose the inputs so that the sums
// are exact and the orders cannot differ at all: when every term is a
// multiple of a power of two q and at most m in magnitude, every partial
// sum of n terms is a multiple of q of at most n m, exact in f32 while
// n m / q <= 2^24 — so correct configurations agree bit for bit, and a
// wrong one (a skipped tail, a dropped or repeated term) is caught however
// small its error. Tune mode fills its inputs with multiples of 1/4 in
// [-1, 1] for this: products are multiples of 1/16, exact sums up to
// n = 2^20 terms.
//
//   // K = 4096 products of multiples of 1/4 in [-1, 1], plus the bias.
//   const double tol = primcache::accumulation_tolerance(4097, 1.0, 1.0 / 16);   // 0
//   primcache::output_check c = primcache::compare_outputs(default_out, candidate_out, tol);
//   if (!c.ok) reject(c.detail);   // "element 17: 3.5 vs the default's 3.25 (tolerance 0)"
//
// Post-ops applied after the sum (eltwise functions implemented with
// different approximations or instruction sequences) add their own
// difference on top: the caller bounds it (tune mode: libs/runtime's
// tuning.cpp).
//
// Where the sums are not exact (arbitrary inputs, or n m / q > 2^24), the
// order matters. For n terms added in any order in a floating-point type
// with unit roundoff u, each result is within gamma(n) * sum|terms| of the
// exact sum, gamma(n) = n u / (1 - n u) (Higham, Accuracy and Stability
// of Numerical Algorithms, 2nd ed., 3.1), so two orders differ by at most
// 2 gamma(n) * sum|terms| = reordered_sum_tolerance(n) * sum|terms|, which
// accumulation_tolerance returns then. That bound grows as n^2 (2.0 at
// n = 4096 for terms in [-1, 1], infinite from n = 2^24): it never rejects
// a correct configuration, but at large n it lets through one whose error
// is a term or two — use it only where exactness cannot be had.
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

// The bound on the difference between two f32 sums, in any order, of the
// same n terms, each a multiple of `quantum` (a power of two) and at most
// max_term in magnitude: 0 when every partial sum is exact (n * max_term /
// quantum <= 2^24), else reordered_sum_tolerance(n) * n * max_term. A
// quantum that is not a positive power of two counts as inexact.
PRIMCACHE_API double accumulation_tolerance(std::int64_t n, double max_term, double quantum);

// Element-wise: |got[i] - expected[i]| <= abs_tolerance, NaN only where the
// other is NaN, infinities equal. Sizes must match (else !ok with a
// detail saying so).
PRIMCACHE_API output_check compare_outputs(std::span<const float> expected,
                                           std::span<const float> got, double abs_tolerance);

}  // namespace primcache
