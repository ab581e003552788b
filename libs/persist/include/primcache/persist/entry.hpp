// primcache/persist/entry.hpp — the byte format of one persistent cache
// entry: a header, the full key, the payload, an XXH3-128 checksum and an
// optional HMAC-SHA256 signature.
//
// Every store keeps entries in this format, so a value read back is checked
// before anyone loads it: it must be whole, of this format, written by the
// same library version, for the same key, unaltered, and — when a fleet key
// is configured — signed with that key.
//
//   primcache::entry_format fmt{.library_version = "0.1.0+abc123", .key = &fleet};
//   std::vector<std::byte> bytes = primcache::encode_entry(fmt, key, payload);
//   primcache::decoded_entry d = primcache::decode_entry(fmt, key, bytes);
//   if (!d.ok()) std::cerr << d.message;      // "checksum mismatch: ..."
//   else use(d.payload);
//
// Layout (integers little-endian):
//   magic            8 bytes  "PCENTRY\n"
//   format version   u32      entry_format_version
//   flags            u32      bit 0: signed
//   library version  u32 length, then the bytes
//   key              u32 length, then the bytes
//   payload          u64 length, then the bytes
//   checksum         16 bytes XXH3-128 of everything above, high half first
//   signature        32 bytes HMAC-SHA256 of everything above (signed only)
//
// Verification order: length and structure (truncated), magic, format
// version, checksum, signature, library version, key. Without a fleet key a
// signed entry is accepted on its checksum (its signature cannot be checked);
// with one, an unsigned or mis-signed entry is refused.
//
// Thread-safety: pure functions over values. Exceptions: std::bad_alloc;
// encode_entry throws error(invalid_arguments) for a key or library version
// longer than 4 GiB - 1 bytes. Failures to decode are values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/persist/fleet_key.hpp"

namespace primcache {

inline constexpr std::uint32_t entry_format_version = 1;

// What encode_entry writes and decode_entry expects.
struct entry_format {
  // The library version (and build identity) the entry belongs to; an entry
  // of another version is refused (other_library_version).
  std::string library_version;
  // Borrowed; null: entries are not signed, and signatures are not checked.
  const fleet_key* key = nullptr;
};

enum class entry_fault : int {
  none = 0,
  truncated,              // shorter than its header or its lengths say
  bad_magic,              // not an entry
  other_format_version,   // an entry of another format version
  checksum_mismatch,      // altered or torn bytes
  signature_missing,      // unsigned, while a fleet key is configured
  signature_bad,          // signed with another key, or altered and re-checksummed
  other_library_version,  // written by another library version
  key_mismatch,           // the entry belongs to another key
};

// "truncated", "bad_magic", ...
PRIMCACHE_API std::string_view to_string(entry_fault fault) noexcept;

struct decoded_entry {
  entry_fault fault = entry_fault::none;
  // Empty when ok(); otherwise "<fault>: <details>".
  std::string message;
  // The payload when ok(); empty otherwise.
  std::vector<std::byte> payload;

  bool ok() const noexcept { return fault == entry_fault::none; }
};

// The bytes of an entry holding `payload` under `key`, signed when
// format.key is set.
PRIMCACHE_API std::vector<std::byte> encode_entry(const entry_format& format,
                                                  std::span<const std::byte> key,
                                                  std::span<const std::byte> payload);

// How many bytes encode_entry(format, key, payload) writes for a key and a
// payload of these sizes (saturating at UINT64_MAX): a store refuses an
// entry over its bounds before encoding (copying) it.
PRIMCACHE_API std::uint64_t encoded_entry_size(const entry_format& format, std::uint64_t key_bytes,
                                               std::uint64_t payload_bytes) noexcept;

// Checks `bytes` against `format` and `expected_key` (see the order above).
PRIMCACHE_API decoded_entry decode_entry(const entry_format& format,
                                         std::span<const std::byte> expected_key,
                                         std::span<const std::byte> bytes);

}  // namespace primcache
