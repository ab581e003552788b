// primcache/control/names.hpp — the rules for the names of caches and switches.
//
// Names registered with control end up in Prometheus labels, admin URLs and
// JSON, so they are restricted to what needs no escaping anywhere: 1 to
// max_control_name_length characters from [a-z0-9_.-].
//
//   primcache::is_valid_control_name("primitive.cpu");        // true
//   primcache::check_control_name("cache", "Primitive Cache");
//   // throws error(invalid_arguments, "cache name 'Primitive Cache' has 'P' at
//   //   position 0; names use only [a-z0-9_.-]")
//
// Thread-safety: pure functions. Exceptions: check_control_name throws
// primcache::error(invalid_arguments); is_valid_control_name never throws.
#pragma once

#include <cstddef>
#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache {

inline constexpr std::size_t max_control_name_length = 128;

PRIMCACHE_API bool is_valid_control_name(std::string_view name) noexcept;

// Throws primcache::error(status::invalid_arguments) naming `what` ("cache",
// "switch"), the name (unprintable bytes as \xNN) and the first problem.
PRIMCACHE_API void check_control_name(std::string_view what, std::string_view name);

}  // namespace primcache
