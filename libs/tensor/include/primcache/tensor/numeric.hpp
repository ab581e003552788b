// primcache/tensor/numeric.hpp — reference element conversions.
//
// The conversions that reference implementations and tests use to define what
// a correct kernel computes when it changes an element's type. Half-precision
// values travel as their bit patterns (std::uint16_t), so this header needs no
// half type.
//
// Rounding rules, the same for every conversion that rounds:
//   - round to nearest, ties to even, whatever the floating-point
//     environment's rounding mode (the functions never consult it);
//   - f32 -> bf16 / f16: a NaN stays a NaN of the same sign, made quiet, with
//     the top bits of its payload kept; infinities stay infinities; f32
//     values at or above the largest f16 plus half an f16 ulp (65520) become
//     infinity; values below the smallest normal f16 become f16 subnormals
//     (or zero), still rounded to nearest even;
//   - bf16 / f16 -> f32 is exact; a NaN comes back quiet;
//   - f32 -> s8 / u8 / s32: round to nearest even, then saturate to the
//     type's range (infinities saturate too); NaN becomes 0.
//
//   std::uint16_t h = primcache::f32_to_f16(1.0f / 3.0f);   // 0x3555
//   float back = primcache::f16_to_f32(h);                   // 0.33325195f
//   std::int8_t q = primcache::f32_to_s8(-200.5f);           // -128
//   std::uint8_t u = primcache::f32_to_u8(2.5f);             // 2 (tie to even)
//
// Thread-safety: pure functions. Exceptions: none.
#pragma once

#include <cstdint>

#include "primcache/base/export.hpp"

namespace primcache {

PRIMCACHE_API std::uint16_t f32_to_bf16(float value) noexcept;
PRIMCACHE_API float bf16_to_f32(std::uint16_t bits) noexcept;

PRIMCACHE_API std::uint16_t f32_to_f16(float value) noexcept;
PRIMCACHE_API float f16_to_f32(std::uint16_t bits) noexcept;

PRIMCACHE_API std::int8_t f32_to_s8(float value) noexcept;
PRIMCACHE_API std::uint8_t f32_to_u8(float value) noexcept;
PRIMCACHE_API std::int32_t f32_to_s32(float value) noexcept;

// `value` rounded to the nearest integer, ties to even, as a float (NaN and
// infinities are returned unchanged). The rounding step of the integer
// conversions above, exposed for reference kernels that saturate elsewhere.
PRIMCACHE_API float round_half_even(float value) noexcept;

}  // namespace primcache
