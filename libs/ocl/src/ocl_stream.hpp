// ocl_stream.hpp — a stream's OpenCL part: an in-order command queue.
//
// Primitives enqueue and return; wait() is clFinish. Queues the engine makes
// have profiling enabled; a user's queue (interop) is retained and used as
// it is, and can time kernels only if it was made with profiling.
//
// Device timing (stream.hpp's reset_profiling / profiled_ns): while a
// measurement runs, kernel launches ask for an event (profiling()) and hand
// it to record(); profiled_ns() waits for the recorded events and sums
// their CL_PROFILING_COMMAND_END - START. Events are folded into the sum
// every kEventsHeld launches, so a long measurement holds few events.
//
// Thread-safety: enqueueing from several threads is safe (OpenCL 1.2 queues
// are thread-safe); the order between threads is the order of the calls.
// The profiling calls may race with launches and with each other.
#pragma once

#include <CL/cl.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "primcache/base/thread_annotations.hpp"
#include "primcache/runtime/backend/memory_storage.hpp"

namespace primcache::ocl_internal {

class queue_stream final : public backend::stream_impl {
 public:
  // adopt: the reference is the stream's; otherwise the stream retains one.
  queue_stream(cl_command_queue queue, bool adopt);
  ~queue_stream() override;
  void wait() override;
  bool reset_profiling() override;
  std::optional<std::int64_t> profiled_ns() override;
  void stop_profiling() override;
  cl_command_queue queue() const noexcept { return queue_; }

  // Whether a launch should ask for an event and record() it.
  bool profiling() const noexcept { return profiling_.load(std::memory_order_acquire); }
  // Takes the event of a kernel launched on this queue (its reference is
  // the stream's from now on).
  void record(cl_event done);

  static constexpr std::size_t kEventsHeld = 1024;

 private:
  // Waits for `events`, releases them and returns their summed device time.
  static std::int64_t drain(std::vector<cl_event>& events);

  cl_command_queue queue_;
  bool can_profile_ = false;
  std::atomic<bool> profiling_{false};
  mutex mu_;
  std::vector<cl_event> events_ PRIMCACHE_GUARDED_BY(mu_);
  std::int64_t folded_ns_ PRIMCACHE_GUARDED_BY(mu_) = 0;  // events already drained
};

// The queue of a stream that runs an OpenCL primitive.
cl_command_queue queue_of(const backend::stream_impl& s);
// The stream itself (for launches that record their events).
queue_stream& queue_stream_of(backend::stream_impl& s);

}  // namespace primcache::ocl_internal
