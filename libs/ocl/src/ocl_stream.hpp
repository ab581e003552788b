// ocl_stream.hpp — a stream's OpenCL part: an in-order command queue.
//
// Primitives enqueue and return; wait() is clFinish. Queues the engine makes
// have profiling enabled (events carry times for benchmarks); a user's queue
// (interop) is retained and used as it is.
//
// Thread-safety: enqueueing from several threads is safe (OpenCL 1.2 queues
// are thread-safe); the order between threads is the order of the calls.
#pragma once

#include <CL/cl.h>

#include "primcache/runtime/backend/memory_storage.hpp"

namespace primcache::ocl_internal {

class queue_stream final : public backend::stream_impl {
 public:
  // adopt: the reference is the stream's; otherwise the stream retains one.
  queue_stream(cl_command_queue queue, bool adopt);
  ~queue_stream() override;
  void wait() override;
  cl_command_queue queue() const noexcept { return queue_; }

 private:
  cl_command_queue queue_;
};

// The queue of a stream that runs an OpenCL primitive.
cl_command_queue queue_of(const backend::stream_impl& s);

}  // namespace primcache::ocl_internal
