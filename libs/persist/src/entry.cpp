#include "primcache/persist/entry.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <cstring>
#include <limits>

#include "primcache/base/error.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace primcache {
namespace {

constexpr std::array<std::byte, 8> magic = {std::byte{'P'}, std::byte{'C'}, std::byte{'E'},
                                            std::byte{'N'}, std::byte{'T'}, std::byte{'R'},
                                            std::byte{'Y'}, std::byte{'\n'}};
constexpr std::uint32_t flag_signed = 1;
constexpr std::size_t checksum_bytes = 16;
constexpr std::size_t signature_bytes = 32;

void put_le(std::vector<std::byte>& out, std::uint64_t v, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i) {
    out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xffu));
  }
}

void put_bytes(std::vector<std::byte>& out, std::span<const std::byte> b) {
  out.insert(out.end(), b.begin(), b.end());
}

std::array<std::byte, checksum_bytes> checksum(std::span<const std::byte> b) {
  XXH128_hash_t h = XXH3_128bits(b.data(), b.size());
  std::array<std::byte, checksum_bytes> out;
  for (std::size_t i = 0; i < 8; ++i) {
    out[i] = static_cast<std::byte>((h.high64 >> (8 * (7 - i))) & 0xffu);
    out[8 + i] = static_cast<std::byte>((h.low64 >> (8 * (7 - i))) & 0xffu);
  }
  return out;
}

std::array<std::byte, signature_bytes> sign(const fleet_key& key, std::span<const std::byte> b) {
  std::array<std::byte, signature_bytes> out{};
  unsigned int len = 0;
  const unsigned char* r =
      HMAC(EVP_sha256(), key.secret().data(), static_cast<int>(key.secret().size()),
           reinterpret_cast<const unsigned char*>(b.data()), b.size(),
           reinterpret_cast<unsigned char*>(out.data()), &len);
  if (r == nullptr || len != signature_bytes) {
    throw error(status::runtime_error, "HMAC-SHA256 failed in OpenSSL");
  }
  return out;
}

// Reads little-endian integers and byte ranges, refusing to pass the end.
class reader {
 public:
  explicit reader(std::span<const std::byte> b) : b_(b) {}
  bool le(std::size_t width, std::uint64_t& v) {
    if (b_.size() - pos_ < width) return false;
    v = 0;
    for (std::size_t i = 0; i < width; ++i) {
      v |= static_cast<std::uint64_t>(b_[pos_ + i]) << (8 * i);
    }
    pos_ += width;
    return true;
  }
  bool bytes(std::uint64_t n, std::span<const std::byte>& out) {
    if (b_.size() - pos_ < n) return false;
    out = b_.subspan(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return true;
  }
  std::size_t pos() const { return pos_; }
  std::size_t left() const { return b_.size() - pos_; }

 private:
  std::span<const std::byte> b_;
  std::size_t pos_ = 0;
};

decoded_entry fail(entry_fault f, std::string details) {
  decoded_entry d;
  d.fault = f;
  d.message = std::string(to_string(f)) + ": " + std::move(details);
  return d;
}

bool equal(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

std::string printable(std::span<const std::byte> b) {
  std::string s;
  for (std::byte c : b) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && u != '\'' && u != '\\') {
      s.push_back(static_cast<char>(u));
    } else {
      static const char* hex = "0123456789abcdef";
      s += "\\x";
      s.push_back(hex[u >> 4]);
      s.push_back(hex[u & 15]);
    }
  }
  return s;
}

}  // namespace

std::string_view to_string(entry_fault fault) noexcept {
  switch (fault) {
    case entry_fault::none: return "none";
    case entry_fault::truncated: return "truncated";
    case entry_fault::bad_magic: return "bad_magic";
    case entry_fault::other_format_version: return "other_format_version";
    case entry_fault::checksum_mismatch: return "checksum_mismatch";
    case entry_fault::signature_missing: return "signature_missing";
    case entry_fault::signature_bad: return "signature_bad";
    case entry_fault::other_library_version: return "other_library_version";
    case entry_fault::key_mismatch: return "key_mismatch";
  }
  return "unknown";
}

std::uint64_t encoded_entry_size(const entry_format& format, std::uint64_t key_bytes,
                                 std::uint64_t payload_bytes) noexcept {
  const std::uint64_t fixed = magic.size() + 4 + 4 + 4 + 4 + 8 + checksum_bytes +
                              (format.key != nullptr ? signature_bytes : 0);
  std::uint64_t total = fixed;
  for (std::uint64_t part :
       {std::uint64_t{format.library_version.size()}, key_bytes, payload_bytes}) {
    if (part > UINT64_MAX - total) return UINT64_MAX;
    total += part;
  }
  return total;
}

