// tests/cpu/aligned_buffer.hpp — a 64-byte aligned, uninitialized byte
// buffer for the kernel tests that hand raw pointers to generated code
// (whole-vector loads of a cache line's worth need the alignment).
//
//   cpu_test::aligned_buffer b(n * sizeof(float));
//   auto* f = reinterpret_cast<float*>(b.p);
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>

namespace cpu_test {

struct aligned_buffer {
  explicit aligned_buffer(std::size_t bytes)
      : p(static_cast<std::byte*>(
            std::aligned_alloc(64, std::max<std::size_t>(64, (bytes + 63) / 64 * 64)))) {}
  ~aligned_buffer() { std::free(p); }
  aligned_buffer(const aligned_buffer&) = delete;
  aligned_buffer& operator=(const aligned_buffer&) = delete;
  std::byte* p;
};

}  // namespace cpu_test
