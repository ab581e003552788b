#include "primcache/const_cache/capacity_config.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

#include "primcache/base/env.hpp"
#include "primcache/const_cache/constant_tensor_cache.hpp"

namespace primcache {
namespace {

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const std::size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

std::string quoted(std::string_view s) {
  return "'" + std::string(s) + "'";
}

std::string join(std::span<const std::string_view> kinds) {
  std::string out;
  for (std::string_view k : kinds) {
    if (!out.empty()) out += ", ";
    out += k;
  }
  return out;
}

// Megabytes: decimal digits only, at most constant_tensor_cache::max_megabytes.
// Returns the reason when malformed.
std::string parse_megabytes(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return "the size is empty";
  if (text.front() == '-') {
    const bool number = text.size() > 1 && std::all_of(text.begin() + 1, text.end(),
                                                       [](char c) { return c >= '0' && c <= '9'; });
    return number ? "size " + quoted(text) + " is negative"
                  : "size " + quoted(text) + " is not a number of MB";
  }
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return "size " + quoted(text) + " is not a number of MB";
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (constant_tensor_cache::max_megabytes - digit) / 10) {
      return "size " + quoted(text) + " MB is too large (the limit is " +
             std::to_string(constant_tensor_cache::max_megabytes) + ")";
    }
    value = value * 10 + digit;
  }
  out = value;
  return {};
}

}  // namespace

std::optional<cache_policy> constant_cache_policy_from_string(std::string_view name) noexcept {
  for (int i = 0; i < 256; ++i) {
    const auto p = static_cast<cache_policy>(i);
    const std::string_view n = to_string(p);
    if (n == "unknown") break;
    if (n == name) return p;
  }
  return std::nullopt;
}

std::string constant_cache_policy_names() {
  std::string out;
  for (int i = 0; i < 256; ++i) {
    const std::string_view n = to_string(static_cast<cache_policy>(i));
    if (n == "unknown") break;
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

constant_capacity_config parse_constant_capacity(std::string_view text,
                                                 std::span<const std::string_view> kinds) {
  constant_capacity_config config;
  if (trim(text).empty()) return config;
  // Kinds already claimed by a part, well formed or not: a second part for
  // the same kind makes the kind ambiguous, so neither part applies.
  std::vector<std::string> seen;
  std::vector<std::string> ambiguous;
  const std::vector<std::string_view> parts = split(text, ';');
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string_view part = trim(parts[i]);
    const std::string where = "part " + std::to_string(i + 1) + " " + quoted(part) + ": ";
    if (part.empty()) {
      config.messages.push_back("part " + std::to_string(i + 1) +
                                " is empty (a stray or doubled ';'); ignored");
      continue;
    }
    std::vector<std::string_view> fields = split(part, ':');
    for (auto& f : fields) f = trim(f);
    const std::string_view kind = fields[0];
    const bool known = std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
    const std::string keeps =
        known ? "; " + std::string(kind) + " keeps its default" : std::string("; ignored");
    if (!known) {
      config.messages.push_back(where +
                                (kind.empty() ? std::string("the engine kind is empty")
                                              : "unknown engine kind " + quoted(kind)) +
                                " (known: " + join(kinds) + ")" + keeps);
      continue;
    }
    if (std::find(seen.begin(), seen.end(), kind) != seen.end()) {
      config.messages.push_back(where + std::string(kind) + " is given more than once" + keeps);
      ambiguous.emplace_back(kind);
      continue;
    }
    seen.emplace_back(kind);
    if (fields.size() < 2) {
      config.messages.push_back(where + "no size (expected kind:MB or kind:MB:policy)" + keeps);
      continue;
    }
    if (fields.size() > 3) {
      config.messages.push_back(where + "too many ':' (expected kind:MB or kind:MB:policy)" +
                                keeps);
      continue;
    }
    constant_capacity_entry entry;
    entry.kind = std::string(kind);
    if (std::string why = parse_megabytes(fields[1], entry.megabytes); !why.empty()) {
      config.messages.push_back(where + why + keeps);
      continue;
    }
    if (fields.size() == 3) {
      entry.policy = constant_cache_policy_from_string(fields[2]);
      if (!entry.policy) {
        config.messages.push_back(where +
                                  (fields[2].empty() ? std::string("the policy is empty")
                                                     : "unknown policy " + quoted(fields[2])) +
                                  " (known: " + constant_cache_policy_names() + ")" + keeps);
        continue;
      }
    }
    config.entries.push_back(std::move(entry));
  }
  std::erase_if(config.entries, [&](const constant_capacity_entry& e) {
    return std::find(ambiguous.begin(), ambiguous.end(), e.kind) != ambiguous.end();
  });
  return config;
}

constant_capacity_config read_constant_capacity_env(std::span<const std::string_view> kinds) {
  const std::optional<std::string> text = env_string(constant_capacity_env);
  if (!text) return {};
  constant_capacity_config config = parse_constant_capacity(*text, kinds);
  if (!config.messages.empty()) {
    std::string reason;
    for (const std::string& m : config.messages) {
      if (!reason.empty()) reason += "; ";
      reason += m;
    }
    report_malformed_env(constant_capacity_env, *text, reason,
                         "the default (unlimited, no_evict) for those kinds");
  }
  return config;
}

}  // namespace primcache
