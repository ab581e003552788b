#include "primcache/keyhash/key.hpp"

#include <bit>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#define XXH_INLINE_ALL
#include <xxhash.h>

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big,
              "mixed-endian platforms are not supported");

namespace primcache {

std::string digest128::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[15 - i] = kDigits[(high >> (4 * i)) & 0xf];
    out[31 - i] = kDigits[(low >> (4 * i)) & 0xf];
  }
  return out;
}

key::key(std::span<const std::byte> bytes) {
  assign(bytes.data(), bytes.size());
  seal();
}

key::key(const key& other) : hash_(other.hash_) {
  assign(other.data(), other.size_);
}

key::key(key&& other) noexcept
    : hash_(other.hash_), size_(other.size_), capacity_(other.capacity_) {
  if (other.on_heap()) {
    heap_ = other.heap_;
    other.capacity_ = inline_capacity;
  } else {
    std::memcpy(inline_, other.inline_, size_);
  }
  other.size_ = 0;
  other.hash_ = empty_hash();
}

key& key::operator=(const key& other) {
  if (this == &other) return *this;
  if (other.size_ > capacity_) {
    // Allocate before touching *this, so a bad_alloc leaves the key as it was
    // (its bytes and its hash still agree).
    key copy(other);
    return *this = std::move(copy);
  }
  std::memcpy(on_heap() ? heap_ : inline_, other.data(), other.size_);
  size_ = other.size_;
  hash_ = other.hash_;
  return *this;
}

key& key::operator=(key&& other) noexcept {
  if (this != &other) {
    if (on_heap()) ::operator delete(heap_);
    hash_ = other.hash_;
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.on_heap()) {
      heap_ = other.heap_;
      other.capacity_ = inline_capacity;
    } else {
      std::memcpy(inline_, other.inline_, size_);
    }
    other.size_ = 0;
    other.hash_ = empty_hash();
  }
  return *this;
}

key::~key() {
  if (on_heap()) ::operator delete(heap_);
}

void key::assign(const std::byte* src, std::size_t n) {
  size_ = 0;
  append(src, n);
}

void key::grow(std::size_t needed) {
  if (needed > std::numeric_limits<std::uint32_t>::max()) throw std::bad_alloc();
  std::size_t cap = capacity_;
  while (cap < needed) cap *= 2;
  if (cap > std::numeric_limits<std::uint32_t>::max()) cap = needed;
  auto* fresh = static_cast<std::byte*>(::operator new(cap));
  std::memcpy(fresh, data(), size_);
  if (on_heap()) ::operator delete(heap_);
  heap_ = fresh;
  capacity_ = static_cast<std::uint32_t>(cap);
}

void key::seal() noexcept {
  hash_ = XXH3_64bits(data(), size_);
}

digest128 key::digest() const noexcept {
  XXH128_hash_t h = XXH3_128bits(data(), size_);
  return {h.low64, h.high64};
}

bool operator==(const key& a, const key& b) noexcept {
  return a.size_ == b.size_ && std::memcmp(a.data(), b.data(), a.size_) == 0;
}

key_writer& key_writer::f32(float v) {
  return u32(std::bit_cast<std::uint32_t>(v));
}

key_writer& key_writer::f64(double v) {
  return u64(std::bit_cast<std::uint64_t>(v));
}

key_writer& key_writer::str(std::string_view s) {
  u32(static_cast<std::uint32_t>(s.size()));
  key_.append(s.data(), s.size());
  return *this;
}

key_writer& key_writer::i64s(std::span<const std::int64_t> values) {
  u32(static_cast<std::uint32_t>(values.size()));
  for (std::int64_t v : values) i64(v);
  return *this;
}

key_writer& key_writer::raw(std::span<const std::byte> bytes) {
  key_.append(bytes.data(), bytes.size());
  return *this;
}

key key_writer::finish() {
  key_.seal();
  key out = std::move(key_);
  return out;
}

}  // namespace primcache
