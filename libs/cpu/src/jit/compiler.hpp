// jit/compiler.hpp — from IR-building code to a relocatable object for one
// instruction-set level.
//
// compile_object() gives the kernel its own LLVMContext (one
// ThreadSafeContext per kernel, so kernels compile on several threads at
// once without sharing LLVM state), a module with the target's triple and
// data layout set, and calls `build` to fill it. It then verifies the IR,
// optimizes it with the new pass manager at O3 using the target's cost model,
// and generates code through ConcurrentIRCompiler, capturing the object with
// an llvm::ObjectCache. The bytes are a relocatable object that names no
// address: load them with jit_module::load in this process or in another on
// a host that supports the same ISA.
//
//   auto object = primcache::cpu_internal::compile_object(
//       "relu_f32_1024", primcache::cpu_isa::avx2, [&](llvm::Module& m) { build_relu(m); });
//   if (!object) return object.why();
//
// Thread-safety: may run on any number of threads at once; nothing is locked
// but the kernel's own context. Exceptions: none escape. An exception thrown
// by `build` is caught and returned as a failure (primcache::error keeps its
// status); invalid IR is a failure naming the verifier's findings. LLVM
// itself aborts on internal errors (report_fatal_error), which no caller can
// recover from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include <llvm/ADT/STLFunctionalExtras.h>

#include "primcache/base/result.hpp"
#include "primcache/cpu/cpu.hpp"

namespace llvm {
class Module;
}

namespace primcache::cpu_internal {

// Fills an empty module (name, triple and data layout set) with the kernel's
// functions. Functions to be called from outside need external linkage.
using ir_builder = llvm::function_ref<void(llvm::Module&)>;

// Every object defines this symbol: a constant int32, the cpu_isa it was
// compiled for (jit_module::load reads it and refuses code above the cap).
inline constexpr const char* isa_symbol = "primcache_isa";

result<std::vector<std::byte>> compile_object(std::string_view name, cpu_isa isa, ir_builder build);

// How many times compile_object() has run in this process (relaxed count;
// tests use it to show that a kernel came from a blob, not the compiler).
std::uint64_t objects_compiled() noexcept;

}  // namespace primcache::cpu_internal
