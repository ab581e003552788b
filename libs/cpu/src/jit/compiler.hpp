// jit/compiler.hpp — from IR-building code to a relocatable object for one
// instruction-set level.
//
// compile_object() gives the kernel its own LLVMContext (one
// ThreadSafeContext per kernel, so kernels compile on several threads at
// once without sharing LLVM state), a module with the target's triple and
// data layout set, and calls `build` to fill it. It then verifies the IR,
// runs the settings' pipeline with the new pass manager and the target's
// cost model (none for the specialized matmul and convolution, whose
// generators emit the final form; a short cleanup pipeline for the generic
// matmul, convolution and layout walks; O3 for the rest), and generates code at
// the settings' level, without the passes they drop, on a TargetMachine
// borrowed from a per-ISA pool, capturing the object with an
// llvm::ObjectCache. docs/PERFORMANCE.md ("Where a compilation goes")
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

// How a kernel is compiled: chosen by its generator from measurement
// (docs/PERFORMANCE.md, "Where a compilation goes"), and passed with it.
struct compile_settings {
  // The new-PM pipeline: PassBuilder text, "O1".."O3" (the default
  // pipelines) or "" (no IR pass).
  const char* pipeline = "O3";
  // llvm::CodeGenOpt::Level: 0 None .. 3 Aggressive.
  int codegen_level = 3;
  // Whether code generation runs loop strength reduction (its IR part, with
  // the IV users analysis it needs). Generators that emit their loops with
  // the addressing decided gain nothing from it and pay 20-25% of the code
  // generation time.
  bool loop_strength_reduction = true;
  // Whether code generation runs the pre-RA machine instruction scheduler.
  // Out-of-order cores gain little from it on code whose order the
  // generator chose; it costs 5-8% of the code generation time.
  bool machine_scheduler = true;
};

// The settings of kernels that state none: O3, Aggressive, LSR (LLVM's
// default optimizing pipeline), except kernels compiled under a name that
// starts with "matmul_", which get the matmul's, and "matmul_generic_" (the
// shape-generic matmul), which gets its own (compiler.cpp).
compile_settings default_compile_settings(std::string_view name) noexcept;

result<std::vector<std::byte>> compile_object(std::string_view name, cpu_isa isa,
                                              const compile_settings& settings, ir_builder build);
// default_compile_settings(name).
result<std::vector<std::byte>> compile_object(std::string_view name, cpu_isa isa, ir_builder build);

// The ISA a module being built is compiled for (compile_object defines
// isa_symbol before it runs the builder); nullopt in a module it does not
// build.
std::optional<cpu_isa> module_isa(const llvm::Module& module);

// The pipeline and code-generation level of default_compile_settings(name).
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
  std::size_t passes_dropped = 0;  // code-generation passes the settings left out
  // Only under a probe with keep_code: the IR after the pipeline (text) and
  // the object, for reading the code a setting produced.
  std::string ir;
  std::vector<std::byte> object;
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
  std::optional<int> codegen_level;             // 0..3; default kernel_codegen_level(name)
  std::optional<bool> fast_isel;                // FastISel on
  std::optional<bool> loop_strength_reduction;  // default: the kernel's settings
  std::optional<bool> machine_scheduler;        // default: the kernel's settings
  bool keep_code = false;                       // fill compile_profile::ir and ::object

 private:
  compile_probe* previous_;
};

// How many times compile_object() has run in this process (relaxed count;
// tests use it to show that a kernel came from a blob, not the compiler).
std::uint64_t objects_compiled() noexcept;

}  // namespace primcache::cpu_internal
