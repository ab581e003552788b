// jit/compiler.hpp — from IR-building code to a relocatable object for one
// instruction-set level.
//
// compile_object() gives the kernel its own LLVMContext (one
// ThreadSafeContext per kernel, so kernels compile on several threads at
// once without sharing LLVM state), a module with the target's triple and
// data layout set, and calls `build` to fill it. It then verifies the IR,
// runs kernel_pipeline(name) with the new pass manager and the target's cost
// model (for the matmul a short cleanup pipeline, not O3: its generator
// emits vector IR already), and generates code at kernel_codegen_level(name)
// through SimpleCompiler on a TargetMachine borrowed from a per-ISA pool,
// capturing the object with an llvm::ObjectCache. docs/PERFORMANCE.md ("Where a compilation goes")
// has the measurements behind these choices. The bytes are a relocatable object that names no
// address: load them with jit_module::load in this process or in another on
// a host that supports the same ISA.
//
//   auto object = primcache::cpu_internal::compile_object(
//       "relu_f32_1024", primcache::cpu_isa::avx2, [&](llvm::Module& m) { build_relu(m); });
//   if (!object) return object.why();
//
// Thread-safety: may run on any number of threads at once; nothing is locked
// but the pool of target machines (to take or return one: a compilation owns
// the machine it took) and the kernel's own context. Exceptions: none escape. An exception thrown
// by `build` is caught and returned as a failure (primcache::error keeps its
// status); invalid IR is a failure naming the verifier's findings. LLVM
// itself aborts on internal errors (report_fatal_error), which no caller can
// recover from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
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

// The new-PM pipeline the kernel compiled under `name` is optimized with
// (PassBuilder text, or "O3": the default pipeline) and its code-generation
// optimization level (llvm::CodeGenOpt::Level: 0 None .. 3 Aggressive).
// Chosen per kind of kernel from measurement; compiler.cpp says why.
const char* kernel_pipeline(std::string_view name) noexcept;
int kernel_codegen_level(std::string_view name) noexcept;

// What one compilation measured (filled only under a compile_probe), in
// milliseconds of the compiling thread's CPU time.
struct compile_profile {
  std::string name;
  double build_ms = 0;     // the generator filling the module
  double verify_ms = 0;    // llvm::verifyModule
  double optimize_ms = 0;  // the IR pipeline
  double codegen_ms = 0;   // instruction selection to object bytes
  double link_ms = 0;      // jit_module::compile's link and load (0 for compile_object alone)
  std::size_t instructions_before = 0;  // IR instructions the generator emitted
  std::size_t instructions_after = 0;   // ... and after the pipeline
  std::size_t object_bytes = 0;
};

// A measuring hook for the jit_profile tool and the tests, never set on the
// library's normal path: while a probe lives on a thread, compilations on
// that thread append their compile_profile to it and use its overrides of
// the pipeline and the code-generation settings. A probe made while another
// lives on the thread hides it until destroyed.
class compile_probe {
 public:
  compile_probe() noexcept;
  ~compile_probe();
  compile_probe(const compile_probe&) = delete;
  compile_probe& operator=(const compile_probe&) = delete;

  // The probe of the calling thread, or null.
  static compile_probe* current() noexcept;
  // The calling thread's CPU time in milliseconds (the probe's clock).
  static double thread_cpu_ms() noexcept;

  std::vector<compile_profile> profiles;
  // PassBuilder text, "O1".."O3" or "" (no pass); default kernel_pipeline(name).
  std::optional<std::string> pipeline;
  std::optional<int> codegen_level;  // 0..3; default kernel_codegen_level(name)
  std::optional<bool> fast_isel;     // FastISel on

 private:
  compile_probe* previous_;
};

// How many times compile_object() has run in this process (relaxed count;
// tests use it to show that a kernel came from a blob, not the compiler).
std::uint64_t objects_compiled() noexcept;

}  // namespace primcache::cpu_internal
