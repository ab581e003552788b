// primcache/ocl/ocl.hpp — the OpenCL backend's public part: interop with a
// user's OpenCL objects and the backend's counters.
//
// Linking primcache::ocl registers engine_kind::gpu: engine(engine_kind::gpu,
// i) is the i-th OpenCL device (GPUs first, then every other device, e.g.
// PoCL's CPU device; PRIMCACHE_OCL_DEVICE picks one by index or by a
// substring of its platform or device name). Memory on such an engine is a
// cl_mem (memory::get_data_handle), streams are in-order queues, and
// execution is asynchronous until stream::wait().
//
//   cl_context ctx = ...; cl_device_id dev = ...; cl_command_queue q = ...;
//   primcache::engine eng = primcache::ocl_interop::make_engine(dev, ctx);
//   primcache::stream strm = primcache::ocl_interop::make_stream(eng, q);
//   primcache::memory m(md, eng, my_cl_mem);   // wraps the user's buffer
//
// A wrapped cl_mem (memory's constructor, memory::set_data_handle) must be
// a buffer of the engine's context holding at least the descriptor's
// size_bytes(); any other is refused (invalid_arguments).
//
// Primitives are cached by device (platform, device, driver), never by
// context: two engines of different contexts on one device share a cache
// entry (kernel binaries), realized once per primitive in each context.
//
// Thread-safety: every function may be called from any thread.
// Exceptions: primcache::error; OpenCL failures name the CL_... code.
#pragma once

#include <CL/cl.h>

#include <cstdint>

#include "primcache/base/export.hpp"
#include "primcache/runtime/engine.hpp"
#include "primcache/runtime/stream.hpp"

namespace primcache::ocl_interop {

// An engine on the user's device and context. The engine retains the
// context; the user may release theirs. Any device of the context is
// accepted, listed by engine(gpu, i) or not (PRIMCACHE_OCL_DEVICE left it
// out, a sub-device): its engine::get_index() is the device's index in
// engine(gpu, i)'s list, else an index past that list which no other
// device has in the process (engine(gpu, that index) is out of range).
PRIMCACHE_API engine make_engine(cl_device_id device, cl_context context);
// A stream of `eng` that enqueues on the user's in-order queue (retained;
// the user may release theirs). A queue of another context or device, or
// an out-of-order queue, is invalid_arguments; an invalid one names the CL
// error.
PRIMCACHE_API stream make_stream(const engine& eng, cl_command_queue queue);
PRIMCACHE_API cl_context get_context(const engine& eng);
PRIMCACHE_API cl_device_id get_device(const engine& eng);
PRIMCACHE_API cl_command_queue get_queue(const stream& strm);

// Process-wide counters (relaxed): programs built from OpenCL C source,
// programs realized from cached binaries (clCreateProgramWithBinary), and
// constant weights packed into a device buffer (a matmul with
// primitive_attr::set_constant_weights; docs/const_cache.md).
struct program_counts {
  std::uint64_t source_builds = 0;
  std::uint64_t binary_loads = 0;
  std::uint64_t weights_packs = 0;
};
PRIMCACHE_API program_counts get_program_counts();

}  // namespace primcache::ocl_interop
