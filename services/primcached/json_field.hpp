// services/primcached/json_field.hpp — reading a JSON document field by
// field, with errors that name the file and the field:
//
//   workload.json: primitives[3].shapes.src: expected an array of positive integers
//
//   boost::json::value doc = primcache::primcached::parse_json_text(text, "workload.json");
//   primcache::primcached::json_field root(doc, "workload.json");
//   root.allow_only({"name", "primitives"});
//   for (std::size_t i = 0; i < root.required("primitives").array().size(); ++i) ...
//
// Thread-safety: a json_field borrows the document; read-only use from any
// thread. Exceptions: every failure throws primcache::error(invalid_arguments)
// whose message() is "<file>: <field path>: <what was wrong>".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/value.hpp>

namespace primcache::primcached {

// Parses JSON text; a syntax error names the file, the line and the column,
// a key given twice in one object the file, its line and the key (RFC 8259
// leaves duplicates to the reader; Boost.JSON would keep the last).
boost::json::value parse_json_text(std::string_view text, const std::string& file);

class json_field {
 public:
  // The document's root; `file` names it in messages and must outlive the field.
  json_field(const boost::json::value& root, const std::string& file);

  const boost::json::value& value() const noexcept { return *value_; }
  // "primitives[3].shapes.src"; "(top level)" for the root.
  std::string path() const;

  [[noreturn]] void fail(std::string_view what) const;

  const boost::json::object& object() const;
  const boost::json::array& array() const;
  std::string string() const;
  bool boolean() const;
  double number() const;
  // A number within float's range (finite, magnitude at most FLT_MAX), as a float.
  float finite_float() const;
  // An integer in [min, max] (a number with no fractional part).
  std::int64_t integer(std::int64_t min, std::int64_t max) const;
  // A non-empty array of integers > 0.
  std::vector<std::int64_t> positive_dims() const;
  // An array of integers >= 0 with exactly `count` entries.
  std::vector<std::int64_t> non_negative_dims(std::size_t count) const;
  // A non-empty array of numbers, each a finite_float().
  std::vector<float> numbers() const;

  bool has(std::string_view key) const;
  std::optional<json_field> member(std::string_view key) const;
  // Throws "<path>: missing field <key>" when absent.
  json_field required(std::string_view key) const;
  json_field element(std::size_t index) const;
  // Refuses members not in `keys`: "<path>.<key>: unknown field (expected one of a, b)".
  void allow_only(std::initializer_list<std::string_view> keys) const;

 private:
  json_field(const boost::json::value& v, std::string path, const std::string& file);

  const boost::json::value* value_;
  std::string path_;
  const std::string* file_;
};

}  // namespace primcache::primcached
