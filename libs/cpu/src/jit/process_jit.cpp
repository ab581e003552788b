#include "jit/process_jit.hpp"

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/SectionMemoryManager.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/Memory.h>
#include <llvm/Support/TargetSelect.h>

#include "jit/object_symbols.hpp"
#include "jit/target.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/cpu/cpu.hpp"

namespace primcache::cpu_internal {
namespace {

std::atomic<std::size_t> g_bytes{0};
std::atomic<std::size_t> g_blocks{0};
// Bumped with release order each time the mapper maps or protects JIT memory,
// i.e. after the linker (possibly on another thread: ORC runs queued
// materializations on whichever thread looks up next) has written a kernel's
// sections. See acquire_linked_code().
std::atomic<std::uint64_t> g_publications{0};

// Maps JIT memory through the system and counts it. One instance serves every
// SectionMemoryManager (each loaded object gets its own manager, destroyed
// when its JITDylib is removed, which releases its blocks here).
class counting_memory_mapper final : public llvm::SectionMemoryManager::MemoryMapper {
 public:
  llvm::sys::MemoryBlock allocateMappedMemory(llvm::SectionMemoryManager::AllocationPurpose,
                                              size_t bytes, const llvm::sys::MemoryBlock* near,
                                              unsigned flags, std::error_code& ec) override {
    llvm::sys::MemoryBlock block = llvm::sys::Memory::allocateMappedMemory(bytes, near, flags, ec);
    if (!ec && block.base() != nullptr) {
      g_bytes.fetch_add(block.allocatedSize(), std::memory_order_relaxed);
      g_blocks.fetch_add(1, std::memory_order_relaxed);
      g_publications.fetch_add(1, std::memory_order_release);
    }
    return block;
  }

  std::error_code protectMappedMemory(const llvm::sys::MemoryBlock& block,
                                      unsigned flags) override {
    std::error_code ec = llvm::sys::Memory::protectMappedMemory(block, flags);
    g_publications.fetch_add(1, std::memory_order_release);
    return ec;
  }

  std::error_code releaseMappedMemory(llvm::sys::MemoryBlock& block) override {
    std::size_t bytes = block.allocatedSize();
    bool mapped = block.base() != nullptr;
    std::error_code ec = llvm::sys::Memory::releaseMappedMemory(block);
    if (!ec && mapped) {
      g_bytes.fetch_sub(bytes, std::memory_order_relaxed);
      g_blocks.fetch_sub(1, std::memory_order_relaxed);
    }
    return ec;
  }
};

struct jit_state {
  process_jit_handle handle;
  std::string error;  // empty when the JIT was created
};

std::string to_message(llvm::Error err) {
  return llvm::toString(std::move(err));
}

// Code generation at CodeGenOpt::None (the matmul's, compiler.cpp) with
// LLVM's greedy register allocator instead of its fast one, which spills
// every accumulator at each block boundary (twice the code). LLVM offers this
// only as a process-wide option (-optimize-regalloc), read by every code
// generation at level None in the process; it is set once, here, before any
// compilation of this library starts (compile_object creates the JIT first),
// and only where nobody set it on LLVM's command line before.
void use_greedy_allocator_at_level_none() {
  auto& options = llvm::cl::getRegisteredOptions();
  auto it = options.find("optimize-regalloc");
  if (it == options.end() || it->second->getNumOccurrences() != 0) return;
  it->second->addOccurrence(0, "optimize-regalloc", "true");
}

// The JIT, published with release order once created (a failure too);
// null before. Written once, under g_create_mu.
constinit std::atomic<const jit_state*> g_state{nullptr};
// Held while the JIT is created (LLVM's target initialization, the LLJIT,
// the runtime-symbols JITDylib), and by the fork handlers across a fork, so
// that a fork waits for a creation in progress. A mutex, not a
// function-local static: a static's initialization guard cannot be taken by
// a pthread_atfork handler, and a child forked while another thread held it
// waited for that thread forever in __cxa_guard_acquire. Constant-
// initialized and trivially destroyed: usable at any point of the process's
// life, exit included.
constinit mutex g_create_mu;

// The locks hold_across_fork() named, by rank, and those the prepare
// handler took (read by the parent and child handlers, which run on the
// forking thread; glibc runs one fork's handlers at a time).
constexpr int k_fork_locks = static_cast<int>(jit_fork_lock::count);
constinit std::atomic<mutex*> g_fork_locks[k_fork_locks] = {};
constinit mutex* g_fork_taken[k_fork_locks] = {};

void fork_prepare() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
  // Outermost first: a thread holding a lower rank may be waiting for a
  // higher one (the tile cache's lock is held across a link that takes the
  // generic registry's, which may create the JIT).
  for (int i = 0; i < k_fork_locks; ++i) {
    mutex* mu = g_fork_locks[i].load(std::memory_order_acquire);
    if (mu != nullptr) mu->lock();
    g_fork_taken[i] = mu;
  }
  g_create_mu.lock();
}

// In the parent and in the child alike: the child's only thread is the one
// that took the locks, and nothing it guards was left half done (each lock
// was taken between its holders' critical sections).
void fork_release() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
  g_create_mu.unlock();
  for (int i = k_fork_locks - 1; i >= 0; --i) {
    if (g_fork_taken[i] != nullptr) g_fork_taken[i]->unlock();
    g_fork_taken[i] = nullptr;
  }
}

