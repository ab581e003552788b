// services/primcached/token_file.hpp — the bearer token primcached hands to
// its admin server, and the file (mode 0600) that tells it to the primcache
// command line.
//
//   std::string token = primcache::primcached::generate_token();   // 64 hex digits
//   primcache::primcached::write_token_file("/run/user/1000/primcached.token", token);
//   ...
//   primcache::primcached::remove_token_file(path, token);   // on exit
//
// A file already at the path is replaced only when it is a regular file
// owned by this user (a stale one from an earlier run); anything else
// (a link, another user's file) is refused.
//
// Thread-safety: none needed (called once at start and exit). Exceptions:
// primcache::error(runtime_error / permission_denied) naming the path.
#pragma once

#include <string>

namespace primcache::primcached {

std::string generate_token();
void write_token_file(const std::string& path, const std::string& token);
// Removes the file if it still holds `token`; never throws.
void remove_token_file(const std::string& path, const std::string& token) noexcept;

}  // namespace primcache::primcached
