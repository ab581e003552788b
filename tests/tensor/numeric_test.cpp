#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "primcache/tensor/numeric.hpp"

namespace {

std::uint32_t bits(float f) {
  return std::bit_cast<std::uint32_t>(f);
}
float from_bits(std::uint32_t b) {
  return std::bit_cast<float>(b);
}

// A reference for f32 -> half rounding that shares no code with the library:
// the sorted finite non-negative values of the half type (plus infinity as
// the value one ulp past the largest), nearest by exact distance in double,
// ties to the even bit pattern.
struct half_oracle {
  std::vector<std::pair<double, std::uint16_t>> values;

  std::uint16_t nearest(float x) const {
    const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double ax = std::fabs(static_cast<double>(x));
    if (ax >= values.back().first) return sign | values.back().second;
    auto hi = std::lower_bound(values.begin(), values.end(), std::make_pair(ax, std::uint16_t{0}));
    if (hi->first == ax) return sign | hi->second;
    auto lo = hi - 1;
    const double dlo = ax - lo->first;
    const double dhi = hi->first - ax;
    if (dlo < dhi) return sign | lo->second;
    if (dhi < dlo) return sign | hi->second;
    return sign | ((lo->second & 1) == 0 ? lo->second : hi->second);
  }
};

// f16: 1 sign, 5 exponent, 10 mantissa bits. Values computed from the
// definition, not from f16_to_f32.
double f16_value(std::uint16_t b) {
  const int exp = (b >> 10) & 0x1f;
  const int mant = b & 0x3ff;
  const double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return (b & 0x8000) ? -v : v;
}

// bf16: 1 sign, 8 exponent, 7 mantissa bits.
double bf16_value(std::uint16_t b) {
  const int exp = (b >> 7) & 0xff;
  const int mant = b & 0x7f;
  const double v = exp == 0 ? std::ldexp(mant, -133) : std::ldexp(128 + mant, exp - 134);
  return (b & 0x8000) ? -v : v;
}

half_oracle make_f16_oracle() {
  half_oracle o;
  for (std::uint16_t b = 0; b < 0x7c00; ++b) o.values.emplace_back(f16_value(b), b);
  o.values.emplace_back(65536.0, 0x7c00);
  return o;
}

half_oracle make_bf16_oracle() {
  half_oracle o;
  for (std::uint16_t b = 0; b < 0x7f80; ++b) o.values.emplace_back(bf16_value(b), b);
  o.values.emplace_back(std::ldexp(1.0, 128), 0x7f80);
  return o;
}

bool is_nan16(std::uint16_t b, std::uint16_t exp_mask) {
  return (b & exp_mask) == exp_mask && (b & ~exp_mask & 0x7fff) != 0;
}

}  // namespace

TEST_CASE("every f16 value converts to f32 exactly and back unchanged", "[tensor][numeric]") {
  for (std::uint32_t i = 0; i <= 0xffff; ++i) {
    const auto b = static_cast<std::uint16_t>(i);
    const float f = primcache::f16_to_f32(b);
    if (is_nan16(b, 0x7c00)) {
      // NaN stays NaN, quiet, same sign, payload kept.
      REQUIRE(std::isnan(f));
      REQUIRE((bits(f) & 0x00400000u) != 0);
      REQUIRE(primcache::f32_to_f16(f) == (b | 0x0200));
    } else if ((b & 0x7fff) == 0x7c00) {
      REQUIRE(std::isinf(f));
      REQUIRE(std::signbit(f) == ((b & 0x8000) != 0));
      REQUIRE(primcache::f32_to_f16(f) == b);
    } else {
      REQUIRE(static_cast<double>(f) == f16_value(b));
      REQUIRE(std::signbit(f) == ((b & 0x8000) != 0));
      REQUIRE(primcache::f32_to_f16(f) == b);
    }
  }
}

