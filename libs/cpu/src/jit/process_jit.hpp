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
// Thread-safety: process_jit() may be called from any thread: the first
// callers create the JIT once, under a mutex; every later call is one
// acquire load. ORC's ExecutionSession is thread-safe. The counters are
// relaxed atomics.
//
// fork(): pthread_atfork handlers (registered when the library loads) take
// the JIT's creation lock before a fork and release it after, in the parent
// and in the child, so a fork waits for a creation in progress instead of
// giving the child a lock that no thread of its own will release (the
// child's first creation waited forever). The locks this library holds
// while it links into the JIT (the generic code's registry, the generic
// convolution's tile cache), and the compiler's pool of target machines,
// are held across a fork the same way, outermost first: their owners name
// them with hold_across_fork().
//
// Exceptions: none; the callbacks handed to LLVM are noexcept, so an
// allocation failure inside one ends the process as LLVM's own allocation
// failures do, instead of unwinding through LLVM frames built without
// exception tables.
#pragma once

#include <cstddef>

#include "primcache/base/result.hpp"
#include "primcache/base/thread_annotations.hpp"

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

// Locks held while linking into the JIT, by rank: a lock is taken before
// those of a higher rank, never while one of them is held.
enum class jit_fork_lock : int {
  generic_conv_tiles = 0,  // kernels/generic_conv_kernel.cpp, held across generic_symbol
  generic_code = 1,        // tiered/generic_code.cpp, held across jit_module::load
  target_machines = 2,     // jit/compiler.cpp's pool of LLVM target machines (a leaf)
  count
};

// Holds `mu` across every later fork(): the prepare handler takes it (after
// every lock of a lower rank, before the JIT's creation lock) and both the
// parent's and the child's handler release it. Call once, where the object
// that owns `mu` is made; `mu` must live for the rest of the process.
void hold_across_fork(jit_fork_lock which, mutex& mu) noexcept;

// Registers the handlers above (once; done when the library loads). A
// component whose own fork handlers wait for work that may take these locks
// (the background compiler waits for a compilation in progress) calls this
// before it registers its own, so that its prepare handler, registered
// later, runs first: glibc runs prepare handlers in the reverse order of
// their registration.
void register_jit_fork_handlers() noexcept;

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
