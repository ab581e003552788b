// failing_queries.cpp — an LD_PRELOAD library that makes chosen OpenCL
// queries fail, so that the discovery tests can see a broken platform or
// device through the real ICD loader and PoCL (no fake ICD).
//
// PRIMCACHE_TEST_FAILING_CL_QUERY says which:
//   "device:<text>"  clGetDeviceInfo(CL_DRIVER_VERSION) of every device
//                    whose CL_DEVICE_NAME contains <text> is CL_INVALID_DEVICE
//   "platforms"      clGetPlatformIDs is CL_OUT_OF_HOST_MEMORY
// Every other call goes to the ICD loader unchanged.
#include <CL/cl.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::string failing() {
  const char* v = std::getenv("PRIMCACHE_TEST_FAILING_CL_QUERY");
  return v == nullptr ? std::string() : std::string(v);
}

template <class Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

// Exported although the project builds with -fvisibility=hidden: the
// dynamic linker must find them before the ICD loader's.
#define FAILING_QUERIES_EXPORT __attribute__((visibility("default")))

extern "C" FAILING_QUERIES_EXPORT cl_int clGetPlatformIDs(cl_uint num_entries,
                                                          cl_platform_id* platforms,
                                                          cl_uint* num_platforms) {
  static const auto real = next<decltype(&clGetPlatformIDs)>("clGetPlatformIDs");
  if (failing() == "platforms") return CL_OUT_OF_HOST_MEMORY;
  return real(num_entries, platforms, num_platforms);
}

extern "C" FAILING_QUERIES_EXPORT cl_int clGetDeviceInfo(cl_device_id device, cl_device_info param,
                                                         size_t size, void* value,
                                                         size_t* size_ret) {
  static const auto real = next<decltype(&clGetDeviceInfo)>("clGetDeviceInfo");
  const std::string which = failing();
  if (param == CL_DRIVER_VERSION && which.rfind("device:", 0) == 0) {
    char name[256] = {};
    if (real(device, CL_DEVICE_NAME, sizeof name - 1, name, nullptr) == CL_SUCCESS &&
        std::strstr(name, which.c_str() + 7) != nullptr) {
      return CL_INVALID_DEVICE;
    }
  }
  return real(device, param, size, value, size_ret);
}
