// ocl_engine.hpp — an OpenCL device in a context, as a primcache engine.
//
// An engine owns (holds a reference on) its cl_context and a service queue
// used for host access (map/unmap) and cross-engine copies. Engines made by
// index create their own context; interop engines retain the user's.
// Identity for keys: platform name, device name and driver version — never
// the context, so engines of different contexts on one device share cache
// entries. Realized programs are shared by context and device, not by
// engine (program_for).
//
// Thread-safety: immutable after construction; OpenCL 1.2 calls on a context
// and a queue are thread-safe.
#pragma once

#include <CL/cl.h>

#include <memory>
#include <string>

#include "device_list.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"
#include "program_binary.hpp"

namespace primcache::ocl_internal {

class ocl_engine final : public backend::engine_impl {
 public:
  // A fresh context on `dev`.
  ocl_engine(std::size_t index, device_entry dev);
  // The user's context (retained, released with the engine).
  ocl_engine(std::size_t index, device_entry dev, cl_context user_context);
  ~ocl_engine() override;

  void write_identity(key_writer& w) const override;
  std::string describe() const override;
  void* allocate(std::size_t bytes) const override;
  void deallocate(void* p) const noexcept override;
  std::unique_ptr<backend::memory_storage> allocate_storage(std::size_t bytes) const override;
  std::unique_ptr<backend::memory_storage> wrap_storage(std::size_t bytes,
                                                        void* handle) const override;
  std::unique_ptr<backend::stream_impl> create_stream() const override;

  cl_context context() const noexcept { return context_; }
  cl_device_id device() const noexcept { return dev_.device; }
  const device_entry& device_info() const noexcept { return dev_; }
  // An in-order queue for the engine's own host transfers.
  cl_command_queue service_queue() const noexcept { return service_queue_; }
  // The program of `binary` realized in this engine's context for its
  // device: one per (context, device, binary) in the process while any
  // primitive holds it, shared by every engine on that context and device
  // (interop engines may share a context), built by the first asker while
  // others asking for the same one wait (no process-wide lock is held during
  // the build). `binary` must outlive the returned program's users (it is
  // the cached impl's, which they hold).
  std::shared_ptr<const realized_program> program_for(const program_binary& binary,
                                                      const std::string& name) const;
  // A new in-order queue with profiling enabled (the caller releases it).
  cl_command_queue make_queue() const;

 private:
  device_entry dev_;
  cl_context context_ = nullptr;
  cl_command_queue service_queue_ = nullptr;
};

// The engine_impl of a memory or stream known to be on an OpenCL engine.
const ocl_engine& ocl_engine_of(const backend::engine_impl& e);

}  // namespace primcache::ocl_internal
