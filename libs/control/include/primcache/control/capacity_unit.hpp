// primcache/control/capacity_unit.hpp — what a registered cache's capacity
// and size count.
//
// The unit is declared once, at registration; control never converts between
// units, it only tells readers (metrics, the admin console) how to read the
// numbers.
//
//   auto reg = primcache::register_cache("primitive", cache, primcache::capacity_unit::entries);
//   primcache::to_string(primcache::capacity_unit::megabytes);   // "MB"
//
// Thread-safety: values and pure functions. Exceptions: none.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache {

enum class capacity_unit : int {
  entries = 0,    // capacity and size count entries
  bytes = 1,      // ... bytes
  megabytes = 2,  // ... MiB (2^20 bytes), as the capacity knobs are given
};

// "entries", "bytes", "MB"; "unknown" for values outside the enum.
PRIMCACHE_API std::string_view to_string(capacity_unit unit) noexcept;

// The capacity a cache reports when it has no limit.
inline constexpr std::uint64_t unlimited_capacity = std::numeric_limits<std::uint64_t>::max();

}  // namespace primcache
