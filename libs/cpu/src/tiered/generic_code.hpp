// tiered/generic_code.hpp — the shape-generic kernels compiled when the
// library was built, and their code linked into the process JIT.
//
// tools/generic_kernels_aot.cpp compiles each generic kernel for every ISA
// level the backend generates code for and writes the objects into a source
// file of the library (generic_kernels.cpp in the build tree), which hands
// them to register_generic_objects from a static initializer. Nothing here
// compiles: the first use of a kernel at an ISA links its object into the
// process JIT (jit_module::load, about a millisecond) and keeps it for the
// life of the process.
//
//   auto fn = generic_function<generic_matmul_function>(generic_kernel::matmul,
//                                                       cpu_isa::avx512_core);
//   if (!fn) return fn.why();   // not built in, or not loadable here
//
// Thread-safety: every function may be called from any thread. Exceptions:
// none; failures are values.
#pragma once

#include <cstddef>
#include <span>

#include "primcache/base/result.hpp"
#include "primcache/cpu/cpu.hpp"

namespace primcache::cpu_internal {

enum class generic_kernel : int { matmul = 0, conv = 1, eltwise = 2, reorder = 3 };

struct embedded_object {
  generic_kernel kernel;
  cpu_isa isa;
  const unsigned char* bytes;
  std::size_t size;
};

// Called by the generated source's static initializer; the objects must
// live for the life of the process.
void register_generic_objects(std::span<const embedded_object> objects) noexcept;

// The ISA of the built-in object of `kernel` best suited to code bound to
// `isa`: the highest not above it. not_found when none is built in (a test
// binary that links the backend's objects without the generated ones).
result<cpu_isa> generic_isa_for(generic_kernel kernel, cpu_isa isa);

// The address of the object's exported `symbol`, linked on first use.
result<void*> generic_symbol(generic_kernel kernel, cpu_isa isa, const char* symbol);

template <typename Signature>
result<Signature*> generic_function(generic_kernel kernel, cpu_isa isa, const char* symbol) {
  auto address = generic_symbol(kernel, isa, symbol);
  if (!address) return address.why();
  return reinterpret_cast<Signature*>(address.value());
}

}  // namespace primcache::cpu_internal
