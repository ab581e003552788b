// primcache/keyhash/key.hpp — byte-stable cache keys.
//
// A key is a sequence of bytes plus its XXH3-64 hash, computed once when the
// key is finished. The bytes are written by key_writer in a fixed,
// documented format (little-endian fixed-width integers, enums by underlying
// value, floats by bit pattern, length-prefixed strings and arrays), so the
// same fields give the same bytes in every run, process and machine of one
// endianness — which lets keys name things on disk (digest()) as well as in
// memory. Nothing process-specific (pointers, type_index) belongs in a key.
//
//   primcache::key k = primcache::key_writer()
//                          .u32(kind)
//                          .i64s(dims)
//                          .f32(alpha)
//                          .str("jit:avx512")
//                          .finish();
//   std::unordered_map<primcache::key, value> m;   // std::hash<key> = k.hash()
//   std::string name = k.digest().hex();           // XXH3-128, 32 hex chars
//
// Keys of up to key::inline_capacity bytes live inline and never allocate.
// Equality compares length, then bytes; the hash is only a hint.
//
// Thread-safety: a finished key is an immutable value. Exceptions: writing
// past the inline capacity may throw std::bad_alloc; nothing else throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "primcache/base/export.hpp"

namespace primcache {

// A 128-bit digest of a key's bytes (XXH3-128), for on-disk names.
struct PRIMCACHE_API digest128 {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  // 32 lowercase hex digits, high half first — the order `xxhsum -H2` prints.
  std::string hex() const;
  friend bool operator==(const digest128&, const digest128&) = default;
};

class key;
// Declared here as well as a friend below: a friend declaration alone does not
// carry the class's visibility, and the definition lives in the library.
PRIMCACHE_API bool operator==(const key& a, const key& b) noexcept;

class PRIMCACHE_API key {
 public:
  static constexpr std::size_t inline_capacity = 256;

  // Empty bytes; hash of the empty input. User-provided (not = default) so that
  // `const key k;` compiles: the inline buffer is deliberately uninitialized.
  key() noexcept {}
  // A key over `bytes`, as read back from storage.
  explicit key(std::span<const std::byte> bytes);
  key(const key& other);
  key(key&& other) noexcept;
  key& operator=(const key& other);
  key& operator=(key&& other) noexcept;
  ~key();

  std::uint64_t hash() const noexcept { return hash_; }
  std::size_t size() const noexcept { return size_; }
  const std::byte* data() const noexcept { return on_heap() ? heap_ : inline_; }
  std::span<const std::byte> bytes() const noexcept { return {data(), size_}; }
  // XXH3-128 of the bytes, computed on each call.
  digest128 digest() const noexcept;

  friend bool operator==(const key& a, const key& b) noexcept;

 private:
  friend class key_writer;
  bool on_heap() const noexcept { return capacity_ > inline_capacity; }
  // Inline fast path: keys are built on the primitive-creation hit path.
  void append(const void* src, std::size_t n) {
    if (n == 0) return;  // src may be null (an empty span); memcpy forbids that
    if (size_ + n > capacity_) grow(size_ + n);
    std::memcpy((on_heap() ? heap_ : inline_) + size_, src, n);
    size_ += static_cast<std::uint32_t>(n);
  }
  void grow(std::size_t needed);
  void seal() noexcept;  // computes hash_
  void assign(const std::byte* src, std::size_t n);

  std::uint64_t hash_ = empty_hash();
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = inline_capacity;
  union {
    std::byte inline_[inline_capacity];
    std::byte* heap_;
  };
  // XXH3-64 of no bytes (key_test checks it): a constant, so that no
  // function-local static is made on first use (fork safety).
  static constexpr std::uint64_t empty_hash() noexcept { return 0x2d06800538d394c2ull; }
};

// Serializes fields into a key. Each call appends; finish() seals the key
// (computes the hash) and leaves the writer empty.
//
// Format (all little-endian):
//   u8/u16/u32/u64, i32/i64   fixed width, two's complement
//   boolean                   one byte, 0 or 1
//   f32 / f64                 the IEEE-754 bit pattern as u32 / u64
//                             (so -0.0 != 0.0 and NaN payloads are kept)
//   enumeration(e)            the underlying value, at the underlying width
//   str(s)                    u32 length, then the bytes
//   i64s(a)                   u32 count, then each element as i64
//   raw(b)                    the bytes, with no length (caller frames them)
class PRIMCACHE_API key_writer {
 public:
  key_writer& u8(std::uint8_t v) { return raw_le(v); }
  key_writer& u16(std::uint16_t v) { return raw_le(v); }
  key_writer& u32(std::uint32_t v) { return raw_le(v); }
  key_writer& u64(std::uint64_t v) { return raw_le(v); }
  key_writer& i32(std::int32_t v) { return raw_le(static_cast<std::uint32_t>(v)); }
  key_writer& i64(std::int64_t v) { return raw_le(static_cast<std::uint64_t>(v)); }
  key_writer& boolean(bool v) { return u8(v ? 1 : 0); }
  key_writer& f32(float v);
  key_writer& f64(double v);
  template <typename Enum>
    requires std::is_enum_v<Enum>
  key_writer& enumeration(Enum e) {
    using U = std::make_unsigned_t<std::underlying_type_t<Enum>>;
    return raw_le(static_cast<U>(e));
  }
  key_writer& str(std::string_view s);
  key_writer& i64s(std::span<const std::int64_t> values);
  key_writer& raw(std::span<const std::byte> bytes);

  std::size_t size() const noexcept { return key_.size(); }
  key finish();

 private:
  template <typename U>
    requires std::is_unsigned_v<U>
  key_writer& raw_le(U v) {
    std::byte buf[sizeof(U)];
    for (std::size_t i = 0; i < sizeof(U); ++i) {
      buf[i] = static_cast<std::byte>((v >> (8 * i)) & 0xffu);
    }
    key_.append(buf, sizeof(U));
    return *this;
  }

  key key_;
};

}  // namespace primcache

template <>
struct std::hash<primcache::key> {
  std::size_t operator()(const primcache::key& k) const noexcept {
    return static_cast<std::size_t>(k.hash());
  }
};
