// Buffers for the const_cache tests: host memory from malloc, counted, so a
// test can see when the cache (and every holder) has let a buffer go, and
// filled with a byte pattern derived from a seed, so a test can tell whose
// buffer it holds.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "primcache/const_cache/constant_buffer.hpp"

namespace const_cache_test {

struct buffer_counter {
  std::atomic<long> live{0};
  std::atomic<long> made{0};

  std::shared_ptr<primcache::constant_buffer> make(std::size_t size, unsigned char seed) {
    auto b = primcache::make_constant_buffer(
        size,
        [this](std::size_t n) {
          live.fetch_add(1);
          made.fetch_add(1);
          return std::malloc(n == 0 ? 1 : n);
        },
        [this](void* p, std::size_t) {
          std::free(p);
          live.fetch_sub(1);
        });
    std::memset(b->data(), seed, size);
    return b;
  }
};

// Whether every byte of `b` is `seed`.
inline bool holds(const primcache::constant_buffer& b, unsigned char seed) {
  const auto* p = b.data_as<const unsigned char>();
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (p[i] != seed) return false;
  }
  return true;
}

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;

}  // namespace const_cache_test
