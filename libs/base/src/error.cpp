#include "primcache/base/error.hpp"

#include <utility>

namespace primcache {

std::string_view to_string(status s) noexcept {
  switch (s) {
    case status::success: return "success";
    case status::invalid_arguments: return "invalid_arguments";
    case status::unimplemented: return "unimplemented";
    case status::out_of_memory: return "out_of_memory";
    case status::not_found: return "not_found";
    case status::already_exists: return "already_exists";
    case status::corrupt_data: return "corrupt_data";
    case status::permission_denied: return "permission_denied";
    case status::runtime_error: return "runtime_error";
  }
  return "unknown";
}

error::error(status code, std::string message) : code_(code), message_(std::move(message)) {
  what_.reserve(message_.size() + 24);
  what_.append(to_string(code_));
  what_.append(": ");
  what_.append(message_);
}

}  // namespace primcache
