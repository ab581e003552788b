#include "primcache/autotune/output_check.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

namespace primcache {

double reordered_sum_tolerance(std::int64_t n, double unit_roundoff) {
  if (n <= 0) return 0;
  const double nu = static_cast<double>(n) * unit_roundoff;
  if (nu >= 1) return std::numeric_limits<double>::infinity();
  return 2 * nu / (1 - nu);
}

double accumulation_tolerance(std::int64_t n, double max_term, double quantum) {
  if (n <= 0) return 0;
  int exponent = 0;
  const bool power_of_two = quantum > 0 && std::isfinite(quantum) &&
                            std::frexp(quantum, &exponent) == 0.5 && quantum >= 0x1p-126;
  // Every partial sum is an integer multiple of quantum of magnitude at
  // most n * max_term / quantum; f32 holds every integer up to 2^24, and
  // scaling by a power of two (a normal one) is exact.
  if (power_of_two && static_cast<double>(n) * max_term / quantum <= 0x1p24) return 0;
  return reordered_sum_tolerance(n) * static_cast<double>(n) * max_term;
}

output_check compare_outputs(std::span<const float> expected, std::span<const float> got,
                             double abs_tolerance) {
  output_check out;
  out.tolerance = abs_tolerance;
  if (expected.size() != got.size()) {
    out.ok = false;
    out.detail = "sizes differ: " + std::to_string(got.size()) + " elements, the default wrote " +
                 std::to_string(expected.size());
    return out;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float e = expected[i], g = got[i];
    bool bad = false;
    if (std::isnan(e) || std::isnan(g)) {
      bad = std::isnan(e) != std::isnan(g);
    } else if (std::isinf(e) || std::isinf(g)) {
      bad = e != g;
    } else {
      const double diff = std::fabs(static_cast<double>(g) - static_cast<double>(e));
      if (diff > out.max_error) out.max_error = diff;
      bad = diff > abs_tolerance;
    }
    if (bad && out.ok) {
      out.ok = false;
      char text[160];
      std::snprintf(text, sizeof text, "element %zu: %.9g vs the default's %.9g (tolerance %.3g)",
                    i, static_cast<double>(g), static_cast<double>(e), abs_tolerance);
      out.detail = text;
    }
  }
  return out;
}

}  // namespace primcache
