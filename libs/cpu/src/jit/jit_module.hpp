// jit/jit_module.hpp — one kernel's code, linked into the process JIT in a
// JITDylib of its own, and the addresses of the functions it defines.
//
// A jit_module is what a CPU primitive implementation holds. Its object code
// (captured at compilation) stays with it, so the persistent kernel cache can
// store it and a later process can load it without compiling. Each module
// gets a fresh JITDylib: two modules of the same kernel — an evicted
// implementation still held by a primitive and its recreated successor —
// coexist without clashing names. Destroying the module removes its JITDylib,
// which unmaps its code (code_bytes_in_use() drops by what loading added).
//
// Loading links eagerly: every symbol the object defines is resolved before
// load() returns, so link errors surface there and lookup() is a plain
// search of an immutable table.
//
//   auto m = primcache::cpu_internal::jit_module::compile("axpy", primcache::cpu_isa::avx2,
//                                                         [&](llvm::Module& mod) { ... });
//   if (!m) return m.why();
//   auto fn = m.value()->lookup_function<void(float*, const float*, long)>("axpy");
//   fn.value()(dst, src, n);
//   auto copy = primcache::cpu_internal::jit_module::load("axpy", m.value()->object());
//
// Thread-safety: compile() and load() may run on any number of threads; a
// module is immutable after creation, so lookups from many threads are safe.
// The functions found must not be called after the module is destroyed.
// Exceptions: none escape; failures are values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jit/compiler.hpp"
#include "primcache/base/result.hpp"
#include "primcache/cpu/cpu.hpp"

namespace llvm::orc {
class ExecutionSession;
class JITDylib;
}  // namespace llvm::orc

namespace primcache::cpu_internal {

class jit_module {
 public:
  // compile_object() then load().
  static result<std::unique_ptr<jit_module>> compile(std::string_view name, cpu_isa isa,
                                                     ir_builder build);
  // The same with the generator's compile settings.
  static result<std::unique_ptr<jit_module>> compile(std::string_view name, cpu_isa isa,
                                                     const compile_settings& settings,
                                                     ir_builder build);

  // Links an object produced by compile_object() (here or in another
  // process). Refuses (corrupt_data) bytes that check_object() refuses
  // (jit/object_check.hpp: not an object of the kind the code generation
  // makes, e.g. a crafted cache entry) or that record no ISA, (permission_denied)
  // an object that needs a symbol outside the allowlist of
  // object_symbols.hpp, and (unimplemented) an object compiled for an ISA
  // above `highest` or the host's best, naming both. `highest` is the cap
  // now (effective_isa()), or the ISA of the descriptor the object is loaded
  // for: bound when the descriptor was made, it stands against a cap lowered
  // since, as it does for that descriptor's fresh code (compile()).
  static result<std::unique_ptr<jit_module>> load(std::string_view name,
                                                  std::vector<std::byte> object,
                                                  cpu_isa highest = effective_isa());
  static result<std::unique_ptr<jit_module>> load(std::string_view name,
                                                  std::span<const std::byte> object,
                                                  cpu_isa highest = effective_isa()) {
    return load(name, std::vector<std::byte>(object.begin(), object.end()), highest);
  }
  // The same for an object built into the backend (the shape-generic
  // kernels, tiered/generic_code.hpp), refused only above detected_isa():
  // it is chosen for a descriptor's ISA, bound before any later cap, and the
  // cap does not refuse that descriptor's fresh code either.
  static result<std::unique_ptr<jit_module>> load_built_in(std::string_view name,
                                                           std::span<const std::byte> object);

  ~jit_module();
  jit_module(const jit_module&) = delete;
  jit_module& operator=(const jit_module&) = delete;

  // The address of a symbol the object defines; not_found otherwise.
  result<void*> lookup(std::string_view symbol) const;

  template <typename Signature>
  result<Signature*> lookup_function(std::string_view symbol) const {
    auto address = lookup(symbol);
    if (!address) return address.why();
    return reinterpret_cast<Signature*>(address.value());
  }

  const std::string& name() const noexcept { return name_; }
  // The ISA the object was compiled for (recorded in the object).
  cpu_isa isa() const noexcept { return isa_; }
  // The object code, as compile_object() produced it.
  const std::vector<std::byte>& object() const noexcept { return object_; }

 private:
  jit_module(std::string name, std::vector<std::byte> object, llvm::orc::ExecutionSession& es,
             llvm::orc::JITDylib& dylib);

  std::string name_;
  std::vector<std::byte> object_;
  llvm::orc::ExecutionSession* es_;
  llvm::orc::JITDylib* dylib_;
  std::vector<std::pair<std::string, std::uintptr_t>> symbols_;  // sorted by name
  cpu_isa isa_ = cpu_isa::x86_64;

  // load(); `cap` is the highest ISA accepted. compile() passes the ISA it
  // compiled for (a concurrent cap change must not refuse fresh code).
  static result<std::unique_ptr<jit_module>> link(std::string_view name,
                                                  std::vector<std::byte> object, cpu_isa cap);
};

}  // namespace primcache::cpu_internal
