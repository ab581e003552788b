// primcache/control/setting.hpp — knobs that are not capacities: integers
// with bounds, strings, enums with choices and booleans, each validated, that
// an operator may read and change by name (the JIT mode, sizes, durations).
//
// An owner registers a setting_spec and keeps the registration; it reads the
// current value from it (integers and booleans lock-free) and may be told of
// changes through on_change. The admin server and tests change it by name
// through the registry; a refused value throws error(invalid_arguments) whose
// message says why, and the value stays.
//
//   primcache::setting_registration jit_mode_ = primcache::control().register_setting(
//       primcache::setting_spec::choice("jit_mode", "how kernels are compiled", "tiered",
//                                       {"tiered", "sync"}));
//   if (jit_mode_.string_value() == "sync") ...                        // owner
//   primcache::control().set_setting("jit_mode", std::string("sync")); // operator
//   primcache::control().set_setting("jit_mode", std::string("fast"));
//   // throws error(invalid_arguments, "setting 'jit_mode' is an enum of tiered, sync;
//   //   'fast' is not one of them")
//
// Checks, in order: the value's type (int for int, bool for bool, string for
// string and enum), the bounds (int: min <= v <= max), the choices (enum),
// then the spec's validator (returns "" to accept, else the reason, reported
// as "setting 'NAME': REASON"). The initial value must pass them too.
//
// Thread-safety: every member may be called from any thread at once. Setting
// one setting is serialized: its validator and on_change run on the setter's
// thread, one setter at a time, without the registry's lock; they must not set
// the same setting again (that would wait for itself). Exceptions:
// primcache::error as above; whatever on_change throws (the old value is then
// restored).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "primcache/base/export.hpp"

namespace primcache {

enum class setting_type : int { integer = 0, string = 1, enumeration = 2, boolean = 3 };

// "int", "string", "enum", "bool" (the admin API's names).
PRIMCACHE_API const char* to_string(setting_type type) noexcept;

// int for integer, std::string for string and enumeration, bool for boolean.
using setting_value = std::variant<std::int64_t, std::string, bool>;

struct setting_spec {
  std::string name;
  std::string description;
  setting_type type = setting_type::integer;
  setting_value initial;
  std::int64_t min = std::numeric_limits<std::int64_t>::min();  // integer only
  std::int64_t max = std::numeric_limits<std::int64_t>::max();  // integer only
  std::vector<std::string> choices;                             // enumeration only
  // Returns "" to accept the value, else the reason it is refused.
  std::function<std::string(const setting_value&)> validator;
  // Called after a change is stored, with the new value.
  std::function<void(const setting_value&)> on_change;

  PRIMCACHE_API static setting_spec integer(std::string name, std::string description,
                                            std::int64_t initial, std::int64_t min,
                                            std::int64_t max);
  PRIMCACHE_API static setting_spec string(std::string name, std::string description,
                                           std::string initial);
  PRIMCACHE_API static setting_spec choice(std::string name, std::string description,
                                           std::string initial, std::vector<std::string> choices);
  PRIMCACHE_API static setting_spec boolean(std::string name, std::string description,
                                            bool initial);
};

// One registered setting at one moment (list_settings).
struct setting_info {
  std::string name;
  std::string description;
  setting_type type = setting_type::integer;
  setting_value value;
  setting_value initial;
  std::int64_t min = 0;  // integer only
  std::int64_t max = 0;  // integer only
  std::vector<std::string> choices;
};

namespace control_internal {
class registry_state;
class setting_entry;
}  // namespace control_internal

class PRIMCACHE_API setting_registration {
 public:
  setting_registration() noexcept = default;
  setting_registration(setting_registration&&) noexcept = default;
  setting_registration& operator=(setting_registration&& other) noexcept;
  setting_registration(const setting_registration&) = delete;
  setting_registration& operator=(const setting_registration&) = delete;
  ~setting_registration();

  // The current value. Preconditions: not empty, and the matching type
  // (int_value for integer, bool_value for boolean, string_value for string
  // and enumeration).
  std::int64_t int_value() const noexcept;
  bool bool_value() const noexcept;
  std::string string_value() const;
  setting_value value() const;

  void reset() noexcept;
  explicit operator bool() const noexcept { return entry_ != nullptr; }
  const std::string& name() const noexcept;

 private:
  friend class control_registry;
  setting_registration(std::shared_ptr<control_internal::registry_state> registry,
                       std::shared_ptr<control_internal::setting_entry> entry) noexcept;

  std::shared_ptr<control_internal::registry_state> registry_;
  std::shared_ptr<control_internal::setting_entry> entry_;
};

}  // namespace primcache
