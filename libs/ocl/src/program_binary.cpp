#include "program_binary.hpp"

#include <atomic>

#include "cl_error.hpp"
#include "ocl_engine.hpp"
#include "primcache/base/error.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/args.h"

namespace primcache::ocl_internal {
namespace {

std::atomic<std::uint64_t> source_builds{0};
std::atomic<std::uint64_t> binary_loads{0};
std::atomic<std::uint64_t> weights_packs{0};

std::string build_log(cl_program program, cl_device_id device) {
  std::size_t n = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) != CL_SUCCESS) {
    return "(no build log)";
  }
  std::string log(n, '\0');
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return "build log:\n" + log;
}

void build(cl_program program, cl_device_id device, const std::string& what) {
  const cl_int err = clBuildProgram(program, 1, &device, "-cl-std=CL1.2", nullptr, nullptr);
  if (err != CL_SUCCESS) {
    const std::string log = build_log(program, device);
    clReleaseProgram(program);
    throw_cl_error(err, "clBuildProgram of " + what, log);
  }
}

// Releases OpenCL objects at scope exit.
struct releaser {
  std::vector<cl_mem> mems;
  cl_kernel kernel = nullptr;
  cl_program program = nullptr;
  cl_command_queue queue = nullptr;
  ~releaser() {
    for (cl_mem m : mems) clReleaseMemObject(m);
    if (kernel) clReleaseKernel(kernel);
    if (program) clReleaseProgram(program);
    if (queue) clReleaseCommandQueue(queue);
  }
};

void enqueue_kernel(cl_command_queue queue, cl_kernel kernel, const kernel_plan& plan,
                    const std::vector<cl_mem>& mems, cl_event* done = nullptr) {
  for (std::size_t i = 0; i < mems.size(); ++i) {
    check(clSetKernelArg(kernel, static_cast<cl_uint>(i), sizeof(cl_mem), &mems[i]),
          "clSetKernelArg of " + plan.name);
  }
  check(clEnqueueNDRangeKernel(queue, kernel, plan.work_dims, nullptr, plan.global.data(),
                               plan.fixed_local ? plan.local.data() : nullptr, 0, nullptr, done),
        "clEnqueueNDRangeKernel of " + plan.name);
}

// Waits for one launch and releases its event. A command can fail on the
// device after the driver accepted it: its event ends with a negative
// execution status, which neither the enqueue nor clFinish has to report.
void wait_for_launch(cl_event done, const std::string& what) {
  const cl_int waited = clWaitForEvents(1, &done);
  cl_int status = CL_COMPLETE;
  const cl_int asked =
      clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
  clReleaseEvent(done);
  if (asked == CL_SUCCESS && status < 0) throw_cl_error(status, what + " on the device");
  check(waited, "clWaitForEvents (" + what + ")");
}

cl_event enqueue_packing(cl_command_queue queue, cl_kernel kernel, const weights_packing& packing,
                         cl_mem user, cl_mem packed) {
  check(clSetKernelArg(kernel, 0, sizeof(cl_mem), &user), "clSetKernelArg of " + packing.name);
  check(clSetKernelArg(kernel, 1, sizeof(cl_mem), &packed), "clSetKernelArg of " + packing.name);
  cl_event done = nullptr;
  check(clEnqueueNDRangeKernel(queue, kernel, packing.work_dims, nullptr, packing.global.data(),
                               nullptr, 0, nullptr, &done),
        "clEnqueueNDRangeKernel of " + packing.name);
  return done;
}

}  // namespace

