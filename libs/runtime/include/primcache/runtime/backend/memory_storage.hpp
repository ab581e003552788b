// primcache/runtime/backend/memory_storage.hpp — what a memory object holds:
// a backend's storage (a host buffer on the CPU, a device buffer on OpenCL),
// and the stream part a backend provides.
//
// An engine_impl makes both: allocate_storage(bytes) allocates,
// wrap_storage(bytes, handle) wraps the caller's handle (a host pointer, a
// cl_mem), and
// create_stream() makes the backend part of a stream (an in-order queue).
// The defaults are host memory from engine_impl::allocate and a synchronous
// stream, which is what the CPU backend needs; a device backend overrides
// them. Kernels receive storages through exec_ctx::arg_storage (host kernels
// use exec_ctx::arg_ptr, the storage's host pointer).
//
//   auto s = backend::impl_of(eng).allocate_storage(bytes);
//   void* host = s->map();  ... ; s->unmap(host);         // host access
//
// Thread-safety: a storage's handle may not change (set_handle) while an
// execution uses it; map/unmap pairs from several threads are the backend's
// to order (host storages need none). Exceptions: primcache::error
// (out_of_memory from allocation, runtime_error from a device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "primcache/base/export.hpp"

namespace primcache::backend {

class engine_impl;

class PRIMCACHE_API memory_storage {
 public:
  explicit memory_storage(const engine_impl& eng) noexcept : engine_(&eng) {}
  virtual ~memory_storage();
  memory_storage(const memory_storage&) = delete;
  memory_storage& operator=(const memory_storage&) = delete;

  // The engine whose device holds the data; the storage keeps the memory's
  // engine handle alive through the memory object.
  const engine_impl& engine() const noexcept { return *engine_; }
  // The backend handle: the host pointer, or the device buffer (cl_mem).
  virtual void* handle() const noexcept = 0;
  // Replaces the handle by the caller's (which the caller owns); a buffer the
  // storage allocated is freed.
  virtual void set_handle(void* handle) = 0;
  // A pointer host code may use directly, or nullptr for device memory.
  virtual void* host_ptr() const noexcept = 0;
  // Host access to the whole buffer: map() returns a host pointer whose
  // writes reach the storage by unmap(). Host storages return their buffer.
  virtual void* map() = 0;
  virtual void unmap(void* mapped) noexcept = 0;

 private:
  const engine_impl* engine_;
};

// The backend part of a stream: an in-order queue.
class PRIMCACHE_API stream_impl {
 public:
  virtual ~stream_impl();
  // Returns when everything submitted so far has finished.
  virtual void wait() = 0;
  // Device timing (stream.hpp): queues that record profiling times override
  // both; the defaults say the stream cannot.
  virtual bool reset_profiling() { return false; }
  virtual std::optional<std::int64_t> profiled_ns() { return std::nullopt; }
  virtual void stop_profiling() {}
};

}  // namespace primcache::backend
