// constant_weights.hpp — OpenCL constant weights: a matmul's or a
// convolution's weights, marked constant (primitive_attr::
// set_constant_weights), packed once by the plan's packing kernel into a
// device buffer kept in the constant tensor cache of the engine's device
// (constant_tensor_cache_for(engine): "gpu.<index>").
//
//   auto packed = packed_constant_weights(ctx, eng, packer, *plan.packing, slot, "ocl:matmul");
//   mems[weights] = static_cast<cl_mem>(packed->data());   // held until enqueued
//
// Key: backend id "ocl", the packed layout (weights_packing::layout_key),
// the engine's cl_context and the weights memory's id. The context keeps
// two contexts on one device from sharing a buffer (its cl_mem belongs to
// one context); a cached buffer retains its context, so the pointer cannot
// name another context while the entry lives. The memory id, never an
// address, names the weights; the entry is removed when the id dies
// (backend::on_data_release).
//
// Memory: clCreateBuffer in the executing engine's context, released with
// clReleaseMemObject by the last holder. A buffer evicted while a kernel
// that reads it is queued stays alive until that kernel has run (OpenCL
// deletes a released memory object only after the commands using it).
//
// When the cache keeps nothing (capacity 0, full under no_evict, thrashed
// under lru), the primitive's resource keeps the buffer it packed last
// (packed_weights_slot): the next execution with the same weights memory
// offers that buffer to the cache instead of allocating and packing again.
// So a primitive packs once per weights memory whatever the capacity, and
// holds one packed copy of its last weights while the cache does not.
//
// Thread-safety: any thread; racing first executions pack once (the
// cache's single-flight creation), the packing is complete (waited for)
// before any caller gets the buffer. Exceptions: primcache::error.
#pragma once

#include <CL/cl.h>

#include <cstdint>
#include <memory>
#include <string>

#include "primcache/base/thread_annotations.hpp"
#include "primcache/const_cache/constant_buffer.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "program_binary.hpp"

namespace primcache::ocl_internal {

inline constexpr std::uint64_t ocl_backend_id = 0x6c636f;  // "ocl"

// The packed weights one primitive (in one engine) made last.
class packed_weights_slot {
 public:
  // The buffer packed from memory `memory_id`, or null.
  std::shared_ptr<const constant_buffer> get(std::uint64_t memory_id) const;
  void set(std::uint64_t memory_id, std::shared_ptr<const constant_buffer> buffer) const;
  void clear() const;

 private:
  mutable mutex mu_;
  mutable std::uint64_t memory_id_ PRIMCACHE_GUARDED_BY(mu_) = 0;
  mutable std::shared_ptr<const constant_buffer> buffer_ PRIMCACHE_GUARDED_BY(mu_);
};

// The constant cache's key bytes for weights packed as `packing` from the
// memory `memory_id`, used in `context`.
std::string constant_weights_key(const weights_packing& packing, cl_context context,
                                 std::uint64_t memory_id);

// The weights argument of `ctx` packed as `packing` on `eng` (the
// primitive's engine) by `packer`, from the cache, the slot, or packed now
// on the stream's queue (waited for).
std::shared_ptr<const constant_buffer> packed_constant_weights(
    const backend::exec_ctx& ctx, const engine& eng, const realized_kernel& packer,
    const weights_packing& packing, const packed_weights_slot& slot, const char* what);

}  // namespace primcache::ocl_internal
