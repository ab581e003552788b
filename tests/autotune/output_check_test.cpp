#include "primcache/autotune/output_check.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace primcache;

TEST_CASE("the tolerance is twice gamma(n) of the unit roundoff", "[autotune][output_check]") {
  const double u = 0x1p-24;
  CHECK(reordered_sum_tolerance(0) == 0);
  CHECK(reordered_sum_tolerance(-3) == 0);
  CHECK(reordered_sum_tolerance(1) == Approx(2 * u / (1 - u)));
  CHECK(reordered_sum_tolerance(1024) == Approx(2 * 1024 * u / (1 - 1024 * u)));
  CHECK(reordered_sum_tolerance(1 << 24) == std::numeric_limits<double>::infinity());
  CHECK(reordered_sum_tolerance(10, 0x1p-53) == Approx(2 * 10 * 0x1p-53));
}

TEST_CASE("sums in another order stay within the tolerance", "[autotune][output_check]") {
  // The bound the tuner relies on, checked on real float sums: forward,
  // backward, pairwise and blocked orders of the same terms.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int n : {7, 64, 1000, 4096}) {
    std::vector<float> terms(static_cast<std::size_t>(n));
    for (float& t : terms) t = dist(rng) * dist(rng);
    double magnitude = 0;
    for (float t : terms) magnitude += std::fabs(t);
    float forward = 0, backward = 0, blocked = 0;
    for (float t : terms) forward += t;
    for (auto it = terms.rbegin(); it != terms.rend(); ++it) backward += *it;
    for (int b = 0; b < 16; ++b) {
      float part = 0;
      for (int i = b; i < n; i += 16) part += terms[static_cast<std::size_t>(i)];
      blocked += part;
    }
    const double tol = reordered_sum_tolerance(n) * magnitude;
    const std::vector<float> ref{forward};
    CHECK(compare_outputs(ref, std::vector<float>{backward}, tol).ok);
    CHECK(compare_outputs(ref, std::vector<float>{blocked}, tol).ok);
  }
}

TEST_CASE("sums of multiples of a power of two are exact up to 2^24 quanta",
          "[autotune][output_check]") {
  // Tune mode's inputs: multiples of 1/4 in [-1, 1]; products are
  // multiples of 1/16 of at most 1, and sums of up to 2^20 of them exact.
  CHECK(accumulation_tolerance(0, 1, 1.0 / 16) == 0);
  CHECK(accumulation_tolerance(4097, 1, 1.0 / 16) == 0);
  CHECK(accumulation_tolerance(11009, 1, 1.0 / 16) == 0);
  CHECK(accumulation_tolerance(1 << 20, 1, 1.0 / 16) == 0);
  // Beyond, or with a quantum that is not a power of two: Higham's bound.
  const std::int64_t big = (1 << 20) + 1;
  CHECK(accumulation_tolerance(big, 1, 1.0 / 16) ==
        Approx(reordered_sum_tolerance(big) * static_cast<double>(big)));
  CHECK(accumulation_tolerance(4097, 1, 0.1) == Approx(reordered_sum_tolerance(4097) * 4097));
  CHECK(accumulation_tolerance(4097, 1, 0) == Approx(reordered_sum_tolerance(4097) * 4097));
  CHECK(accumulation_tolerance(100, 2, 1.0 / 16) == 0);
  CHECK(accumulation_tolerance(1 << 24, 1, 1.0 / 16) == std::numeric_limits<double>::infinity());

  // On real float sums: forward, backward and blocked orders of the same
  // products of multiples of 1/4 agree bit for bit; one product dropped
  // is seen with the tolerance 0.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> quarter(-4, 4);
  for (int n : {7, 4096, 11008, 100000}) {
    std::vector<float> terms(static_cast<std::size_t>(n));
    for (float& t : terms) t = (quarter(rng) * 0.25f) * (quarter(rng) * 0.25f);
    float forward = 0, backward = 0, blocked = 0, dropped = 0;
    for (float t : terms) forward += t;
    for (auto it = terms.rbegin(); it != terms.rend(); ++it) backward += *it;
    for (int b = 0; b < 16; ++b) {
      float part = 0;
      for (int i = b; i < n; i += 16) part += terms[static_cast<std::size_t>(i)];
      blocked += part;
    }
    for (std::size_t i = 0; i + 1 < terms.size(); ++i) dropped += terms[i];
    const double tol = accumulation_tolerance(n, 1, 1.0 / 16);
    CHECK(tol == 0);
    const std::vector<float> ref{forward};
    CHECK(compare_outputs(ref, std::vector<float>{backward}, tol).ok);
    CHECK(compare_outputs(ref, std::vector<float>{blocked}, tol).ok);
    CHECK(compare_outputs(ref, std::vector<float>{dropped}, tol).ok == (terms.back() == 0));
  }
}

TEST_CASE("outputs are compared element by element", "[autotune][output_check]") {
  const std::vector<float> ref{1.f, 2.f, 3.f, 4.f};
  SECTION("equal within the tolerance") {
    const output_check c = compare_outputs(ref, std::vector<float>{1.f, 2.001f, 3.f, 4.f}, 0.01);
    CHECK(c.ok);
    CHECK(c.max_error == Approx(0.001).margin(1e-6));
    CHECK(c.tolerance == 0.01);
    CHECK(c.detail.empty());
  }
  SECTION("one element beyond it") {
    const output_check c = compare_outputs(ref, std::vector<float>{1.f, 2.f, 3.5f, 4.f}, 0.01);
    CHECK_FALSE(c.ok);
    CHECK(c.detail == "element 2: 3.5 vs the default's 3 (tolerance 0.01)");
    CHECK(c.max_error == Approx(0.5));
  }
  SECTION("NaN only matches NaN") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(compare_outputs(std::vector<float>{nan}, std::vector<float>{nan}, 0).ok);
    CHECK_FALSE(compare_outputs(std::vector<float>{nan}, std::vector<float>{1.f}, 1e9).ok);
    CHECK_FALSE(compare_outputs(std::vector<float>{1.f}, std::vector<float>{nan}, 1e9).ok);
  }
  SECTION("infinities must agree") {
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(compare_outputs(std::vector<float>{inf}, std::vector<float>{inf}, 0).ok);
    CHECK_FALSE(compare_outputs(std::vector<float>{inf}, std::vector<float>{-inf}, 1e9).ok);
    CHECK_FALSE(compare_outputs(std::vector<float>{inf}, std::vector<float>{3e38f}, 1e9).ok);
  }
  SECTION("sizes must agree") {
    const output_check c = compare_outputs(ref, std::vector<float>{1.f}, 1);
    CHECK_FALSE(c.ok);
    CHECK(c.detail == "sizes differ: 1 elements, the default wrote 4");
  }
}
