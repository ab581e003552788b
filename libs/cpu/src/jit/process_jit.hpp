// jit/process_jit.hpp — the one LLVM ORC LLJIT of the process and the accounting
// of the code memory it maps.
//
// The JIT is created at the first process_jit() call and never destroyed:
// it is intentionally leaked so that it outlives every cached kernel at exit,
// whatever order static destructors run in. Its object layer links with
// RuntimeDyld into memory from a counting mapper, so code_bytes_in_use()
// tells how much kernel code, constant and data memory is mapped right now;
// it returns to its earlier value when the kernels loaded since are gone.
//
// Kernels never see the process's symbols: each kernel lives in its own
// JITDylib (see jit_module.hpp) whose only link is the runtime-symbols
// JITDylib, which resolves the allowlisted libc functions
// (object_symbols.hpp) and nothing else.
//
//   auto jit = primcache::cpu_internal::process_jit();
//   if (!jit) return jit.why();
//   llvm::orc::ExecutionSession& es = jit.value().jit->getExecutionSession();
//
// Thread-safety: process_jit() may be called from any thread (a function-
// local static creates the JIT once); ORC's ExecutionSession is thread-safe.
// The counters are relaxed atomics. Exceptions: none; the callbacks handed to
// LLVM are noexcept, so an allocation failure inside one ends the process
// as LLVM's own allocation failures do, instead of unwinding through LLVM
// frames built without exception tables.
#pragma once

#include <cstddef>

#include "primcache/base/result.hpp"

namespace llvm::orc {
class LLJIT;
class JITDylib;
}  // namespace llvm::orc

namespace primcache::cpu_internal {

struct process_jit_handle {
  llvm::orc::LLJIT* jit = nullptr;
  llvm::orc::JITDylib* runtime_symbols = nullptr;
};

// The process's JIT; a failure (e.g. no native target) is remembered and
// returned to every caller.
result<process_jit_handle> process_jit();

// Bytes and blocks of JIT memory (code, read-only and read-write data of
// every loaded kernel) mapped right now.
std::size_t code_bytes_in_use() noexcept;
std::size_t code_blocks_in_use() noexcept;

// Call after a lookup that materialized a kernel and before reading its
// memory. ORC may link a kernel on another thread (a concurrent lookup runs
// every queued materialization) and hands the result back through
// synchronization inside LLVM, which ThreadSanitizer cannot see because
// LLVM is not instrumented. The mapper publishes with release order after it
// maps and after it protects (the last step of linking); this acquires it,
// so the order is visible to ThreadSanitizer too. Costs one atomic load.
void acquire_linked_code() noexcept;

}  // namespace primcache::cpu_internal
