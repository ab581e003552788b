// primcache/const_cache/constant_key.hpp — the key of a constant tensor: a
// backend id and the backend's own key bytes.
//
// Backends never collide: two keys are equal only when both the backend id
// and the bytes are. The bytes are whatever identifies the tensor to its
// backend (packing, the weights' memory id, on OpenCL the context); the key
// owns a copy and hashes it once, at construction, so a lookup with a key
// built ahead of time (the hot path) hashes nothing.
//
//   primcache::constant_key k(/*backend_id=*/1, packing_bytes);
//   cache.get_or_add(k, bytes, [&] { return pack(); });
//
// Thread-safety: an immutable value. Exceptions: the constructor may throw
// std::bad_alloc; nothing else throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache {

class PRIMCACHE_API constant_key {
 public:
  constant_key(std::uint64_t backend_id, std::string_view bytes);

  std::uint64_t backend_id() const noexcept { return backend_id_; }
  std::string_view bytes() const noexcept { return bytes_; }
  // Computed once from the backend id and the bytes; stable within a process.
  std::size_t hash() const noexcept { return hash_; }

  friend bool operator==(const constant_key& a, const constant_key& b) noexcept {
    return a.hash_ == b.hash_ && a.backend_id_ == b.backend_id_ && a.bytes_ == b.bytes_;
  }

 private:
  std::uint64_t backend_id_;
  std::string bytes_;
  std::size_t hash_;
};

}  // namespace primcache

template <>
struct std::hash<primcache::constant_key> {
  std::size_t operator()(const primcache::constant_key& k) const noexcept { return k.hash(); }
};
