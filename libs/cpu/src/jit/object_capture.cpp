#include "jit/object_capture.hpp"

#include <new>

#include <llvm/Support/MemoryBuffer.h>

namespace primcache::cpu_internal {

void capturing_object_cache::notifyObjectCompiled(const llvm::Module*,
                                                  llvm::MemoryBufferRef object) noexcept {
  try {
    const auto* first = reinterpret_cast<const std::byte*>(object.getBufferStart());
    object_.assign(first, first + object.getBufferSize());
    captured_ = true;
  } catch (const std::bad_alloc&) {
    out_of_memory_ = true;
  }
}

std::unique_ptr<llvm::MemoryBuffer> capturing_object_cache::getObject(
    const llvm::Module*) noexcept {
  return nullptr;
}

result<std::vector<std::byte>> capturing_object_cache::take() {
  if (out_of_memory_) {
    return failure{status::out_of_memory, "no memory to keep the compiled object"};
  }
  if (!captured_) return failure{status::runtime_error, "LLVM reported no compiled object"};
  captured_ = false;
  return std::move(object_);
}

}  // namespace primcache::cpu_internal
