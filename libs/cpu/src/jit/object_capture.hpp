// jit/object_capture.hpp — an llvm::ObjectCache that keeps the object code
// LLVM compiles, so a kernel can be stored and later loaded without
// compiling again.
//
// One instance serves one compilation on one thread; it never answers a
// lookup (getObject returns null: whether a kernel is already compiled is the
// kernel caches' business, keyed by primitive, not LLVM's, keyed by module).
//
//   primcache::cpu_internal::capturing_object_cache capture;
//   llvm::orc::ConcurrentIRCompiler compile(jtmb, &capture);
//   auto obj = compile(module);
//   std::vector<std::byte> bytes = capture.take();
//
// Thread-safety: none; confine an instance to one thread. Exceptions: the
// LLVM callbacks are noexcept and record an allocation failure instead of
// throwing it; take() reports it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <llvm/ExecutionEngine/ObjectCache.h>

#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

class capturing_object_cache final : public llvm::ObjectCache {
 public:
  // Called by LLVM after code generation, with the object it produced.
  void notifyObjectCompiled(const llvm::Module* module,
                            llvm::MemoryBufferRef object) noexcept override;
  // Never a hit: every compilation through this cache generates code.
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module* module) noexcept override;

  // The object of the last compilation; fails when there was none or copying
  // it ran out of memory.
  result<std::vector<std::byte>> take();

 private:
  std::vector<std::byte> object_;
  bool captured_ = false;
  bool out_of_memory_ = false;
};

}  // namespace primcache::cpu_internal
