#include "primcache/runtime/backend/kernel_config.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>

#include "primcache/base/error.hpp"

namespace primcache::backend {
namespace {

bool valid_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A strict reader of the one JSON form kernel_config writes.
class reader {
 public:
  explicit reader(std::string_view text) : s_(text) {}

  result<kernel_config> object() {
    kernel_config out;
    skip_ws();
    if (!eat('{')) return fail("expected '{'");
    skip_ws();
    if (eat('}')) return finish(std::move(out));
    for (;;) {
      skip_ws();
      auto name = string();
      if (!name) return name.why();
      skip_ws();
      if (!eat(':')) return fail("expected ':' after \"" + name.value() + "\"");
      skip_ws();
      auto value = integer();
      if (!value) return value.why();
      if (!valid_name(name.value())) {
        return fail("field name \"" + name.value() + "\" is not [a-z0-9_]+ (at most 64)");
      }
      if (out.get(name.value())) return fail("field \"" + name.value() + "\" appears twice");
      out.add(name.value(), value.value());
      skip_ws();
      if (eat('}')) return finish(std::move(out));
      if (!eat(',')) return fail("expected ',' or '}'");
    }
  }

 private:
  result<kernel_config> finish(kernel_config c) {
    skip_ws();
    if (pos_ != s_.size()) return fail("unexpected text after the object");
    return c;
  }
  failure fail(const std::string& what) const {
    return failure{status::invalid_arguments,
                   "kernel configuration JSON at offset " + std::to_string(pos_) + ": " + what};
  }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  // Names are plain: no escapes (a backslash or a control character is an error).
  result<std::string> string() {
    if (!eat('"')) return fail("expected a field name in double quotes");
    const std::size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '\\' || c < 0x20) return fail("escapes and control characters are not allowed");
      ++pos_;
    }
    if (pos_ == s_.size()) return fail("unterminated string");
    std::string out(s_.substr(start, pos_ - start));
    ++pos_;
    return out;
  }
  result<std::int64_t> integer() {
    const std::size_t start = pos_;
    bool negative = eat('-');
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') {
      return fail("expected an integer value");
    }
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9') {
      return fail("leading zeros are not allowed");
    }
    std::uint64_t v = 0;
    const std::uint64_t limit =
        negative ? std::uint64_t{1} << 63 : std::uint64_t{std::numeric_limits<std::int64_t>::max()};
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const auto d = static_cast<std::uint64_t>(s_[pos_] - '0');
      if (v > (limit - d) / 10) {
        pos_ = start;
        return fail("integer out of the 64-bit range");
      }
      v = v * 10 + d;
      ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E')) {
      return fail("values are integers (no fraction or exponent)");
    }
    if (negative)
      return v == (std::uint64_t{1} << 63) ? std::numeric_limits<std::int64_t>::min()
                                           : -static_cast<std::int64_t>(v);
    return static_cast<std::int64_t>(v);
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

}  // namespace

kernel_config& kernel_config::add(std::string_view name, std::int64_t value) {
  if (!valid_name(name)) {
    throw error(status::invalid_arguments,
                "kernel configuration field name '" + std::string(name) + "' is not [a-z0-9_]+");
  }
  if (get(name)) {
    throw error(status::invalid_arguments,
                "kernel configuration field '" + std::string(name) + "' is added twice");
  }
  fields_.push_back({std::string(name), value});
  return *this;
}

std::optional<std::int64_t> kernel_config::get(std::string_view name) const noexcept {
  for (const field& f : fields_) {
    if (f.name == name) return f.value;
  }
  return std::nullopt;
}

void kernel_config::write_key(key_writer& w) const {
  w.u32(static_cast<std::uint32_t>(fields_.size()));
  for (const field& f : fields_) w.str(f.name).i64(f.value);
}

std::string kernel_config::to_json() const {
  std::string out = "{";
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (i) out += ',';
    out.append("\"").append(fields_[i].name).append("\":").append(std::to_string(fields_[i].value));
  }
  out += '}';
  return out;
}

result<kernel_config> kernel_config::from_json(std::string_view json) {
  return reader(json).object();
}

result<bool> kernel_config::expect(std::span<const std::string_view> names) const {
  for (const field& f : fields_) {
    if (std::find(names.begin(), names.end(), f.name) == names.end()) {
      return failure{status::invalid_arguments,
                     "kernel configuration has an unknown field '" + f.name + "'"};
    }
  }
  for (std::string_view n : names) {
    if (!get(n)) {
      return failure{status::invalid_arguments,
                     "kernel configuration has no field '" + std::string(n) + "'"};
    }
  }
  // The same names (each unique): only the order can differ.
  for (std::size_t i = 0; i < names.size() && i < fields_.size(); ++i) {
    if (fields_[i].name != names[i]) {
      return failure{status::invalid_arguments,
                     "kernel configuration field '" + std::string(names[i]) + "' is out of order"};
    }
  }
  return true;
}

config_space::config_space(std::uint64_t size, generator at) : size_(size), at_(std::move(at)) {
  if (size_ != 0 && !at_) {
    throw error(status::invalid_arguments, "a non-empty config_space needs a generator");
  }
}

config_space config_space::of(std::vector<kernel_config> configs) {
  const auto n = static_cast<std::uint64_t>(configs.size());
  auto shared = std::make_shared<const std::vector<kernel_config>>(std::move(configs));
  return config_space(n, [shared](std::uint64_t i) { return (*shared)[i]; });
}

kernel_config config_space::at(std::uint64_t index) const {
  if (index >= size_) {
    throw error(status::invalid_arguments, "candidate " + std::to_string(index) +
                                               " is outside a space of " + std::to_string(size_));
  }
  return at_(index);
}

}  // namespace primcache::backend
