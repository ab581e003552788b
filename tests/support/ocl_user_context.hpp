// tests/support/ocl_user_context.hpp — an OpenCL context of the test's own
// on the device of engine(gpu, 0): another context than that engine's, for
// interop engines (ocl_interop::make_engine) and memory a user made.
//
//   const test::ocl_user_context user;
//   engine mine = ocl_interop::make_engine(user.device, user.context);
#pragma once

#include <CL/cl.h>

#include <catch2/catch.hpp>

#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/engine.hpp"

namespace primcache::test {

struct ocl_user_context {
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  ocl_user_context() {
    device = ocl_interop::get_device(engine(engine_kind::gpu, 0));
    cl_int err = CL_SUCCESS;
    context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
    REQUIRE(err == CL_SUCCESS);
  }
  ~ocl_user_context() { clReleaseContext(context); }
  ocl_user_context(const ocl_user_context&) = delete;
  ocl_user_context& operator=(const ocl_user_context&) = delete;
};

}  // namespace primcache::test
