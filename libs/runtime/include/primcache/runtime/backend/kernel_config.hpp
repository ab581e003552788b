// primcache/runtime/backend/kernel_config.hpp — a kernel configuration in a
// form every backend shares: named integer fields in a fixed order, and a
// space of candidates to choose from.
//
// Each backend kernel has its own typed configuration (the CPU matmul's
// register and cache blocks, thread grid, loop order, packing); it converts
// to and from this form, which is what primitive descriptors expose, keys
// hold, tune tables store and blobs carry:
//
//   primcache::backend::kernel_config c;
//   c.add("mr", 8).add("nr", 48).add("pack_b", 1);
//   std::string json = c.to_json();                 // {"mr":8,"nr":48,"pack_b":1}
//   auto back = primcache::backend::kernel_config::from_json(json);
//   if (!back) return back.why();                   // malformed JSON, with the offset
//   if (auto ok = back.value().expect({"mr", "nr", "pack_b"}); !ok) return ok.why();
//
// Field names are [a-z0-9_]+ and unique; values are 64-bit integers
// (booleans 0/1, enumerations by value). Equality compares names, order and
// values. A config_space enumerates candidates lazily: size() and at(i),
// with at() cheap enough to walk spaces of millions.
//
// Thread-safety: value types; a config_space may be read from any thread.
// Exceptions: add() throws primcache::error (invalid_arguments) for a bad or
// repeated name; config_space::at throws invalid_arguments out of range;
// from_json and expect report failures as values.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/base/result.hpp"
#include "primcache/keyhash/key.hpp"

namespace primcache::backend {

class PRIMCACHE_API kernel_config {
 public:
  struct field {
    std::string name;
    std::int64_t value = 0;
    friend bool operator==(const field&, const field&) = default;
  };

  kernel_config() = default;

  // Appends a field (names must be [a-z0-9_]+ and not present yet).
  kernel_config& add(std::string_view name, std::int64_t value);
  const std::vector<field>& fields() const noexcept { return fields_; }
  bool empty() const noexcept { return fields_.empty(); }
  // The value of `name`, or nullopt.
  std::optional<std::int64_t> get(std::string_view name) const noexcept;

  // u32 count, then each field as str(name), i64(value).
  void write_key(key_writer& w) const;
  // A flat JSON object in field order: {"mr":8,"nr":48}.
  std::string to_json() const;
  // Parses exactly the form to_json writes (whitespace allowed between
  // tokens): an object of unique names with integer values. Anything else is
  // invalid_arguments naming the offset and what was expected.
  static result<kernel_config> from_json(std::string_view json);
  // That the fields are exactly `names`, in that order: a missing, unknown
  // or misplaced field is invalid_arguments naming it.
  result<bool> expect(std::span<const std::string_view> names) const;
  result<bool> expect(std::initializer_list<std::string_view> names) const {
    return expect(std::span<const std::string_view>(names.begin(), names.size()));
  }

  friend bool operator==(const kernel_config&, const kernel_config&) = default;

 private:
  std::vector<field> fields_;
};

// The candidates of one problem: size() configurations, each made by at(i).
// An empty space (the default) has none.
class PRIMCACHE_API config_space {
 public:
  using generator = std::function<kernel_config(std::uint64_t index)>;

  config_space() = default;
  config_space(std::uint64_t size, generator at);
  // A space of these configurations.
  static config_space of(std::vector<kernel_config> configs);

  std::uint64_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  kernel_config at(std::uint64_t index) const;

 private:
  std::uint64_t size_ = 0;
  generator at_;
};

}  // namespace primcache::backend
