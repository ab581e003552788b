#include "ocl_storage.hpp"

#include <string>

#include "cl_error.hpp"
#include "ocl_engine.hpp"
#include "primcache/base/error.hpp"

namespace primcache::ocl_internal {
namespace {

// Refuses a user's buffer that the engine's kernels and copies cannot use
// within bounds: one of another context (OpenCL leaves its use undefined;
// PoCL ran kernels on it), an image, or one smaller than the tensor's
// `bytes` (kernels would read and write past its end).
void check_user_buffer(const ocl_engine& eng, cl_mem mem, std::size_t bytes,
                       const std::string& given_to) {
  const std::string what = "the cl_mem given to " + given_to;
  cl_context context = nullptr;
  cl_mem_object_type type = 0;
  std::size_t size = 0;
  const cl_int err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof context, &context, nullptr);
  if (err == CL_INVALID_MEM_OBJECT) {
    throw error(status::invalid_arguments,
                what + " is not an OpenCL memory object (CL_INVALID_MEM_OBJECT)");
  }
  check(err, "clGetMemObjectInfo(CL_MEM_CONTEXT) of " + what);
  check(clGetMemObjectInfo(mem, CL_MEM_TYPE, sizeof type, &type, nullptr),
        "clGetMemObjectInfo(CL_MEM_TYPE) of " + what);
  check(clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, nullptr),
        "clGetMemObjectInfo(CL_MEM_SIZE) of " + what);
  if (context != eng.context()) {
    throw error(status::invalid_arguments,
                what + " belongs to another OpenCL context than engine " + eng.describe() +
                    "'s; its kernels and copies use only buffers of their own context");
  }
  if (type != CL_MEM_OBJECT_BUFFER) {
    throw error(status::invalid_arguments, what + " is not a buffer (an image?)");
  }
  if (size < bytes) {
    throw error(status::invalid_arguments, what + " holds " + std::to_string(size) +
                                               " bytes; the memory descriptor needs " +
                                               std::to_string(bytes));
  }
}

}  // namespace

buffer_storage::buffer_storage(const ocl_engine& eng, std::size_t bytes)
    : memory_storage(eng), ocl_(eng), bytes_(bytes), owned_(true) {
  if (bytes > eng.device_info().max_mem_alloc_size) {
    throw error(status::out_of_memory,
                "cannot allocate " + std::to_string(bytes) + " bytes on " + eng.describe() +
                    ": the device's largest allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE) is " +
                    std::to_string(eng.device_info().max_mem_alloc_size) + " bytes");
  }
  cl_int err = CL_SUCCESS;
  // OpenCL refuses zero-sized buffers; an empty tensor still gets a handle.
  mem_ = clCreateBuffer(eng.context(), CL_MEM_READ_WRITE, bytes == 0 ? 1 : bytes, nullptr, &err);
  if (err != CL_SUCCESS) {
    throw_cl_error(err,
                   "clCreateBuffer of " + std::to_string(bytes) + " bytes on " + eng.describe());
  }
}

buffer_storage::buffer_storage(const ocl_engine& eng, std::size_t bytes, cl_mem user)
    : memory_storage(eng), ocl_(eng), bytes_(bytes), mem_(user), owned_(false) {
  if (user != nullptr) check_user_buffer(eng, user, bytes, "memory(desc, engine, handle)");
}

buffer_storage::~buffer_storage() {
  if (owned_ && mem_ != nullptr) clReleaseMemObject(mem_);
}

void buffer_storage::set_handle(void* handle) {
  // Checked before the current buffer is let go: a refused handle leaves it.
  if (handle != nullptr) {
    check_user_buffer(ocl_, static_cast<cl_mem>(handle), bytes_, "memory::set_data_handle");
  }
  if (owned_ && mem_ != nullptr) clReleaseMemObject(mem_);
  mem_ = static_cast<cl_mem>(handle);
  owned_ = false;
}

void* buffer_storage::map() {
  if (mem_ == nullptr) throw error(status::invalid_arguments, "map of a memory with no buffer");
  cl_int err = CL_SUCCESS;
  void* p = clEnqueueMapBuffer(ocl_.service_queue(), mem_, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                               bytes_ == 0 ? 1 : bytes_, 0, nullptr, nullptr, &err);
  check(err, "clEnqueueMapBuffer");
  return p;
}

void buffer_storage::unmap(void* mapped) noexcept {
  if (mem_ == nullptr || mapped == nullptr) return;
  // unmap is noexcept: a failure here leaves the mapping, which the buffer's
  // release frees.
  if (clEnqueueUnmapMemObject(ocl_.service_queue(), mem_, mapped, 0, nullptr, nullptr) ==
      CL_SUCCESS) {
    clFinish(ocl_.service_queue());
  }
}

}  // namespace primcache::ocl_internal
