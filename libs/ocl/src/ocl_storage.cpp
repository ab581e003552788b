#include "ocl_storage.hpp"

#include "cl_error.hpp"
#include "ocl_engine.hpp"
#include "primcache/base/error.hpp"

namespace primcache::ocl_internal {

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
    : memory_storage(eng), ocl_(eng), bytes_(bytes), mem_(user), owned_(false) {}

buffer_storage::~buffer_storage() {
  if (owned_ && mem_ != nullptr) clReleaseMemObject(mem_);
}

void buffer_storage::set_handle(void* handle) {
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
