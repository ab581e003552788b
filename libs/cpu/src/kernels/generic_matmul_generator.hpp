// kernels/generic_matmul_generator.hpp — the LLVM IR of the shape-generic
// matmul kernel: the loop nest and micro-kernel step of matmul_generator.cpp
// (written beside it, not yet sharing its code) with every shape, stride,
// blocking factor and post-op read from a parameter block at run time
// instead of baked in, for one ISA; the post-ops' math comes from the same
// emitters (post_ops.hpp, ir_math.hpp) and the loops from ir_loop.hpp. Compiled once, when the
// library is built (tools/generic_kernels_aot.cpp), and run by tiered primitives until their
// specialized kernel is installed (tiered/tiered_impl.hpp).
//
//   compile_object(generic_matmul_name(isa), isa,
//                  [&](llvm::Module& m) { generate_generic_matmul(isa, m); });
//
// Results equal the specialized kernel's bit for bit: every output is
// accumulated in the same order (a sequential fused multiply-add over k from
// zero, whatever the register or cache blocking), bias is added once after
// the last k, and each post-op is the same IR as emit_post_ops emits (the
// eltwise math comes from the same emitters; relu, linear and clip take
// their constants as values). The register block is fixed per ISA
// (generic_matmul_shape); tails along m and n are handled at run time.
//
// Thread-safety: generate_generic_matmul touches only the module it is given.
// Exceptions: what LLVM's allocation throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/generic_post_ops.hpp"
#include "primcache/cpu/cpu.hpp"

namespace llvm {
class Module;
}  // namespace llvm

namespace primcache::cpu_internal {

// The generated function, of type generic_matmul_function.
inline constexpr const char* generic_matmul_symbol = "matmul_generic_f32";

// params: a generic_matmul_slot-indexed block of int64 slots (floats in
// the low four bytes of theirs); the rest as matmul_kernel::function.
using generic_matmul_function = void(const std::int64_t* params, const float* src, const float* wei,
                                     const float* bias, float* dst, const float* const* binary,
                                     float* pack, std::int64_t b, std::int64_t mb0,
                                     std::int64_t mb1, std::int64_t nb0, std::int64_t nb1);

// The register block the generic kernel of an ISA is built with.
struct generic_matmul_shape {
  int lanes;  // f32 per vector
  int mr;     // rows of dst per micro-kernel
  int nv;     // vectors per row (nr = nv * lanes)
  int nr() const noexcept { return nv * lanes; }
};
generic_matmul_shape generic_matmul_shape_for(cpu_isa isa) noexcept;

// The slots of the parameter block.
enum generic_matmul_slot : int {
  gm_m,
  gm_n,
  gm_k,
  gm_src_batch_stride,
  gm_src_m_stride,
  gm_src_k_stride,
  gm_wei_k_stride,
  gm_wei_n_stride,
  gm_wei_batch_stride,  // floats between two weights batches (packed ones when prepacked)
  gm_dst_batch_stride,
  gm_dst_m_stride,
  gm_with_bias,  // 0 or 1
  gm_prepacked,  // 0 or 1: weights arrive packed with nr
  gm_pack_b,     // 0 or 1: not prepacked, packed here per panel (else read in place)
  gm_kc,         // K cache block
  gm_mc_blocks,  // row blocks per M cache block
  gm_nc_blocks,  // column blocks per N cache block
  gm_post_op_count,
  gm_post_ops,  // gm_post_op_slots per post-op
};
// The post-op chain: generic_post_op_slots per post-op (generic_post_ops.hpp).
inline constexpr int gm_post_op_slots = generic_post_op_slots;
inline constexpr int gm_max_post_ops = generic_max_post_ops;
inline constexpr int gm_slot_count = gm_post_ops + gm_post_op_slots * gm_max_post_ops;
inline constexpr std::int64_t gm_binary_code = generic_binary_code;

// Defines generic_matmul_symbol in m, for `isa` (avx2 or above).
void generate_generic_matmul(cpu_isa isa, llvm::Module& m);

// The kernel's name for the compiler (its settings follow the "matmul_"
// prefix) and for the JIT: "matmul_generic_<isa>".
std::string generic_matmul_name(cpu_isa isa);

}  // namespace primcache::cpu_internal
