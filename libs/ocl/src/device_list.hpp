// device_list.hpp — the OpenCL devices primcache sees, in engine-index order.
//
// Every device of every platform counts, whatever type it reports (PoCL's
// device is CL_DEVICE_TYPE_CPU): GPUs first, then the rest, each group in
// platform then device order. PRIMCACHE_OCL_DEVICE narrows the list to one
// device: a decimal index into the full list, or a substring of a platform or
// device name. A malformed value (an index out of range, a name that matches
// nothing) is reported once through primcache's env reporting and ignored.
//
// Thread-safety: discovered once, on first use; the list is immutable.
#pragma once

#include <CL/cl.h>

#include <string>
#include <vector>

namespace primcache::ocl_internal {

struct device_entry {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  std::string platform_name;
  std::string device_name;
  std::string driver_version;
  cl_device_type type = 0;
  std::size_t max_work_group_size = 1;
  cl_ulong local_mem_size = 0;
  cl_uint compute_units = 1;
  cl_ulong max_mem_alloc_size = 0;
};

// The devices engine(engine_kind::gpu, i) can pick, after PRIMCACHE_OCL_DEVICE.
const std::vector<device_entry>& engine_devices();

// The facts of one device, discovered or not (interop engines).
device_entry describe_device(cl_device_id device);

// A device's string parameter (CL_DEVICE_NAME, ...).
std::string device_string(cl_device_id device, cl_device_info what);

}  // namespace primcache::ocl_internal
