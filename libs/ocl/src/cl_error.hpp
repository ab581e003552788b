// cl_error.hpp — OpenCL status codes as primcache errors.
//
//   check(clFinish(queue), "clFinish");   // throws primcache::error on failure
//
// The message names the call and the CL_... name of the code
// ("clCreateBuffer failed: CL_INVALID_BUFFER_SIZE (-61)").
// CL_OUT_OF_HOST_MEMORY and CL_MEM_OBJECT_ALLOCATION_FAILURE become
// status::out_of_memory; everything else status::runtime_error.
#pragma once

#include <CL/cl.h>

#include <string>
#include <string_view>

namespace primcache::ocl_internal {

// "CL_INVALID_VALUE", or "unknown OpenCL error" for a code not in the table.
std::string_view cl_error_name(cl_int code) noexcept;

[[noreturn]] void throw_cl_error(cl_int code, std::string_view what, std::string_view detail = {});

inline void check(cl_int code, std::string_view what) {
  if (code != CL_SUCCESS) throw_cl_error(code, what);
}

}  // namespace primcache::ocl_internal
