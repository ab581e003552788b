// primcache/const_cache/capacity_config.hpp — PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY:
// per engine kind capacities (MB) and, optionally, policies.
//
// The value has the constant-tensor-cache capacity RFC's form,
// `kind:megabytes` parts separated by ';', each with an optional `:policy`:
//
//   PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY='cpu:10240;gpu:2048:lru'
//
//   primcache::constant_capacity_config c =
//       primcache::parse_constant_capacity("cpu:10240;gpu:-1");
//   // c.entries: {cpu, 10240, no policy}
//   // c.messages: {"part 2 'gpu:-1': size '-1' is negative; gpu keeps its default"}
//
// The parser is a pure function: it returns what it understood and one
// message per malformed part, and applies nothing; the runtime applies the
// entries at start (to constant_tensor_caches::set_capacity) and lets later
// API calls win. A malformed part — an unknown kind, a size that is not a
// decimal number of MB, negative or too large, an empty or extra field, an
// empty part (a stray or doubled ';'), an unknown policy, a kind given twice —
// is ignored for its kind only: the default stands for that kind, the other
// parts apply. Spaces around parts and fields are ignored.
// read_constant_capacity_env() reads the variable and reports the messages
// on stderr once (base's report_malformed_env, one line for the variable).
//
// Thread-safety: pure functions; read_constant_capacity_env reads the
// environment (do not setenv concurrently). Exceptions: std::bad_alloc only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/cache/cache_policy.hpp"

namespace primcache {

inline constexpr const char* constant_capacity_env = "PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY";

// The engine kinds the variable names unless the caller says otherwise.
inline constexpr std::string_view default_constant_cache_kinds[] = {"cpu", "gpu"};

struct constant_capacity_entry {
  std::string kind;                    // one of the known kinds
  std::uint64_t megabytes = 0;         // <= constant_tensor_cache::max_megabytes
  std::optional<cache_policy> policy;  // absent: the kind's policy stays
};

struct constant_capacity_config {
  std::vector<constant_capacity_entry> entries;  // in the order given
  std::vector<std::string> messages;             // one per malformed part
};

PRIMCACHE_API constant_capacity_config parse_constant_capacity(
    std::string_view text, std::span<const std::string_view> kinds = default_constant_cache_kinds);

// The variable, parsed; unset or empty gives nothing. Messages are reported
// once (see above) and also returned.
PRIMCACHE_API constant_capacity_config
read_constant_capacity_env(std::span<const std::string_view> kinds = default_constant_cache_kinds);

// The policy named `name` ("no_evict", "lru", and whatever else
// primcache::cache offers), or nullopt.
PRIMCACHE_API std::optional<cache_policy> constant_cache_policy_from_string(
    std::string_view name) noexcept;
// The names of the policies primcache::cache offers, comma separated.
PRIMCACHE_API std::string constant_cache_policy_names();

}  // namespace primcache
