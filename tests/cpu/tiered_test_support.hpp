// tests/cpu/tiered_test_support.hpp — what the tiered-creation tests share:
// the CPU engine, a bit-for-bit comparison of outputs, a scope that
// restores the JIT mode and the primitive cache's capacity, and whether
// this host runs the tiered path at all (the JIT needs avx2).
//
//   if (!tiered_support::tiered_here()) return;
//   tiered_support::mode_scope scope(primcache::jit_mode::tiered);
//   CHECK(tiered_support::same_bits(before, after));
#pragma once

#include <cstring>
#include <vector>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/runtime.hpp"

namespace tiered_support {

inline primcache::engine& cpu() {
  static primcache::engine e(primcache::engine_kind::cpu, 0);
  return e;
}

inline bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Restores the mode and the cache capacity a test changed.
struct mode_scope {
  primcache::jit_mode saved = primcache::get_jit_mode();
  int capacity = primcache::get_primitive_cache_capacity();
  explicit mode_scope(primcache::jit_mode m) { primcache::set_jit_mode(m); }
  ~mode_scope() {
    primcache::set_primitive_cache_capacity(capacity);
    primcache::set_jit_mode(saved);
  }
};

inline bool tiered_here() {
  return primcache::effective_isa() >= primcache::cpu_isa::avx2;
}

}  // namespace tiered_support
