// primcache/base/env.hpp — strict parsing of numbers and environment variables.
//
// Every knob has an environment variable; a malformed value must never crash
// or be half-read ("1e3" is not 1). The parsers accept the whole string or
// nothing. The env_* helpers return the fallback for an unset variable, and
// for a malformed one they report the variable, the value and the reason on
// stderr once per variable, then return the fallback.
//
//   std::int64_t cap = primcache::env_int("PRIMCACHE_PRIMITIVE_CACHE_CAPACITY",
//                                         /*fallback=*/1024, /*min=*/0,
//                                         /*max=*/std::numeric_limits<int>::max());
//
// Thread-safety: all functions may be called from any thread. They read the
// environment with getenv; do not setenv concurrently (POSIX forbids it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/base/result.hpp"

namespace primcache {

// A decimal integer with optional leading '-' (or '+'), nothing else: no
// spaces, no exponent, no suffix. Fails when out of [min, max].
PRIMCACHE_API result<std::int64_t> parse_int(std::string_view text, std::int64_t min,
                                             std::int64_t max);

// A byte count: a decimal integer optionally followed by one binary suffix
// K, M, G or T (also KiB, MiB, GiB, TiB; case-insensitive). "64M" is 64 MiB.
// Fails when the result exceeds max.
PRIMCACHE_API result<std::uint64_t> parse_size(std::string_view text, std::uint64_t max);

// A boolean: 0/1, true/false, on/off, yes/no (case-insensitive).
PRIMCACHE_API result<bool> parse_bool(std::string_view text);

// The variable's value, or nullopt when it is unset. An empty value is "".
PRIMCACHE_API std::optional<std::string> env_string(const char* name);

// Unset: fallback, silently. Malformed or out of range: reported once per
// variable, then fallback.
PRIMCACHE_API std::int64_t env_int(const char* name, std::int64_t fallback, std::int64_t min,
                                   std::int64_t max);
PRIMCACHE_API std::uint64_t env_size(const char* name, std::uint64_t fallback, std::uint64_t max);
PRIMCACHE_API bool env_bool(const char* name, bool fallback);

// Reports a malformed value of `name` on stderr, once per variable for the
// life of the process: "primcache: ignoring NAME='VALUE': REASON; using
// DEFAULT". Libraries that parse richer formats call this too.
PRIMCACHE_API void report_malformed_env(std::string_view name, std::string_view value,
                                        std::string_view reason, std::string_view default_text);

// Every report made so far, oldest first (for operators' diagnostics pages
// and tests).
PRIMCACHE_API std::vector<std::string> env_reports();

}  // namespace primcache
