// primcache/base/error.hpp — the status enum and primcache::error.
//
// The public C++ API reports failures by throwing primcache::error, which
// carries a status and a message naming the thing and the reason. Expected
// failures inside the libraries are values (see result.hpp), not exceptions.
//
//   try {
//     cache.set_capacity(-1);
//   } catch (const primcache::error& e) {
//     if (e.code() == primcache::status::invalid_arguments) ...
//     std::cerr << e.what();   // "invalid_arguments: capacity -1 is negative"
//   }
//
// Thread-safety: error is an immutable value; copies are independent.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache {

// Values are stable: the C API returns them as ints.
enum class status : int {
  success = 0,
  invalid_arguments = 1,  // the caller passed something malformed
  unimplemented = 2,      // valid, but no implementation supports it
  out_of_memory = 3,
  not_found = 4,          // a key, name or blob that does not exist
  already_exists = 5,     // a name registered twice
  corrupt_data = 6,       // bytes that fail a check (checksum, format)
  permission_denied = 7,  // refused for safety (e.g. a world-writable dir)
  runtime_error = 8,      // a failure of the system or a compiler below us
};

// "invalid_arguments", "success", ...; "unknown" for values outside the enum.
PRIMCACHE_API std::string_view to_string(status s) noexcept;

class PRIMCACHE_API error : public std::exception {
 public:
  error(status code, std::string message);

  status code() const noexcept { return code_; }
  // The message alone, without the status prefix.
  const std::string& message() const noexcept { return message_; }
  // "<status>: <message>".
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  status code_;
  std::string message_;
  std::string what_;
};

}  // namespace primcache
