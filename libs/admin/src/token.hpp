// Bearer tokens: generation and the token file (private).
#pragma once

#include <string>

namespace primcache::admin_internal {

// 32 random bytes from the system's random source, as 64 hex digits.
std::string generate_token();

// Writes `token` to a new file at `path` (O_CREAT|O_EXCL|O_NOFOLLOW, mode
// 0600); throws error(runtime_error) naming the path and the reason.
void write_token_file(const std::string& path, const std::string& token);

// $XDG_RUNTIME_DIR (else /tmp) + "/primcache-admin-<pid>-<random>.token".
std::string default_token_path();

}  // namespace primcache::admin_internal
