// cl_error.hpp — OpenCL status codes as primcache errors.
//
//   check(clFinish(queue), "clFinish");   // throws primcache::error on failure
//
// The message names the call and the CL_... name of the code
// ("clCreateBuffer failed: CL_INVALID_BUFFER_SIZE (-61)").
// CL_OUT_OF_HOST_MEMORY and CL_MEM_OBJECT_ALLOCATION_FAILURE become
// status::out_of_memory; everything else status::runtime_error. The error
// thrown is a cl_failure, which keeps the CL code for callers that tell
// codes apart (a blob's binary the driver refuses, kernel_primitive.cpp).
#pragma once

#include <CL/cl.h>

#include <string>
#include <string_view>

#include "primcache/base/error.hpp"

namespace primcache::ocl_internal {

// "CL_INVALID_VALUE", or "unknown OpenCL error" for a code not in the table.
std::string_view cl_error_name(cl_int code) noexcept;

// A failed OpenCL call: primcache::error with the CL code.
class cl_failure : public error {
 public:
  cl_failure(status s, std::string message, cl_int code)
      : error(s, std::move(message)), code_(code) {}
  cl_int cl_code() const noexcept { return code_; }

 private:
  cl_int code_;
};

// Whether `code`, from creating a program from a binary, building it or
// creating its kernels (clCreateProgramWithBinary and its binary status,
// clBuildProgram, clCreateKernel), is the driver's verdict on the binary:
// not one it can load or run (CL_INVALID_BINARY, CL_BUILD_PROGRAM_FAILURE,
// CL_INVALID_PROGRAM, CL_INVALID_PROGRAM_EXECUTABLE, CL_INVALID_KERNEL_NAME,
// CL_INVALID_KERNEL_DEFINITION). Other codes (out of resources or memory, a
// device not available) are the device's state, not the binary's.
bool refuses_binary(cl_int code) noexcept;

// Throws cl_failure: "<what> failed: <CL name> (<code>)", then `detail` on
// a line of its own when given.
[[noreturn]] void throw_cl_error(cl_int code, std::string_view what, std::string_view detail = {});

inline void check(cl_int code, std::string_view what) {
  if (code != CL_SUCCESS) throw_cl_error(code, what);
}

}  // namespace primcache::ocl_internal
