#include "primcache/control/setting.hpp"

#include <algorithm>
#include <new>
#include <utility>

#include "primcache/base/error.hpp"
#include "primcache/control/names.hpp"
#include "registry_state.hpp"

namespace primcache {

using control_internal::quoted;
using control_internal::setting_entry;

const char* to_string(setting_type type) noexcept {
  switch (type) {
    case setting_type::integer: return "int";
    case setting_type::string: return "string";
    case setting_type::enumeration: return "enum";
    case setting_type::boolean: return "bool";
  }
  return "unknown";
}

setting_spec setting_spec::integer(std::string name, std::string description, std::int64_t initial,
                                   std::int64_t min, std::int64_t max) {
  setting_spec s;
  s.name = std::move(name);
  s.description = std::move(description);
  s.type = setting_type::integer;
  s.initial = initial;
  s.min = min;
  s.max = max;
  return s;
}

setting_spec setting_spec::string(std::string name, std::string description, std::string initial) {
  setting_spec s;
  s.name = std::move(name);
  s.description = std::move(description);
  s.type = setting_type::string;
  s.initial = std::move(initial);
  return s;
}

setting_spec setting_spec::choice(std::string name, std::string description, std::string initial,
                                  std::vector<std::string> choices) {
  setting_spec s;
  s.name = std::move(name);
  s.description = std::move(description);
  s.type = setting_type::enumeration;
  s.initial = std::move(initial);
  s.choices = std::move(choices);
  return s;
}

setting_spec setting_spec::boolean(std::string name, std::string description, bool initial) {
  setting_spec s;
  s.name = std::move(name);
  s.description = std::move(description);
  s.type = setting_type::boolean;
  s.initial = initial;
  return s;
}

namespace control_internal {
namespace {

const char* value_type_name(const setting_value& v) noexcept {
  if (std::holds_alternative<std::int64_t>(v)) return "an integer";
  if (std::holds_alternative<bool>(v)) return "a boolean";
  return "a string";
}

std::string joined(const std::vector<std::string>& choices) {
  std::string out;
  for (const auto& c : choices) out += (out.empty() ? "" : ", ") + c;
  return out;
}

std::int64_t scalar_of(const setting_value& v) noexcept {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (const auto* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
  return 0;
}

}  // namespace

setting_entry::setting_entry(setting_spec spec) : spec_(std::move(spec)), value_(spec_.initial) {
  check_control_name("setting", spec_.name);
  if (spec_.type == setting_type::integer && spec_.min > spec_.max) {
    throw error(status::invalid_arguments, "setting " + quoted(spec_.name) + " has min " +
                                               std::to_string(spec_.min) + " above max " +
                                               std::to_string(spec_.max));
  }
  if (spec_.type == setting_type::enumeration && spec_.choices.empty()) {
    throw error(status::invalid_arguments, "setting " + quoted(spec_.name) + " has no choices");
  }
  if (std::string why = check(spec_.initial); !why.empty()) {
    throw error(status::invalid_arguments, "initial value: " + why);
  }
  scalar_.store(scalar_of(spec_.initial), std::memory_order_release);
}

std::string setting_entry::check(const setting_value& v) const {
  const std::string subject = "setting " + quoted(spec_.name);
  const char* type = to_string(spec_.type);
  switch (spec_.type) {
    case setting_type::integer: {
      const auto* i = std::get_if<std::int64_t>(&v);
      if (i == nullptr) return subject + " is an int; got " + value_type_name(v);
      if (*i < spec_.min || *i > spec_.max) {
        return subject + " must be between " + std::to_string(spec_.min) + " and " +
               std::to_string(spec_.max) + "; got " + std::to_string(*i);
      }
      break;
    }
    case setting_type::boolean:
      if (!std::holds_alternative<bool>(v)) {
        return subject + " is a bool; got " + value_type_name(v);
      }
      break;
    case setting_type::string:
    case setting_type::enumeration: {
      const auto* s = std::get_if<std::string>(&v);
      if (s == nullptr) {
        return subject + " is " + (spec_.type == setting_type::string ? "a " : "an ") + type +
               "; got " + value_type_name(v);
      }
      if (spec_.type == setting_type::enumeration &&
          std::find(spec_.choices.begin(), spec_.choices.end(), *s) == spec_.choices.end()) {
        return subject + " is an enum of " + joined(spec_.choices) + "; " + quoted(*s) +
               " is not one of them";
      }
      break;
    }
  }
  if (spec_.validator) {
    std::string why = spec_.validator(v);
    if (!why.empty()) return subject + ": " + why;
  }
  return {};
}

void setting_entry::store(const setting_value& v) {
  lock_guard g(value_mu_);
  value_ = v;
  scalar_.store(scalar_of(v), std::memory_order_release);
}

namespace {
// The setter locks this thread holds, innermost first (a setter's on_change
// may set another setting): how a fork child tells its own from those of
// threads it does not have.
struct setter_frame {
  const setting_entry* entry;
  const setter_frame* outer;
};
thread_local const setter_frame* innermost_setter = nullptr;

class setter_scope {
 public:
  explicit setter_scope(const setting_entry* e) noexcept : frame_{e, innermost_setter} {
    innermost_setter = &frame_;
  }
  ~setter_scope() { innermost_setter = frame_.outer; }
  setter_scope(const setter_scope&) = delete;
  setter_scope& operator=(const setter_scope&) = delete;