std::vector<std::byte> encode_entry(const entry_format& format, std::span<const std::byte> key,
                                    std::span<const std::byte> payload) {
  constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();
  if (key.size() > u32_max) {
    throw error(status::invalid_arguments,
                "persistent cache key of " + std::to_string(key.size()) +
                    " bytes is longer than the entry format's limit of 4 GiB - 1");
  }
  if (format.library_version.size() > u32_max) {
    throw error(status::invalid_arguments, "library version string is longer than 4 GiB - 1");
  }
  std::vector<std::byte> out;
  out.reserve(encoded_entry_size(format, key.size(), payload.size()));
  put_bytes(out, magic);
  put_le(out, entry_format_version, 4);
  put_le(out, format.key != nullptr ? flag_signed : 0, 4);
  put_le(out, format.library_version.size(), 4);
  put_bytes(out, std::as_bytes(std::span(format.library_version)));
  put_le(out, key.size(), 4);
  put_bytes(out, key);
  put_le(out, payload.size(), 8);
  put_bytes(out, payload);
  auto sum = checksum(out);
  put_bytes(out, sum);
  if (format.key != nullptr) {
    auto sig = sign(*format.key, out);
    put_bytes(out, sig);
  }
  return out;
}

decoded_entry decode_entry(const entry_format& format, std::span<const std::byte> expected_key,
                           std::span<const std::byte> bytes) {
  reader r(bytes);
  std::span<const std::byte> m;
  if (!r.bytes(magic.size(), m)) {
    return fail(entry_fault::truncated,
                std::to_string(bytes.size()) + " bytes is shorter than the entry magic");
  }
  if (!equal(m, magic)) {
    return fail(entry_fault::bad_magic,
                "the entry starts with '" + printable(m) + "', not 'PCENTRY\\x0a'");
  }
  std::uint64_t version = 0;
  std::uint64_t flags = 0;
  if (!r.le(4, version) || !r.le(4, flags)) {
    return fail(entry_fault::truncated, "the entry ends inside its header");
  }
  if (version != entry_format_version) {
    return fail(entry_fault::other_format_version,
                "entry format version " + std::to_string(version) + ", this library reads " +
                    std::to_string(entry_format_version));
  }
  std::uint64_t n = 0;
  std::span<const std::byte> lib;
  std::span<const std::byte> key;
  std::span<const std::byte> payload;
  if (!r.le(4, n) || !r.bytes(n, lib)) {
    return fail(entry_fault::truncated, "the entry ends inside its library version");
  }
  if (!r.le(4, n) || !r.bytes(n, key)) {
    return fail(entry_fault::truncated, "the entry ends inside its key");
  }
  if (!r.le(8, n) || !r.bytes(n, payload)) {
    return fail(entry_fault::truncated, "the entry ends inside its payload (" + std::to_string(n) +
                                            " bytes announced, " + std::to_string(r.left()) +
                                            " present)");
  }
  const std::size_t body_end = r.pos();
  std::span<const std::byte> sum;
  if (!r.bytes(checksum_bytes, sum)) {
    return fail(entry_fault::truncated, "the entry ends inside its checksum");
  }
  const bool is_signed = (flags & flag_signed) != 0;
  std::span<const std::byte> sig;
  if (is_signed && !r.bytes(signature_bytes, sig)) {
    return fail(entry_fault::truncated, "the entry ends inside its signature");
  }
  if (r.left() != 0) {
    // A longer file is not a torn write; it is not what this format writes.
    return fail(entry_fault::checksum_mismatch,
                std::to_string(r.left()) + " unexpected bytes after the entry");
  }
  if (!equal(sum, checksum(bytes.first(body_end)))) {
    return fail(entry_fault::checksum_mismatch, "the XXH3-128 checksum does not match the bytes");
  }
  if (format.key != nullptr) {
    if (!is_signed) {
      return fail(entry_fault::signature_missing,
                  "the entry is not signed and a fleet key is configured");
    }
    auto expected = sign(*format.key, bytes.first(body_end + checksum_bytes));
    if (CRYPTO_memcmp(expected.data(), sig.data(), signature_bytes) != 0) {
      return fail(entry_fault::signature_bad,
                  "the HMAC-SHA256 signature does not match the fleet key");
    }
  }
  if (!equal(lib, std::as_bytes(std::span(format.library_version)))) {
    return fail(entry_fault::other_library_version,
                "written by library version '" + printable(lib) + "', this is '" +
                    printable(std::as_bytes(std::span(format.library_version))) + "'");
  }
  if (!equal(key, expected_key)) {
    return fail(entry_fault::key_mismatch, "the entry holds a key of " +
                                               std::to_string(key.size()) +
                                               " bytes that differs from the one asked for (" +
                                               std::to_string(expected_key.size()) + " bytes)");
  }
  decoded_entry d;
  d.payload.assign(payload.begin(), payload.end());
  return d;
}

}  // namespace primcache
