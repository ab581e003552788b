// ocl_storage.hpp — a device buffer (cl_mem) as a memory object's storage.
//
// Allocated buffers are released with the storage; wrapped ones (the
// caller's cl_mem) are not retained and never released. A wrapped buffer
// (the constructor's or set_handle's) must be a buffer of the engine's
// context holding at least the tensor's bytes (memory_desc::size_bytes);
// anything else is refused with invalid_arguments naming the reason. map() is a blocking
// clEnqueueMapBuffer of the whole buffer on the engine's service queue: the
// caller waits for the streams writing the buffer first (stream::wait()), as
// with any device memory. host_ptr() is nullptr.
//
// Thread-safety: as memory_storage's contract; map/unmap pairs may run from
// several threads (the service queue is thread-safe). Exceptions:
// primcache::error (out_of_memory, invalid_arguments, CL failures by name).
#pragma once

#include <CL/cl.h>

#include "primcache/runtime/backend/memory_storage.hpp"

namespace primcache::ocl_internal {

class ocl_engine;

class buffer_storage final : public backend::memory_storage {
 public:
  buffer_storage(const ocl_engine& eng, std::size_t bytes);  // allocates
  // Wraps `user` (may be null), checked as above.
  buffer_storage(const ocl_engine& eng, std::size_t bytes, cl_mem user);
  ~buffer_storage() override;

  void* handle() const noexcept override { return mem_; }
  void set_handle(void* handle) override;
  void* host_ptr() const noexcept override { return nullptr; }
  void* map() override;
  void unmap(void* mapped) noexcept override;

  cl_mem mem() const noexcept { return mem_; }
  std::size_t bytes() const noexcept { return bytes_; }
  // The engine the buffer belongs to (its cl_context is the buffer's).
  const ocl_engine& engine() const noexcept { return ocl_; }

 private:
  const ocl_engine& ocl_;
  std::size_t bytes_;
  cl_mem mem_ = nullptr;
  bool owned_ = false;
};

}  // namespace primcache::ocl_internal
