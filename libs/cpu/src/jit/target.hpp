// jit/target.hpp — what an ISA level means to LLVM: the CPU name, feature
// list and code-generation options kernels are compiled with.
//
// Every level compiles for the generic "x86-64" CPU plus an explicit feature
// list, never for the host CPU's name: an object compiled for avx2 on this
// machine runs on any AVX2 machine, which the persistent kernel cache relies
// on (the key records the ISA, not the host model).
//
//   auto jtmb = primcache::cpu_internal::target_machine_builder(primcache::cpu_isa::avx2);
//   if (!jtmb) return jtmb.why();
//   auto tm = jtmb.value().createTargetMachine();
//
// Thread-safety: all functions are pure or read immutable host facts.
// Exceptions: none; failures are values.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>

#include "primcache/base/result.hpp"
#include "primcache/cpu/cpu.hpp"

namespace primcache::cpu_internal {

// The LLVM feature names a level adds to the level below it ("avx2", "fma").
std::span<const std::string_view> isa_added_features(cpu_isa isa) noexcept;

// Every feature of a level and the levels below it, each prefixed with '+'.
std::vector<std::string> isa_features(cpu_isa isa);

// The best level whose features the host reports (LLVM's host detection
// accounts for what the operating system saves on context switches).
cpu_isa detect_host_isa();

// The width in bits of one vector register at a level: 128, 256 or 512.
// Kernels that map elements to vectors use it as their natural width.
unsigned isa_vector_bits(cpu_isa isa) noexcept;

// The builder for kernels compiled at `isa`: host triple, generic x86-64 CPU,
// the level's features, default (-O2) code generation (compile_object sets
// each compilation's level: kernel_codegen_level) and the large code model (the
// JIT maps code, constants and libc far apart; the large model reaches any
// of them without stubs). Fails on a host that is not x86-64.
result<llvm::orc::JITTargetMachineBuilder> target_machine_builder(cpu_isa isa);

}  // namespace primcache::cpu_internal
