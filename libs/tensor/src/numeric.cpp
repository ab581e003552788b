#include "primcache/tensor/numeric.hpp"

#include <bit>
#include <cmath>

namespace primcache {

namespace {

constexpr std::uint32_t f32_abs_mask = 0x7fffffffu;
constexpr std::uint32_t f32_inf_bits = 0x7f800000u;
constexpr std::uint32_t f32_quiet_bit = 0x00400000u;

std::uint32_t bits_of(float v) noexcept {
  return std::bit_cast<std::uint32_t>(v);
}
float float_of(std::uint32_t b) noexcept {
  return std::bit_cast<float>(b);
}

// Saturates an already-rounded float into [lo, hi]. Both bounds are exactly
// representable as floats for the callers' types (s32 passes its bounds as
// the float range edges, see f32_to_s32).
template <typename Int>
Int saturate(float rounded, float lo, float hi) noexcept {
  if (rounded <= lo) return static_cast<Int>(lo);
  if (rounded >= hi) return static_cast<Int>(hi);
  return static_cast<Int>(rounded);
}

}  // namespace

float round_half_even(float value) noexcept {
  // trunc is exact, and so is value - t: both share value's exponent range
  // and |value - t| < 1. Floats of magnitude >= 2^23 are integers already
  // (diff == 0), so nothing here depends on the rounding mode.
  if (!std::isfinite(value)) return value;
  const float t = std::trunc(value);
  const float diff = value - t;
  const float step = std::copysign(1.0f, value);
  if (std::fabs(diff) > 0.5f) return t + step;
  if (std::fabs(diff) == 0.5f) {
    // t is an integer below 2^23 here, so fmod is exact.
    return std::fmod(t, 2.0f) == 0.0f ? t : t + step;
  }
  return t;
}

std::uint16_t f32_to_bf16(float value) noexcept {
  std::uint32_t x = bits_of(value);
  if ((x & f32_abs_mask) > f32_inf_bits) {
    return static_cast<std::uint16_t>((x | f32_quiet_bit) >> 16);
  }
  // Adding 0x7fff plus the lowest kept bit rounds the dropped half to
  // nearest, ties to even; a carry out of the mantissa bumps the exponent,
  // which is right, up to and including overflow to infinity.
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

float bf16_to_f32(std::uint16_t bits) noexcept {
  std::uint32_t x = static_cast<std::uint32_t>(bits) << 16;
  if ((x & f32_abs_mask) > f32_inf_bits) x |= f32_quiet_bit;
  return float_of(x);
}

std::uint16_t f32_to_f16(float value) noexcept {
  const std::uint32_t x = bits_of(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  std::uint32_t ax = x & f32_abs_mask;

  if (ax > f32_inf_bits) {  // NaN: quiet, top 9 payload bits kept
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x1ffu));
  }
  // 65520 is halfway between the largest f16 (65504) and 2^16; the tie goes
  // to the even neighbour, 2^16, which is infinity.
  constexpr std::uint32_t f16_overflow = 0x477ff000u;  // 65520.0f
  if (ax >= f16_overflow) return static_cast<std::uint16_t>(sign | 0x7c00u);

  constexpr std::uint32_t f16_min_normal = 0x38800000u;  // 2^-14
  if (ax >= f16_min_normal) {
    // Rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits
    // to nearest even; a carry moves into the exponent, correctly.
    const std::uint32_t odd = (ax >> 13) & 1u;
    ax += (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu + odd;
    return static_cast<std::uint16_t>(sign | (ax >> 13));
  }

  // Subnormal f16 (or zero): the result counts units of 2^-24. With the f32
  // written as m * 2^(e - 150), that is m >> (126 - e), rounded here by hand.
  const std::uint32_t e = ax >> 23;
  if (e < 102) return sign;  // below 2^-25: rounds to zero (f32 subnormals too)
  const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - e;  // 14 .. 24
  std::uint32_t q = m >> shift;
  const std::uint32_t rem = m & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // may reach 0x400: min normal
  return static_cast<std::uint16_t>(sign | q);
}

float f16_to_f32(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  std::uint32_t mant = bits & 0x3ffu;
  if (exp == 0x1f) {
    std::uint32_t out = sign | f32_inf_bits | (mant << 13);
    if (mant != 0) out |= f32_quiet_bit;
    return float_of(out);
  }
  if (exp == 0) {
    if (mant == 0) return float_of(sign);
    // Subnormal: normalise so that the leading 1 becomes implicit.
    std::uint32_t e = 127 - 15 + 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    mant &= 0x3ffu;
    return float_of(sign | (e << 23) | (mant << 13));
  }
  return float_of(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

std::int8_t f32_to_s8(float value) noexcept {
  if (std::isnan(value)) return 0;
  return saturate<std::int8_t>(round_half_even(value), -128.0f, 127.0f);
}

std::uint8_t f32_to_u8(float value) noexcept {
  if (std::isnan(value)) return 0;
  return saturate<std::uint8_t>(round_half_even(value), 0.0f, 255.0f);
}

std::int32_t f32_to_s32(float value) noexcept {
  if (std::isnan(value)) return 0;
  const float r = round_half_even(value);
  // 2^31 - 1 is not a float: anything at or above 2^31 saturates.
  if (r >= 2147483648.0f) return INT32_MAX;
  if (r <= -2147483648.0f) return INT32_MIN;
  return static_cast<std::int32_t>(r);
}

}  // namespace primcache