TEST_CASE("every bf16 value converts to f32 exactly and back unchanged", "[tensor][numeric]") {
  for (std::uint32_t i = 0; i <= 0xffff; ++i) {
    const auto b = static_cast<std::uint16_t>(i);
    const float f = primcache::bf16_to_f32(b);
    if (is_nan16(b, 0x7f80)) {
      REQUIRE(std::isnan(f));
      REQUIRE((bits(f) & 0x00400000u) != 0);
      REQUIRE(primcache::f32_to_bf16(f) == (b | 0x0040));
    } else {
      REQUIRE(bits(f) == (i << 16));
      REQUIRE(primcache::f32_to_bf16(f) == b);
    }
  }
}

TEST_CASE("f32 to f16 rounds to nearest even, overflows to infinity and keeps subnormals",
          "[tensor][numeric]") {
  SECTION("hand-picked ties and edges") {
    CHECK(primcache::f32_to_f16(1.0f) == 0x3c00);
    CHECK(primcache::f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);             // tie, down to even
    CHECK(primcache::f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);         // tie, up to even
    CHECK(primcache::f32_to_f16(1.0f + 0x1p-11f + 0x1p-23f) == 0x3c01);  // just above the tie
    CHECK(primcache::f32_to_f16(-(1.0f + 0x1p-11f)) == 0xbc00);
    CHECK(primcache::f32_to_f16(1.0f / 3.0f) == 0x3555);
    CHECK(primcache::f32_to_f16(65504.0f) == 0x7bff);                        // largest
    CHECK(primcache::f32_to_f16(std::nextafter(65520.0f, 0.0f)) == 0x7bff);  // below the tie
    CHECK(primcache::f32_to_f16(65520.0f) == 0x7c00);  // tie: even neighbour is infinity
    CHECK(primcache::f32_to_f16(-1e6f) == 0xfc00);
    CHECK(primcache::f32_to_f16(std::numeric_limits<float>::infinity()) == 0x7c00);
    CHECK(primcache::f32_to_f16(-std::numeric_limits<float>::infinity()) == 0xfc00);
    CHECK(primcache::f32_to_f16(0.0f) == 0x0000);
    CHECK(primcache::f32_to_f16(-0.0f) == 0x8000);
  }
  SECTION("subnormals") {
    CHECK(primcache::f32_to_f16(0x1p-24f) == 0x0001);  // smallest subnormal
    CHECK(primcache::f32_to_f16(0x1p-25f) == 0x0000);  // tie between 0 and 1: even
    CHECK(primcache::f32_to_f16(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);
    CHECK(primcache::f32_to_f16(3 * 0x1p-25f) == 0x0002);        // tie between 1 and 2: even
    CHECK(primcache::f32_to_f16(1023 * 0x1p-24f) == 0x03ff);     // largest subnormal
    CHECK(primcache::f32_to_f16(1023.5f * 0x1p-24f) == 0x0400);  // tie: up to min normal
    CHECK(primcache::f32_to_f16(0x1p-14f) == 0x0400);            // smallest normal
    CHECK(primcache::f32_to_f16(-0x1p-24f) == 0x8001);
    CHECK(primcache::f32_to_f16(std::numeric_limits<float>::denorm_min()) == 0x0000);
    CHECK(primcache::f32_to_f16(-std::numeric_limits<float>::denorm_min()) == 0x8000);
  }
  SECTION("NaN stays a quiet NaN of the same sign") {
    const float qnan = std::numeric_limits<float>::quiet_NaN();
    CHECK(is_nan16(primcache::f32_to_f16(qnan), 0x7c00));
    CHECK((primcache::f32_to_f16(qnan) & 0x0200) != 0);
    CHECK((primcache::f32_to_f16(-qnan) & 0x8000) != 0);
    // A signalling NaN whose payload lies only in bits that f16 drops.
    const std::uint16_t h = primcache::f32_to_f16(from_bits(0x7f800001u));
    CHECK(is_nan16(h, 0x7c00));
    CHECK((h & 0x0200) != 0);
  }
  SECTION("every midpoint between neighbouring f16 values goes to the even one") {
    const half_oracle o = make_f16_oracle();
    for (std::size_t i = 0; i + 1 < o.values.size(); ++i) {
      const double mid = (o.values[i].first + o.values[i + 1].first) / 2;
      const float f = static_cast<float>(mid);
      REQUIRE(static_cast<double>(f) == mid);  // exactly representable
      const std::uint16_t even =
          (o.values[i].second & 1) == 0 ? o.values[i].second : o.values[i + 1].second;
      REQUIRE(primcache::f32_to_f16(f) == even);
      REQUIRE(primcache::f32_to_f16(-f) == (even | 0x8000));
    }
  }
  SECTION("a sweep over f32 bit patterns agrees with the nearest-even oracle") {
    const half_oracle o = make_f16_oracle();
    for (std::uint64_t b = 0; b <= 0xffffffffu; b += 4099) {
      const float f = from_bits(static_cast<std::uint32_t>(b));
      if (std::isnan(f)) continue;
      REQUIRE(primcache::f32_to_f16(f) == o.nearest(f));
    }
  }
}

TEST_CASE("f32 to bf16 rounds to nearest even and overflows to infinity", "[tensor][numeric]") {
  SECTION("hand-picked ties and edges") {
    CHECK(primcache::f32_to_bf16(from_bits(0x3f808000u)) == 0x3f80);  // tie, down to even
    CHECK(primcache::f32_to_bf16(from_bits(0x3f818000u)) == 0x3f82);  // tie, up to even
    CHECK(primcache::f32_to_bf16(from_bits(0x3f808001u)) == 0x3f81);  // just above the tie
    CHECK(primcache::f32_to_bf16(from_bits(0xbf808000u)) == 0xbf80);
    CHECK(primcache::f32_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up
    CHECK(primcache::f32_to_bf16(from_bits(0x7f7f7fffu)) == 0x7f7f);
    CHECK(primcache::f32_to_bf16(std::numeric_limits<float>::infinity()) == 0x7f80);
    CHECK(primcache::f32_to_bf16(-std::numeric_limits<float>::infinity()) == 0xff80);
    CHECK(primcache::f32_to_bf16(std::numeric_limits<float>::denorm_min()) == 0x0000);
    CHECK(primcache::f32_to_bf16(from_bits(0x00018000u)) == 0x0002);  // subnormal tie
    CHECK(primcache::f32_to_bf16(-0.0f) == 0x8000);
  }
  SECTION("NaN stays a quiet NaN of the same sign") {
    const std::uint16_t h = primcache::f32_to_bf16(from_bits(0x7f800001u));
    CHECK(is_nan16(h, 0x7f80));
    CHECK((h & 0x0040) != 0);
    CHECK(primcache::f32_to_bf16(from_bits(0xffc00000u)) == 0xffc0);
  }
  SECTION("every midpoint between neighbouring bf16 values goes to the even one") {
    const half_oracle o = make_bf16_oracle();
    for (std::size_t i = 0; i + 1 < o.values.size(); ++i) {
      const double mid = (o.values[i].first + o.values[i + 1].first) / 2;
      const float f = static_cast<float>(mid);
      REQUIRE(static_cast<double>(f) == mid);
      const std::uint16_t even =
          (o.values[i].second & 1) == 0 ? o.values[i].second : o.values[i + 1].second;
      REQUIRE(primcache::f32_to_bf16(f) == even);
    }
  }
  SECTION("a sweep over f32 bit patterns agrees with the nearest-even oracle") {
    const half_oracle o = make_bf16_oracle();
    for (std::uint64_t b = 0; b <= 0xffffffffu; b += 4099) {
      const float f = from_bits(static_cast<std::uint32_t>(b));
      if (std::isnan(f)) continue;
      REQUIRE(primcache::f32_to_bf16(f) == o.nearest(f));
    }
  }
}

namespace {

struct int_case {
  float in;
  int s8;
  int u8;
  std::int64_t s32;
};

}  // namespace

TEST_CASE("f32 to integers rounds to nearest even, then saturates", "[tensor][numeric]") {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const auto c = GENERATE_COPY(values<int_case>({
      {0.0f, 0, 0, 0},
      {0.5f, 0, 0, 0},
      {1.5f, 2, 2, 2},
      {2.5f, 2, 2, 2},
      {-0.5f, 0, 0, 0},
      {-1.5f, -2, 0, -2},
      {-2.5f, -2, 0, -2},
      {2.4999998f, 2, 2, 2},
      {2.5000002f, 3, 3, 3},
      {126.5f, 126, 126, 126},
      {127.5f, 127, 128, 128},  // rounds to 128, then s8 saturates
      {-128.5f, -128, 0, -128},
      {-129.0f, -128, 0, -129},
      {254.5f, 127, 254, 254},
      {255.5f, 127, 255, 256},
      {300.0f, 127, 255, 300},
      {4194304.5f, 127, 255, 4194304},  // 2^22 + 0.5: tie, even
      {4194305.5f, 127, 255, 4194306},
      {16777216.0f, 127, 255, 16777216},
      {2147483520.0f, 127, 255, 2147483520},  // largest float below 2^31
      {2147483648.0f, 127, 255, INT32_MAX},
      {-2147483648.0f, -128, 0, INT32_MIN},
      {1e20f, 127, 255, INT32_MAX},
      {-1e20f, -128, 0, INT32_MIN},
      {inf, 127, 255, INT32_MAX},
      {-inf, -128, 0, INT32_MIN},
  }));
  CAPTURE(c.in);
  CHECK(primcache::f32_to_s8(c.in) == c.s8);
  CHECK(primcache::f32_to_u8(c.in) == c.u8);
  CHECK(primcache::f32_to_s32(c.in) == c.s32);
}

TEST_CASE("NaN converts to integer 0", "[tensor][numeric]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(primcache::f32_to_s8(nan) == 0);
  CHECK(primcache::f32_to_u8(nan) == 0);
  CHECK(primcache::f32_to_s32(nan) == 0);
  CHECK(primcache::f32_to_s8(-nan) == 0);
  CHECK(std::isnan(primcache::round_half_even(nan)));
}

TEST_CASE("integer conversion agrees with nearbyint and clamping over a fine sweep",
          "[tensor][numeric]") {
  REQUIRE(std::fegetround() == FE_TONEAREST);
  for (float x = -300.0f; x <= 300.0f; x += 0.125f) {
    const float r = std::nearbyint(x);
    REQUIRE(primcache::round_half_even(x) == r);
    REQUIRE(primcache::f32_to_s8(x) == static_cast<int>(std::clamp(r, -128.0f, 127.0f)));
    REQUIRE(primcache::f32_to_u8(x) == static_cast<int>(std::clamp(r, 0.0f, 255.0f)));
    REQUIRE(primcache::f32_to_s32(x) == static_cast<std::int32_t>(r));
  }
}

TEST_CASE("conversions ignore the floating-point rounding mode", "[tensor][numeric]") {
  const int saved = std::fegetround();
  std::fesetround(FE_UPWARD);
  const std::int8_t s8 = primcache::f32_to_s8(2.5f);
  const std::uint8_t u8 = primcache::f32_to_u8(0.5f);
  const float r = primcache::round_half_even(-3.5f);
  const std::uint16_t h = primcache::f32_to_f16(1.0f + 0x1p-11f);
  const std::uint16_t sub = primcache::f32_to_f16(0x1p-25f);
  const std::uint16_t bf = primcache::f32_to_bf16(from_bits(0x3f808000u));
  std::fesetround(FE_DOWNWARD);
  const std::int32_t s32 = primcache::f32_to_s32(-0.5f);
  std::fesetround(saved);
  CHECK(s8 == 2);
  CHECK(u8 == 0);
  CHECK(r == -4.0f);
  CHECK(h == 0x3c00);
  CHECK(sub == 0x0000);
  CHECK(bf == 0x3f80);
  CHECK(s32 == 0);
}
