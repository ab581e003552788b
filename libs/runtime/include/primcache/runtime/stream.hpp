// primcache/runtime/stream.hpp — streams: the queue primitives execute on.
//
//   primcache::stream s(eng);
//   prim.execute(s, args);
//   s.wait();
//
// A stream is an in-order queue with a backend part made by its engine
// (backend/memory_storage.hpp). CPU streams execute synchronously: execute()
// returns when the work is done and wait() returns at once; device streams
// return at submission and wait() waits. Thread-safety: a stream may be
// used from several threads; executions from different threads are not
// ordered relative to each other. Exceptions: primcache::error.
//
// Device timing: on a stream whose queue records profiling times (the
// OpenCL streams an engine makes), reset_profiling() starts a measurement
// and profiled_ns() returns the device's execution time of every kernel the
// stream ran since, summed (CL_PROFILING_COMMAND_END - START of each; the
// launches and waits are not in it):
//
//   s.reset_profiling();
//   prim.execute(s, args);
//   std::optional<std::int64_t> ns = s.profiled_ns();  // waits for the kernels
//
//   s.stop_profiling();
//
// Only kernels count: host <-> device copies and the packing of constant
// weights are not in the sum. CPU streams and queues without profiling
// return false / nullopt.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "primcache/base/export.hpp"
#include "primcache/runtime/engine.hpp"

namespace primcache {

class stream;
namespace backend {
class stream_impl;
// A stream over a queue a backend made itself (interop: a user's queue).
PRIMCACHE_API stream wrap_stream(const engine& eng, std::shared_ptr<stream_impl> impl);
// The backend's part of a stream (an in-order queue).
stream_impl& impl_of(const stream& strm) noexcept;
}  // namespace backend

class PRIMCACHE_API stream {
 public:
  explicit stream(const engine& eng);
  const engine& get_engine() const noexcept { return engine_; }
  // Returns when everything submitted to the stream has finished.
  void wait();
  // Starts a device-time measurement (forgetting the previous one); false
  // when the stream cannot time its kernels (see above).
  bool reset_profiling();
  // The device time, in nanoseconds, of the kernels run since
  // reset_profiling(), after waiting for them; the measurement goes on.
  // nullopt when the stream cannot time its kernels or no measurement runs.
  std::optional<std::int64_t> profiled_ns();
  // Ends the measurement: later kernels are not timed (a measurement costs
  // an event per kernel).
  void stop_profiling();

 private:
  friend stream backend::wrap_stream(const engine&, std::shared_ptr<backend::stream_impl>);
  friend backend::stream_impl& backend::impl_of(const stream&) noexcept;
  stream(const engine& eng, std::shared_ptr<backend::stream_impl> impl)
      : engine_(eng), impl_(std::move(impl)) {}
  engine engine_;
  std::shared_ptr<backend::stream_impl> impl_;
};

inline backend::stream_impl& backend::impl_of(const stream& strm) noexcept {
  return *strm.impl_;
}

}  // namespace primcache
