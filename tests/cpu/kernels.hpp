// kernels.hpp — small kernels built with IRBuilder for the cpu tests.
//
// Each builder fills an llvm::Module handed over by compile_object(). The
// map kernels run a vector body as wide as the ISA's registers and a scalar
// tail, so both shapes of every IR helper are compiled and run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "primcache/cpu/cpu.hpp"

namespace cpu_test {

// void axpy(float* y, const float* x, float a, float b, int64_t n):
// y[i] = a * x[i] + b (a multiply then an add, never fused).
using axpy_fn = void(float* y, const float* x, float a, float b, std::int64_t n);
void build_axpy(llvm::Module& m, primcache::cpu_isa isa, const std::string& name = "axpy");

// void name(float* y, const float* x, int64_t n): y[i] = x[i] * k + k, with k
// baked into the code (distinct k: distinct kernels).
using scale_fn = void(float* y, const float* x, std::int64_t n);
void build_scale(llvm::Module& m, primcache::cpu_isa isa, float k, const std::string& name);

enum class elem { f32, i8, i16, i32 };

// void name(const In* src, Out* dst, int64_t n): dst[i] = op(src[i]), with
// op applied to a float/int vector of the ISA's width or to a scalar.
using unary_op = std::function<llvm::Value*(llvm::IRBuilderBase&, llvm::Value*)>;
void build_map(llvm::Module& m, primcache::cpu_isa isa, const std::string& name, elem in, elem out,
               const unary_op& op);

// void fill_zero(float* p, int64_t n): a memset of n floats.
using fill_fn = void(float* p, std::int64_t n);
void build_fill_zero(llvm::Module& m);

// float call_expf(float x): calls libm's expf, which kernels may not import.
void build_libm_caller(llvm::Module& m);

// void exp_intrinsic(float* y, const float* x): llvm.exp on a <16 x float>,
// which LLVM 15 expands into 16 calls to expf.
void build_exp_intrinsic(llvm::Module& m);

}  // namespace cpu_test
