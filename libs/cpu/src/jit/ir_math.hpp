// jit/ir_math.hpp — element-wise math and data-type conversions emitted as
// plain IR, for kernels to inline.
//
// LLVM 15 has no vector math library on this path: llvm.exp becomes one
// scalar expf call per element, llvm.rint without SSE4.1 rintf, llvm.fma
// without FMA hardware fmaf, and fptrunc to bfloat __truncsfbf2 (which
// libgcc 12 lacks) — imports a kernel may not have (object_symbols.hpp).
// These helpers avoid every such intrinsic: the math functions are range
// reductions plus polynomials, the rounding conversions are integer
// operations, and all of them work on a float scalar or any <N x float>
// vector, so a kernel gets full-width vector code at every ISA level. Only
// intrinsics that x86 lowers inline are used (fabs, copysign, fmuladd, and
// fma only where the module's ISA has FMA: module_isa); tests list every
// compiled object's imports to keep it so.
//
// Accuracy, measured against double-precision references over 35 million
// inputs spanning every binade (docs/cpu.md has the table), in units in the
// last place of the float result: exp 1.0, tanh 1.3, sigmoid 2.7, erf 2.5,
// gelu_tanh 3.4, gelu_erf 4.9 — also in the far negative tails of the gelus,
// where their arguments are carried in extra precision. NaN in gives NaN
// out; infinities give the mathematical limits; results in the subnormal
// range are rounded once, not flushed to zero; where a gelu's result is
// known (x itself, or -0) its tail is not computed, so that no intermediate
// underflows (an x86 microcode assist) unless the result itself is
// subnormal. The conversions round to nearest even exactly; they agree with
// scalar references on all 2^32 floats. The helpers assume the default
// floating-point environment (round to nearest, no flush-to-zero or
// denormals-are-zero): threads that run kernels must not change it.
//
//   llvm::Value* x = b.CreateLoad(vec_ty, src_ptr);
//   llvm::Value* y = primcache::cpu_internal::emit_gelu_erf(b, x);
//   b.CreateStore(primcache::cpu_internal::emit_f32_to_bf16(b, y), dst_ptr);
//
// Thread-safety: the functions only touch the builder and the values passed,
// which belong to one kernel's LLVMContext. Exceptions: none.
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace primcache::cpu_internal {

// Each function takes x of type float or <N x float> and returns a value of
// the same shape; conversions return the integer type of the same shape.

llvm::Value* emit_exp(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_tanh(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_sigmoid(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_erf(llvm::IRBuilderBase& b, llvm::Value* x);
// x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), accurate in relative terms also
// for large negative x, where 1 + erf cancels.
llvm::Value* emit_gelu_erf(llvm::IRBuilderBase& b, llvm::Value* x);
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed as
// x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) for the same reason.
llvm::Value* emit_gelu_tanh(llvm::IRBuilderBase& b, llvm::Value* x);

// The integral float nearest to x, ties to even (x itself when |x| >= 2^23,
// NaN or infinite).
llvm::Value* emit_round_half_even(llvm::IRBuilderBase& b, llvm::Value* x);

// float -> bf16 / f16 bits (i16), rounding to nearest even. Overflow gives
// infinity; NaN gives a quiet NaN that keeps the sign and the payload's top
// bits.
llvm::Value* emit_f32_to_bf16(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_f32_to_f16(llvm::IRBuilderBase& b, llvm::Value* x);
// bf16 / f16 bits (i16) -> float, exact.
llvm::Value* emit_bf16_to_f32(llvm::IRBuilderBase& b, llvm::Value* bits);
llvm::Value* emit_f16_to_f32(llvm::IRBuilderBase& b, llvm::Value* bits);

// float -> s8 / u8 (i8) / s32 (i32): round to nearest even, saturate to the
// type's range (infinities included); NaN gives 0.
llvm::Value* emit_f32_to_s8(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_f32_to_u8(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_f32_to_s32(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace primcache::cpu_internal
