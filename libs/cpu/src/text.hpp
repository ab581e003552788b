// text.hpp — the string helpers of the CPU backend's messages and parsing:
// quoting a name for an error message, comparing names without regard to
// case.
//
//   throw error(status::not_found, "no symbol " + quoted(name));  // no symbol 'axpy'
//   if (iequals(value, "all")) ...                               // "ALL", "All", "all"
//
// Thread-safety: pure functions. Exceptions: quoted() throws std::bad_alloc
// only; iequals() none.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace primcache::cpu_internal {

// The name between single quotes, as messages name things.
inline std::string quoted(std::string_view name) {
  return "'" + std::string(name) + "'";
}

// Equal ignoring ASCII case (the C locale's tolower).
inline bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace primcache::cpu_internal