 private:
  setter_frame frame_;
};

bool this_thread_sets(const setting_entry* e) noexcept {
  for (const setter_frame* f = innermost_setter; f != nullptr; f = f->outer) {
    if (f->entry == e) return true;
  }
  return false;
}
}  // namespace

void setting_entry::set(const setting_value& v) {
  lock_guard serial(set_mu_);
  setter_scope scope(this);
  if (std::string why = check(v); !why.empty()) throw error(status::invalid_arguments, why);
  setting_value old = value();
  store(v);
  if (spec_.on_change) {
    try {
      spec_.on_change(v);
    } catch (...) {
      store(old);
      throw;
    }
  }
}

void setting_entry::reset_in_child() noexcept {
  if (this_thread_sets(this)) return;  // released when its setter returns
  if (set_mu_.try_lock()) {
    set_mu_.unlock();
    return;
  }
  // Held by a thread this process does not have: it would never be
  // released. The value it guards is whole (value_mu_ was held across the
  // fork), though that setter's on_change may not have run to its end. The
  // lock is built anew over the held one; destroying a held std::mutex is
  // undefined, and it has no other state.
  new (&set_mu_) mutex;
}

setting_value setting_entry::value() const {
  lock_guard g(value_mu_);
  return value_;
}

setting_info setting_entry::info() const {
  setting_info out{spec_.name, spec_.description, spec_.type, value(), spec_.initial, 0,
                   0,          spec_.choices};
  if (spec_.type == setting_type::integer) {
    out.min = spec_.min;
    out.max = spec_.max;
  }
  return out;
}

void registry_state::unregister(const std::shared_ptr<setting_entry>& entry) noexcept {
  lock_guard g(mu);
  auto it = settings.find(entry->name());
  if (it != settings.end() && it->second == entry) settings.erase(it);
}

}  // namespace control_internal

setting_registration::setting_registration(
    std::shared_ptr<control_internal::registry_state> registry,
    std::shared_ptr<setting_entry> entry) noexcept
    : registry_(std::move(registry)), entry_(std::move(entry)) {}

setting_registration& setting_registration::operator=(setting_registration&& other) noexcept {
  if (this != &other) {
    reset();
    registry_ = std::move(other.registry_);
    entry_ = std::move(other.entry_);
  }
  return *this;
}

setting_registration::~setting_registration() {
  reset();
}

void setting_registration::reset() noexcept {
  if (entry_ == nullptr) return;
  registry_->unregister(entry_);
  entry_.reset();
  registry_.reset();
}

std::int64_t setting_registration::int_value() const noexcept {
  return entry_->scalar();
}

bool setting_registration::bool_value() const noexcept {
  return entry_->scalar() != 0;
}

std::string setting_registration::string_value() const {
  setting_value v = entry_->value();
  if (auto* s = std::get_if<std::string>(&v)) return std::move(*s);
  return {};
}

setting_value setting_registration::value() const {
  return entry_->value();
}

const std::string& setting_registration::name() const noexcept {
  return entry_->name();
}

namespace {
std::shared_ptr<setting_entry> find_setting(control_internal::registry_state& st,
                                            std::string_view name) {
  shared_lock_guard g(st.mu);
  auto it = st.settings.find(name);
  if (it == st.settings.end()) {
    throw error(status::not_found, "setting " + quoted(name) + " is not registered");
  }
  return it->second;
}
}  // namespace

setting_registration control_registry::register_setting(setting_spec spec) {
  auto entry = std::make_shared<setting_entry>(std::move(spec));
  {
    lock_guard g(state_->mu);
    if (!state_->settings.try_emplace(entry->name(), entry).second) {
      throw error(status::already_exists,
                  "setting " + quoted(entry->name()) + " is already registered");
    }
  }
  return setting_registration(state_, std::move(entry));
}

void control_registry::set_setting(std::string_view name, const setting_value& value) {
  // The setter runs outside the map lock: validators and on_change are user code.
  find_setting(*state_, name)->set(value);
}

setting_info control_registry::get_setting(std::string_view name) const {
  return find_setting(*state_, name)->info();
}

std::vector<setting_info> control_registry::list_settings() const {
  std::vector<std::shared_ptr<setting_entry>> entries;
  {
    shared_lock_guard g(state_->mu);
    for (const auto& [n, e] : state_->settings) entries.push_back(e);
  }
  std::vector<setting_info> out;
  out.reserve(entries.size());
  for (const auto& e : entries) out.push_back(e->info());
  return out;
}

}  // namespace primcache
