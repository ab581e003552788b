#include "json_field.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include <boost/json/parser.hpp>

#include "primcache/base/error.hpp"
#include "primcache/base/json_keys.hpp"

namespace primcache::primcached {

namespace {

bool is_integral_number(const boost::json::value& v) {
  if (v.is_int64() || v.is_uint64()) return true;
  if (v.is_double()) {
    const double d = v.get_double();
    return std::isfinite(d) && d == std::floor(d);
  }
  return false;
}

// The value of an integral number, saturated to int64 (callers range-check).
std::int64_t integral_value(const boost::json::value& v) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64()) {
    return v.get_uint64() > static_cast<std::uint64_t>(INT64_MAX)
               ? INT64_MAX
               : static_cast<std::int64_t>(v.get_uint64());
  }
  const double d = v.get_double();
  if (d >= 9.2e18) return INT64_MAX;
  if (d <= -9.2e18) return INT64_MIN;
  return static_cast<std::int64_t>(d);
}

// A number a float holds: converting a double outside float's range (or not
// finite: Boost.JSON reads 1e400 as infinity) to float is undefined.
bool fits_float(double d) {
  return std::isfinite(d) && std::fabs(d) <= std::numeric_limits<float>::max();
}

std::string float_range_text() {
  char text[96];
  std::snprintf(text, sizeof text, "expected a finite number of magnitude at most %g (a float)",
                static_cast<double>(std::numeric_limits<float>::max()));
  return text;
}

// The line of byte `at` in `text`, and its column.
std::pair<std::size_t, std::size_t> line_and_column(std::string_view text, std::size_t at) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

}  // namespace

boost::json::value parse_json_text(std::string_view text, const std::string& file) {
  boost::json::parser parser;
  boost::system::error_code ec;
  // The whole document: text after its end is extra_data.
  const std::size_t consumed = parser.write(text.data(), text.size(), ec);
  if (ec) {
    const auto [line, column] = line_and_column(text, consumed);
    throw error(status::invalid_arguments, file + ": line " + std::to_string(line) + ", column " +
                                               std::to_string(column) + ": not valid JSON (" +
                                               ec.message() + ")");
  }
  // boost::json::object keeps the last of a key given twice, so {"threads":
  // 1, "threads": 1024} would run 1024 threads.
  if (const std::optional<duplicate_json_key> d = find_duplicate_json_key(text)) {
    throw error(status::invalid_arguments,
                file + ": line " + std::to_string(line_and_column(text, d->offset).first) +
                    ": duplicate key \"" + d->key + "\" (a key may appear once in an object)");
  }
  return parser.release();
}

json_field::json_field(const boost::json::value& root, const std::string& file)
    : value_(&root), file_(&file) {}

json_field::json_field(const boost::json::value& v, std::string path, const std::string& file)
    : value_(&v), path_(std::move(path)), file_(&file) {}

std::string json_field::path() const {
  return path_.empty() ? std::string("(top level)") : path_;
}

void json_field::fail(std::string_view what) const {
  throw error(status::invalid_arguments, *file_ + ": " + path() + ": " + std::string(what));
}

const boost::json::object& json_field::object() const {
  if (!value_->is_object()) fail("expected an object");
  return value_->get_object();
}

const boost::json::array& json_field::array() const {
  if (!value_->is_array()) fail("expected an array");
  return value_->get_array();
}

std::string json_field::string() const {
  if (!value_->is_string()) fail("expected a string");
  return std::string(value_->get_string());
}

bool json_field::boolean() const {
  if (!value_->is_bool()) fail("expected true or false");
  return value_->get_bool();
}

double json_field::number() const {
  if (value_->is_int64()) return static_cast<double>(value_->get_int64());
  if (value_->is_uint64()) return static_cast<double>(value_->get_uint64());
  if (value_->is_double()) return value_->get_double();
  fail("expected a number");
}

float json_field::finite_float() const {
  const double d = number();
  if (!fits_float(d)) fail(float_range_text());
  return static_cast<float>(d);
}

std::int64_t json_field::integer(std::int64_t min, std::int64_t max) const {
  if (!is_integral_number(*value_)) fail("expected an integer");
  const std::int64_t v = integral_value(*value_);
  if (v < min || v > max) {
    fail("expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return v;
}

std::vector<std::int64_t> json_field::positive_dims() const {
  constexpr std::string_view what = "expected an array of positive integers";
  if (!value_->is_array() || value_->get_array().empty()) fail(what);
  std::vector<std::int64_t> out;
  for (const boost::json::value& v : value_->get_array()) {
    if (!is_integral_number(v) || integral_value(v) <= 0 || integral_value(v) > (1 << 30)) {
      fail(what);
    }
    out.push_back(integral_value(v));
  }
  return out;
}

std::vector<std::int64_t> json_field::non_negative_dims(std::size_t count) const {
  const std::string what =
      "expected an array of " + std::to_string(count) + " non-negative integers";
  if (!value_->is_array() || value_->get_array().size() != count) fail(what);
  std::vector<std::int64_t> out;
  for (const boost::json::value& v : value_->get_array()) {
    if (!is_integral_number(v) || integral_value(v) < 0 || integral_value(v) > (1 << 20)) {
      fail(what);
    }
    out.push_back(integral_value(v));
  }
  return out;
}

std::vector<float> json_field::numbers() const {
  constexpr std::string_view what = "expected a non-empty array of numbers";
  if (!value_->is_array() || value_->get_array().empty()) fail(what);
  std::vector<float> out;
  for (std::size_t i = 0; i < value_->get_array().size(); ++i) {
    if (!value_->get_array()[i].is_number()) fail(what);
    out.push_back(element(i).finite_float());
  }
  return out;
}

bool json_field::has(std::string_view key) const {
  return object().contains(key);
}

std::optional<json_field> json_field::member(std::string_view key) const {
  const boost::json::value* v = object().if_contains(key);
  if (v == nullptr) return std::nullopt;
  return json_field(*v, path_.empty() ? std::string(key) : path_ + "." + std::string(key), *file_);
}

json_field json_field::required(std::string_view key) const {
  std::optional<json_field> m = member(key);
  if (!m) fail("missing field " + std::string(key));
  return *m;
}

json_field json_field::element(std::size_t index) const {
  return json_field(array().at(index), path_ + "[" + std::to_string(index) + "]", *file_);
}

void json_field::allow_only(std::initializer_list<std::string_view> keys) const {
  for (const auto& kv : object()) {
    if (std::find(keys.begin(), keys.end(), std::string_view(kv.key())) != keys.end()) continue;
    std::string expected;
    for (std::string_view k : keys) {
      if (!expected.empty()) expected += ", ";
      expected += k;
    }
    json_field(kv.value(),
               path_.empty() ? std::string(kv.key()) : path_ + "." + std::string(kv.key()), *file_)
        .fail("unknown field (expected one of " + expected + ")");
  }
}

}  // namespace primcache::primcached
