// primcache/cpu/cpu.hpp — the instruction sets the CPU backend generates code
// for, and the cap that limits them.
//
// Kernels are compiled for the effective ISA: the best level the host
// supports, lowered by a cap. The cap comes from set_max_cpu_isa() when it has
// been called (the API wins), else from PRIMCACHE_CPU_ISA (read once, at the
// first query; a malformed value is reported on stderr and ignored), else
// there is none. A cap above what the host supports changes nothing: code is
// never generated for instructions the host lacks. Because each kernel key
// records the ISA it was compiled for, changing the cap while running only
// affects kernels created afterwards.
//
//   primcache::set_max_cpu_isa(primcache::cpu_isa::avx2);
//   assert(primcache::effective_isa() <= primcache::cpu_isa::avx2);
//   std::cout << primcache::to_string(primcache::detected_isa());  // "avx512_core_fp16"
//
// Thread-safety: every function may be called from any thread; the cap is an
// atomic value. Exceptions: none are thrown.
#pragma once

#include <optional>
#include <string_view>

#include "primcache/base/export.hpp"
#include "primcache/base/result.hpp"

namespace primcache {

// Ordered levels: each includes every lower one. Values are stable (they go
// into kernel keys).
enum class cpu_isa : int {
  x86_64 = 0,            // SSE2, every x86-64 host
  sse41 = 1,             // + SSE3, SSSE3, SSE4.1
  avx = 2,               // + SSE4.2, POPCNT, AVX
  avx2 = 3,              // + AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE
  avx512_core = 4,       // + AVX-512 F, CD, BW, DQ, VL
  avx512_core_vnni = 5,  // + AVX-512 VNNI
  avx512_core_bf16 = 6,  // + AVX-512 BF16
  avx512_core_fp16 = 7,  // + AVX-512 FP16
};

inline constexpr cpu_isa max_known_cpu_isa = cpu_isa::avx512_core_fp16;

// "x86_64", "sse41", "avx", "avx2", "avx512_core", ...
PRIMCACHE_API std::string_view to_string(cpu_isa isa) noexcept;

// The names to_string gives, case-insensitive, plus "all" (no cap), which
// reads as max_known_cpu_isa. Anything else fails with the accepted names in
// the message.
PRIMCACHE_API result<cpu_isa> parse_cpu_isa(std::string_view text);

// The best level this host supports (CPU and operating system together).
PRIMCACHE_API cpu_isa detected_isa() noexcept;

// The cap in force: the API's, else the environment's, else nullopt.
PRIMCACHE_API std::optional<cpu_isa> max_cpu_isa() noexcept;

// Sets the cap for kernels created from now on; it overrides
// PRIMCACHE_CPU_ISA. clear_max_cpu_isa() returns to the environment's cap.
PRIMCACHE_API void set_max_cpu_isa(cpu_isa cap) noexcept;
PRIMCACHE_API void clear_max_cpu_isa() noexcept;

// min(detected_isa(), max_cpu_isa()): what new kernels are compiled for.
PRIMCACHE_API cpu_isa effective_isa() noexcept;

}  // namespace primcache
