// program_binary.hpp — OpenCL programs as context-independent binaries.
//
// A kernel_plan is everything a generated kernel needs: its OpenCL C source
// (shapes and configuration baked in as constants), its name, the execution
// arguments bound to its parameters in order, and its ND-range.
//
// build_binary compiles the source on an engine's context, launches the
// kernel once on scratch buffers (PoCL compiles the work-group function at
// the first launch, not at clBuildProgram; the launch makes it part of the
// binary), and returns clGetProgramInfo(CL_PROGRAM_BINARIES). A failed build
// throws primcache::error with CL_BUILD_PROGRAM_FAILURE and the build log.
// realize turns a binary into a cl_kernel of another (or the same) context.
//
// A plan may carry a weights packing (matmul with constant weights): a
// second kernel of the same program that copies the user's weights into
// the layout the main kernel reads; the main kernel's weights parameter
// then takes the packed buffer. build_binary launches both.
//
// Thread-safety: free functions, safe from any thread.
#pragma once

#include <CL/cl.h>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "primcache/base/thread_annotations.hpp"

namespace primcache::ocl_internal {

class ocl_engine;

// The packing kernel of a plan: (user weights, packed weights), over an
// ND-range of its own; the packed tensor is packed_bytes long, its layout
// named by layout_key (bytes that enter the constant cache's key).
struct weights_packing {
  std::string name;
  std::size_t user_bytes = 0;
  std::size_t packed_bytes = 0;
  cl_uint work_dims = 1;
  std::array<std::size_t, 3> global{1, 1, 1};
  std::vector<std::byte> layout_key;
};

struct kernel_plan {
  std::string source;
  std::string name;
  // PRIMCACHE_ARG_* of each cl_mem parameter, in order, with its size in
  // bytes (for the capture launch's scratch buffers).
  std::vector<int> args;
  std::vector<std::size_t> arg_bytes;
  cl_uint work_dims = 1;
  std::array<std::size_t, 3> global{1, 1, 1};
  std::array<std::size_t, 3> local{1, 1, 1};
  bool fixed_local = false;  // false: the runtime picks the work-group size
  // Set when the main kernel reads packed weights (the PRIMCACHE_ARG_WEIGHTS
  // parameter, arg_bytes = packed_bytes).
  std::optional<weights_packing> packing;
};

using program_binary = std::vector<unsigned char>;

program_binary build_binary(const ocl_engine& eng, const kernel_plan& plan);

// A binary loaded and built in one engine's context. Engines share one per
// binary among the primitives that use it (ocl_engine::program_for).
class realized_program {
 public:
  realized_program(const ocl_engine& eng, const program_binary& binary, const std::string& name);
  ~realized_program();
  realized_program(const realized_program&) = delete;
  realized_program& operator=(const realized_program&) = delete;
  cl_program get() const noexcept { return program_; }

 private:
  cl_program program_ = nullptr;
};

// One primitive's kernel object. Setting arguments and enqueueing happen
// under one lock, since a cl_kernel's arguments are shared state between
// the threads executing that primitive.
class realized_kernel {
 public:
  realized_kernel(std::shared_ptr<const realized_program> program, const std::string& name);
  ~realized_kernel();
  realized_kernel(const realized_kernel&) = delete;
  realized_kernel& operator=(const realized_kernel&) = delete;

  // Sets the buffers and enqueues the plan's ND-range on `queue`; `done`
  // non-null receives the launch's event (the caller releases it).
  void enqueue(cl_command_queue queue, const kernel_plan& plan, const std::vector<cl_mem>& mems,
               cl_event* done = nullptr) const;
  // Enqueues the plan's packing kernel (this kernel must be it) from `user`
  // into `packed` and waits until it has run.
  void pack(cl_command_queue queue, const weights_packing& packing, cl_mem user,
            cl_mem packed) const;

 private:
  std::shared_ptr<const realized_program> program_;
  cl_kernel kernel_ = nullptr;
  mutable mutex mu_;  // serializes argument setting and enqueue on kernel_
};

}  // namespace primcache::ocl_internal
