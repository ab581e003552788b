// kernels/matmul_config.hpp — the matmul kernel's configuration helpers:
// the vector shape of an ISA as the heuristics see it, and the scratchpad a
// configuration needs. The heuristic itself (default_matmul_config) and the
// candidate space (matmul_config_candidates) are declared with the
// configuration in matmul_kernel.hpp and defined in matmul_config.cpp.
//
//   const int lanes = matmul_vector_lanes(isa);  // f32 lanes per vector: 8 or 16
//
// Thread-safety: pure functions. Exceptions: none.
#pragma once

#include <cstddef>

#include "kernels/matmul_kernel.hpp"
#include "primcache/base/result.hpp"
#include "primcache/runtime/backend/kernel_config.hpp"

namespace primcache::cpu_internal {

// f32 lanes of one vector register at this ISA.
int matmul_vector_lanes(cpu_isa isa);
// Vector registers the micro-kernel may use at this ISA.
int matmul_vector_registers(cpu_isa isa);

// The configuration as backend fields (mr, nr, kc, mc, nc, k_unroll,
// pack_b, n_inner, thr_m, thr_n) and back; from_fields checks the names and
// each field's range, not the problem.
backend::kernel_config to_fields(const matmul_config& c);
result<matmul_config> matmul_config_from_fields(const backend::kernel_config& f);
// Whether create() builds `c` for `p` at `isa` (register budget, blocks,
// thread grid, packing), without compiling.
result<bool> validate_matmul_config_for(const matmul_problem& p, const matmul_config& c,
                                        cpu_isa isa);

// Scratch bytes of one thread: its packed kc x nc panel, in whole cache
// lines; 0 without packing.
std::size_t matmul_pack_slot_bytes(const matmul_config& c);

}  // namespace primcache::cpu_internal
