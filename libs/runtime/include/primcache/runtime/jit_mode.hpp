// primcache/runtime/jit_mode.hpp — how a primitive that misses every cache
// gets its code: at once with a shape-generic kernel while the specialized
// one compiles in the background (tiered), or by compiling the specialized
// kernel before creation returns (sync).
//
//   primcache::set_jit_mode(primcache::jit_mode::sync);  // wins over PRIMCACHE_JIT_MODE
//   primcache::matmul prim(pd);                          // compiled now
//   primcache::set_jit_mode(primcache::jit_mode::tiered);
//   primcache::matmul fast(pd2);                         // generic code, returns at once
//   fast.wait_until_specialized();                       // the specialized code is in
//
// The mode is read when a primitive is created; it is not part of the
// primitive key: both modes reach the same specialized code. A backend
// without generic code for a primitive (or a primitive whose generic code
// could not give bit-identical results) creates it synchronously in either
// mode. The initial mode comes from PRIMCACHE_JIT_MODE (tiered or sync;
// anything else is reported on stderr and tiered stands); set_jit_mode and
// the control setting "jit_mode" (the admin console) change it, and the
// last change wins.
//
// Thread-safety: every function may be called from any thread at any time.
// Exceptions: none.
#pragma once

#include "primcache/base/export.hpp"

namespace primcache {

enum class jit_mode { tiered, sync };

// "tiered", "sync".
PRIMCACHE_API const char* to_string(jit_mode mode) noexcept;

PRIMCACHE_API void set_jit_mode(jit_mode mode) noexcept;
PRIMCACHE_API jit_mode get_jit_mode() noexcept;

}  // namespace primcache
