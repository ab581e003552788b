// kernels/integer_math.hpp — the integer arithmetic every kernel's
// heuristics, validation and generator share: rounding divisions and powers
// of two, on the non-negative int64 sizes kernels work with.
//
//   const std::int64_t blocks = div_up(n, nr);      // blocks of nr covering n
//   const std::int64_t padded = round_up(n, lanes);  // n rounded to whole vectors
//
// Thread-safety: pure functions. Exceptions: none. Callers keep a + b in
// range (validation bounds every size far below overflow) and b positive.
#pragma once

#include <cstdint>

namespace primcache::cpu_internal {

// a / b rounded up, for a >= 0 and b > 0.
constexpr std::int64_t div_up(std::int64_t a, std::int64_t b) noexcept {
  return (a + b - 1) / b;
}

// The smallest multiple of b not below a, for a >= 0 and b > 0.
constexpr std::int64_t round_up(std::int64_t a, std::int64_t b) noexcept {
  return div_up(a, b) * b;
}

constexpr bool is_pow2(std::int64_t v) noexcept {
  return v > 0 && (v & (v - 1)) == 0;
}

}  // namespace primcache::cpu_internal
