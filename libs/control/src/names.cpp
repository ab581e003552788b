#include "primcache/control/names.hpp"

#include <cstdio>
#include <string>

#include "primcache/base/error.hpp"
#include "registry_state.hpp"

namespace primcache {
namespace {

bool allowed(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

// The same escaping as quoted(), for one byte.
std::string printable(char c) {
  const auto byte = static_cast<unsigned char>(c);
  if (byte >= 0x20 && byte < 0x7f && c != '\\' && c != '\'') return std::string(1, c);
  char buf[5];
  std::snprintf(buf, sizeof buf, "\\x%02x", byte);
  return buf;
}

}  // namespace

namespace control_internal {
std::string quoted(std::string_view name) {
  std::string out = "'";
  for (char c : name) out += printable(c);
  out += '\'';
  return out;
}
}  // namespace control_internal

bool is_valid_control_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > max_control_name_length) return false;
  for (char c : name) {
    if (!allowed(c)) return false;
  }
  return true;
}

void check_control_name(std::string_view what, std::string_view name) {
  const std::string subject = std::string(what) + " name ";
  if (name.empty()) throw error(status::invalid_arguments, subject + "is empty");
  if (name.size() > max_control_name_length) {
    throw error(status::invalid_arguments, subject + control_internal::quoted(name.substr(0, 32)) +
                                               "... is " + std::to_string(name.size()) +
                                               " characters long; the limit is " +
                                               std::to_string(max_control_name_length));
  }
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!allowed(name[i])) {
      throw error(status::invalid_arguments,
                  subject + control_internal::quoted(name) + " has '" + printable(name[i]) +
                      "' at position " + std::to_string(i) + "; names use only [a-z0-9_.-]");
    }
  }
}

}  // namespace primcache
