// kernels/generic_post_ops.hpp — the post-op chain in the parameter block of
// a shape-generic kernel (generic_{matmul,conv,eltwise,reorder}_*): the
// kernel's create() writes it, the generator's IR reads it back at run time.
//
//   write_generic_post_ops(p.post_ops, v[gm_post_op_count], &v[gm_post_ops]);
//
// Per post-op, generic_post_op_slots int64 slots: the code (the eltwise_alg,
// 0..7, or generic_binary_code for a binary add), the binary operand index,
// the broadcast, then alpha, beta and scale, each float in its slot's low
// four bytes. Kept free of LLVM so the kernels' headers stay light.
#pragma once

#include <cstdint>
#include <vector>

namespace primcache::cpu_internal {

struct post_op;

inline constexpr int generic_post_op_slots = 6;
inline constexpr int generic_max_post_ops = 16;
inline constexpr std::int64_t generic_binary_code = 8;

// A float in the low four bytes of a parameter slot (little-endian x86-64).
void put_generic_f32(std::int64_t& slot, float v);

// Writes the chain's length into `count` and its post-ops from `slots` on;
// the caller made sure it holds at most generic_max_post_ops.
void write_generic_post_ops(const std::vector<post_op>& chain, std::int64_t& count,
                            std::int64_t* slots);

}  // namespace primcache::cpu_internal
