// primcache/persist/fleet_key.hpp — the secret a fleet signs its persistent
// cache entries with (HMAC-SHA256, see entry.hpp).
//
// The key is the contents of a file that only its owner may read; a file that
// group or others can read (or write) is refused, because whoever holds the
// key can make every process of the fleet load their code.
//
//   primcache::result<std::optional<primcache::fleet_key>> k =
//       primcache::fleet_key_from_env();          // PRIMCACHE_PERSISTENT_CACHE_KEY_FILE
//   if (!k) throw primcache::error(k.why().code, k.why().message);  // set, but unusable
//   const primcache::fleet_key* key = k.value() ? &*k.value() : nullptr;  // null: unsigned
//
// File format: the raw bytes of the file, less trailing spaces, tabs, CR and
// LF (so `openssl rand -hex 32 > key` works). At least
// fleet_key::min_bytes (16) bytes must remain.
//
// Thread-safety: a fleet_key is an immutable value. Loading reads the file
// and the environment (do not setenv concurrently). Exceptions: none besides
// std::bad_alloc; failures are result values with status permission_denied
// (mode, owner), not_found (missing file) or invalid_arguments (not a
// regular file, too short, too large).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/base/result.hpp"

namespace primcache {

class PRIMCACHE_API fleet_key {
 public:
  static constexpr std::size_t min_bytes = 16;
  // A key file larger than this is refused before it is read.
  static constexpr std::size_t max_file_bytes = 64 << 10;

  // A key over `secret` (at least min_bytes long, else invalid_arguments).
  static result<fleet_key> from_bytes(std::span<const std::byte> secret);
  // Reads `path`; refuses a file that group or others may read or write, a
  // file that is not a regular file (a FIFO too, without waiting on it), a
  // file over max_file_bytes, and a key shorter than min_bytes.
  static result<fleet_key> from_file(const std::string& path);

  std::span<const std::byte> secret() const noexcept { return secret_; }

 private:
  explicit fleet_key(std::vector<std::byte> secret) : secret_(std::move(secret)) {}
  std::vector<std::byte> secret_;
};

// The name of the variable fleet_key_from_env reads.
inline constexpr const char* persistent_cache_key_file_env = "PRIMCACHE_PERSISTENT_CACHE_KEY_FILE";

// Unset (or empty): nullopt — entries are checksummed, not signed. Set: the
// key from that file, or the failure from_file gives. A set but unusable key
// is a failure, never a silent fallback to unsigned entries.
PRIMCACHE_API result<std::optional<fleet_key>> fleet_key_from_env();

}  // namespace primcache