// At the library's load, before any thread of its own exists.
[[maybe_unused]] const bool k_fork_handlers = (register_jit_fork_handlers(), true);

jit_state* create_jit() {
  auto* state = new jit_state;  // never destroyed: see the header
  if (llvm::InitializeNativeTarget() || llvm::InitializeNativeTargetAsmPrinter()) {
    state->error = "LLVM has no native target for this host";
    return state;
  }
  use_greedy_allocator_at_level_none();
  auto jtmb = target_machine_builder(detected_isa());
  if (!jtmb) {
    state->error = jtmb.why().message;
    return state;
  }
  // Used by every memory manager, forever; made once (under g_create_mu).
  auto* mapper = new counting_memory_mapper;

  llvm::orc::LLJITBuilder builder;
  builder.setJITTargetMachineBuilder(jtmb.value())
      .setNumCompileThreads(0)  // compile on the creating thread: creations run in parallel
      .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
      .setObjectLinkingLayerCreator(
          [mapper](llvm::orc::ExecutionSession& es, const llvm::Triple&) noexcept
          -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
            return std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(es, [mapper]() noexcept {
              return std::make_unique<llvm::SectionMemoryManager>(mapper);
            });
          })
      .setCompileFunctionCreator(
          [](llvm::orc::JITTargetMachineBuilder jtmb) noexcept
          -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
            return std::make_unique<llvm::orc::ConcurrentIRCompiler>(std::move(jtmb));
          });
  auto jit = builder.create();
  if (!jit) {
    state->error = "creating the LLVM JIT failed: " + to_message(jit.takeError());
    return state;
  }
  llvm::orc::LLJIT* raw = jit->release();

  // Kernels link against this JITDylib only; its generator answers for the
  // allowlisted libc functions and refuses every other process symbol.
  llvm::orc::JITDylib& runtime = raw->getExecutionSession().createBareJITDylib("primcache.runtime");
  auto generator = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      raw->getDataLayout().getGlobalPrefix(), [](const llvm::orc::SymbolStringPtr& name) noexcept {
        return is_allowed_external_symbol(std::string_view((*name).data(), (*name).size()));
      });
  if (!generator) {
    state->error = "opening the process's symbols failed: " + to_message(generator.takeError());
    return state;
  }
  runtime.addGenerator(std::move(*generator));
  state->handle = process_jit_handle{raw, &runtime};
  return state;
}

// The slow path of process_jit(): the first callers, one of which creates.
const jit_state* created_jit() {
  lock_guard guard(g_create_mu);
  const jit_state* state = g_state.load(std::memory_order_relaxed);  // written under the lock
  if (state == nullptr) {
    state = create_jit();
    g_state.store(state, std::memory_order_release);
  }
  return state;
}

}  // namespace

result<process_jit_handle> process_jit() {
  // Acquire: the JIT and its state were complete before their publication.
  const jit_state* state = g_state.load(std::memory_order_acquire);
  if (state == nullptr) state = created_jit();
  if (!state->error.empty()) return failure{status::runtime_error, state->error};
  return state->handle;
}

void register_jit_fork_handlers() noexcept {
  // Registered at the library's load (k_fork_handlers): later calls find the
  // initialization done and take no lock.
  static const bool registered = ::pthread_atfork(fork_prepare, fork_release, fork_release) == 0;
  (void)registered;
}

void hold_across_fork(jit_fork_lock which, mutex& mu) noexcept {
  register_jit_fork_handlers();
  g_fork_locks[static_cast<int>(which)].store(&mu, std::memory_order_release);
}

std::size_t code_bytes_in_use() noexcept {
  return g_bytes.load(std::memory_order_relaxed);
}

void acquire_linked_code() noexcept {
  (void)g_publications.load(std::memory_order_acquire);
}

std::size_t code_blocks_in_use() noexcept {
  return g_blocks.load(std::memory_order_relaxed);
}

}  // namespace primcache::cpu_internal