program_binary build_binary(const ocl_engine& eng, const kernel_plan& plan) {
  releaser r;
  cl_int err = CL_SUCCESS;
  const char* src = plan.source.c_str();
  const std::size_t len = plan.source.size();
  r.program = clCreateProgramWithSource(eng.context(), 1, &src, &len, &err);
  check(err, "clCreateProgramWithSource of " + plan.name);
  source_builds.fetch_add(1, std::memory_order_relaxed);
  cl_program p = r.program;
  r.program = nullptr;  // build() releases it on failure
  build(p, eng.device(), plan.name);
  r.program = p;
  r.kernel = clCreateKernel(r.program, plan.name.c_str(), &err);
  check(err, "clCreateKernel " + plan.name);

  // One launch on scratch buffers, so that the binary carries the compiled
  // work-group function (PoCL builds it at the first enqueue).
  for (std::size_t bytes : plan.arg_bytes) {
    cl_mem m =
        clCreateBuffer(eng.context(), CL_MEM_READ_WRITE, bytes == 0 ? 1 : bytes, nullptr, &err);
    check(err, "clCreateBuffer (capture launch of " + plan.name + ")");
    r.mems.push_back(m);
  }
  r.queue = eng.make_queue();
  // Its status checked: a binary captured after a launch that failed on the
  // device would be cached and persisted as if it ran.
  cl_event launched = nullptr;
  enqueue_kernel(r.queue, r.kernel, plan, r.mems, &launched);
  wait_for_launch(launched, "the capture launch of " + plan.name);
  if (plan.packing) {
    // The packing kernel's work-group function too.
    const weights_packing& pk = *plan.packing;
    cl_mem user = clCreateBuffer(eng.context(), CL_MEM_READ_WRITE,
                                 pk.user_bytes == 0 ? 1 : pk.user_bytes, nullptr, &err);
    check(err, "clCreateBuffer (capture launch of " + pk.name + ")");
    r.mems.push_back(user);
    cl_kernel packing_kernel = clCreateKernel(r.program, pk.name.c_str(), &err);
    check(err, "clCreateKernel " + pk.name);
    struct kernel_releaser {
      cl_kernel k;
      ~kernel_releaser() { clReleaseKernel(k); }
    } release_packing{packing_kernel};
    // The main kernel's weights scratch buffer is packed_bytes long.
    cl_mem packed = nullptr;
    for (std::size_t i = 0; i < plan.args.size(); ++i) {
      if (plan.args[i] == PRIMCACHE_ARG_WEIGHTS) packed = r.mems[i];
    }
    if (packed == nullptr) {
      throw error(status::runtime_error, plan.name + ": a packing plan without weights");
    }
    wait_for_launch(enqueue_packing(r.queue, packing_kernel, pk, user, packed),
                    "the capture launch of " + pk.name);
  }
  check(clFinish(r.queue), "clFinish (capture launch of " + plan.name + ")");

  std::size_t size = 0;
  check(clGetProgramInfo(r.program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr),
        "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)");
  if (size == 0) {
    throw error(status::runtime_error,
                "the OpenCL driver of " + eng.describe() + " returned no binary for " + plan.name);
  }
  program_binary binary(size);
  unsigned char* ptr = binary.data();
  check(clGetProgramInfo(r.program, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr),
        "clGetProgramInfo(CL_PROGRAM_BINARIES)");
  return binary;
}

realized_program::realized_program(const ocl_engine& eng, const program_binary& binary,
                                   const std::string& name) {
  cl_int err = CL_SUCCESS, binary_status = CL_SUCCESS;
  const unsigned char* ptr = binary.data();
  const std::size_t size = binary.size();
  cl_device_id dev = eng.device();
  cl_program p =
      clCreateProgramWithBinary(eng.context(), 1, &dev, &size, &ptr, &binary_status, &err);
  check(err, "clCreateProgramWithBinary of " + name);
  binary_loads.fetch_add(1, std::memory_order_relaxed);
  if (binary_status != CL_SUCCESS) {
    clReleaseProgram(p);
    throw_cl_error(binary_status, "loading the binary of " + name);
  }
  build(p, dev, name);  // releases p on failure
  program_ = p;
}

realized_program::~realized_program() {
  clReleaseProgram(program_);
}

realized_kernel::realized_kernel(std::shared_ptr<const realized_program> program,
                                 const std::string& name)
    : program_(std::move(program)) {
  cl_int err = CL_SUCCESS;
  kernel_ = clCreateKernel(program_->get(), name.c_str(), &err);
  check(err, "clCreateKernel " + name);
}

realized_kernel::~realized_kernel() {
  clReleaseKernel(kernel_);
}

void realized_kernel::enqueue(cl_command_queue queue, const kernel_plan& plan,
                              const std::vector<cl_mem>& mems, cl_event* done) const {
  lock_guard<mutex> lock(mu_);
  enqueue_kernel(queue, kernel_, plan, mems, done);
}

void realized_kernel::pack(cl_command_queue queue, const weights_packing& packing, cl_mem user,
                           cl_mem packed) const {
  cl_event done = nullptr;
  {
    lock_guard<mutex> lock(mu_);
    done = enqueue_packing(queue, kernel_, packing, user, packed);
  }
  weights_packs.fetch_add(1, std::memory_order_relaxed);
  wait_for_launch(done, packing.name);
}

}  // namespace primcache::ocl_internal

namespace primcache::ocl_interop {

program_counts get_program_counts() {
  return {ocl_internal::source_builds.load(std::memory_order_relaxed),
          ocl_internal::binary_loads.load(std::memory_order_relaxed),
          ocl_internal::weights_packs.load(std::memory_order_relaxed)};
}

}  // namespace primcache::ocl_interop
