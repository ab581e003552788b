// primcache/tensor/data_type.hpp — the element types a tensor may hold.
//
// data_type names the element type of a memory descriptor. Its values are
// stable: they are written into primitive keys and cache blob ids, so a value
// is never renumbered or reused.
//
//   primcache::data_type dt = primcache::data_type::bf16;
//   std::size_t bytes = primcache::size_of(dt);          // 2
//   std::string_view name = primcache::to_string(dt);    // "bf16"
//   auto parsed = primcache::parse_data_type("s8");      // data_type::s8
//
// Thread-safety: pure functions over values. Exceptions: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache {

enum class data_type : std::uint8_t {
  undef = 0,  // no element type: the empty descriptor
  f32 = 1,
  f16 = 2,   // IEEE-754 binary16
  bf16 = 3,  // the upper half of an f32
  s8 = 4,
  u8 = 5,
  s32 = 6,
};

// Bytes per element; 0 for undef and for values outside the enum.
PRIMCACHE_API std::size_t size_of(data_type dt) noexcept;

// "f32", "f16", "bf16", "s8", "u8", "s32", "undef"; "unknown" for values
// outside the enum.
PRIMCACHE_API std::string_view to_string(data_type dt) noexcept;

// True for s8, u8 and s32.
PRIMCACHE_API bool is_integral(data_type dt) noexcept;

// True for the named types above other than undef.
PRIMCACHE_API bool is_known(data_type dt) noexcept;

// The inverse of to_string for the six element types; nullopt for anything
// else (including "undef").
PRIMCACHE_API std::optional<data_type> parse_data_type(std::string_view name) noexcept;

}  // namespace primcache
