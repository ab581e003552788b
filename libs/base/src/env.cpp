#include "primcache/base/env.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>

#include "primcache/base/thread_annotations.hpp"

namespace primcache {
namespace {

std::string quoted(std::string_view text) {
  std::string out = "'";
  out.append(text);
  out.push_back('\'');
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

class report_log {
 public:
  // Returns false when `name` was already reported.
  bool add(std::string_view name, std::string message) PRIMCACHE_EXCLUDES(mu_) {
    lock_guard g(mu_);
    if (!names_.emplace(name).second) return false;
    messages_.push_back(std::move(message));
    return true;
  }
  std::vector<std::string> messages() PRIMCACHE_EXCLUDES(mu_) {
    lock_guard g(mu_);
    return messages_;
  }

 private:
  mutex mu_;
  std::set<std::string, std::less<>> names_ PRIMCACHE_GUARDED_BY(mu_);
  std::vector<std::string> messages_ PRIMCACHE_GUARDED_BY(mu_);
};

report_log& reports() {
  static report_log* log = new report_log;  // never destroyed: usable during exit
  return *log;
}
// Made at load, not on first use (fork safety: docs/runtime.md).
[[maybe_unused]] const report_log& reports_at_load = reports();

}  // namespace

result<std::int64_t> parse_int(std::string_view text, std::int64_t min, std::int64_t max) {
  // One optional sign: from_chars takes '-' but not '+', so strip a '+' and
  // then refuse any second sign.
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') {
    digits.remove_prefix(1);
    if (!digits.empty() && digits.front() == '-') digits = {};
  }
  if (digits.empty() || digits.front() == '+' || digits.front() == ' ') {
    return failure{status::invalid_arguments, quoted(text) + " is not an integer"};
  }
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return failure{status::invalid_arguments, quoted(text) + " is out of range"};
  }
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return failure{status::invalid_arguments, quoted(text) + " is not an integer"};
  }
  if (value < min || value > max) {
    return failure{status::invalid_arguments, quoted(text) + " is outside [" + std::to_string(min) +
                                                  ", " + std::to_string(max) + "]"};
  }
  return value;
}

result<std::uint64_t> parse_size(std::string_view text, std::uint64_t max) {
  std::size_t n = 0;
  while (n < text.size() && std::isdigit(static_cast<unsigned char>(text[n]))) ++n;
  if (n == 0) return failure{status::invalid_arguments, quoted(text) + " is not a size"};
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + n, value);
  if (ec == std::errc::result_out_of_range) {
    return failure{status::invalid_arguments, quoted(text) + " is out of range"};
  }
  std::string_view suffix = text.substr(n);
  unsigned shift = 0;
  if (!suffix.empty()) {
    static constexpr std::pair<std::string_view, unsigned> kSuffixes[] = {
        {"K", 10}, {"KiB", 10}, {"M", 20}, {"MiB", 20},
        {"G", 30}, {"GiB", 30}, {"T", 40}, {"TiB", 40}};
    bool known = false;
    for (auto [s, bits] : kSuffixes) {
      if (iequals(suffix, s)) {
        shift = bits;
        known = true;
        break;
      }
    }
    if (!known) {
      return failure{status::invalid_arguments,
                     quoted(text) + " has an unknown suffix (use K, M, G or T)"};
    }
  }
  if (shift != 0 && value > (std::numeric_limits<std::uint64_t>::max() >> shift)) {
    return failure{status::invalid_arguments, quoted(text) + " is out of range"};
  }
  value <<= shift;
  if (value > max) {
    return failure{status::invalid_arguments,
                   quoted(text) + " exceeds the maximum " + std::to_string(max)};
  }
  return value;
}

result<bool> parse_bool(std::string_view text) {
  for (std::string_view t : {"1", "true", "on", "yes"}) {
    if (iequals(text, t)) return true;
  }
  for (std::string_view f : {"0", "false", "off", "no"}) {
    if (iequals(text, f)) return false;
  }
  return failure{status::invalid_arguments, quoted(text) + " is not a boolean (use 0 or 1)"};
}

std::optional<std::string> env_string(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

void report_malformed_env(std::string_view name, std::string_view value, std::string_view reason,
                          std::string_view default_text) {
  std::string message = "primcache: ignoring ";
  message.append(name).append("=").append(quoted(value)).append(": ").append(reason);
  message.append("; using ").append(default_text);
  if (reports().add(name, message)) {
    std::fprintf(stderr, "%s\n", message.c_str());
  }
}

std::vector<std::string> env_reports() {
  return reports().messages();
}

namespace {
// Shared by the env_* helpers: unset → fallback; parse failure → report.
template <typename T, typename Parse>
T env_value(const char* name, T fallback, std::string default_text, Parse parse) {
  auto text = env_string(name);
  if (!text) return fallback;
  auto parsed = parse(*text);
  if (!parsed) {
    report_malformed_env(name, *text, parsed.why().message, default_text);
    return fallback;
  }
  return parsed.value();
}
}  // namespace

std::int64_t env_int(const char* name, std::int64_t fallback, std::int64_t min, std::int64_t max) {
  return env_value(name, fallback, std::to_string(fallback),
                   [&](std::string_view t) { return parse_int(t, min, max); });
}

std::uint64_t env_size(const char* name, std::uint64_t fallback, std::uint64_t max) {
  return env_value(name, fallback, std::to_string(fallback),
                   [&](std::string_view t) { return parse_size(t, max); });
}

bool env_bool(const char* name, bool fallback) {
  return env_value(name, fallback, fallback ? "1" : "0",
                   [](std::string_view t) { return parse_bool(t); });
}

}  // namespace primcache
