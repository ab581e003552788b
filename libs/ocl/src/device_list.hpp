// device_list.hpp — the OpenCL devices primcache sees, in engine-index order.
//
// Every device of every platform counts, whatever type it reports (PoCL's
// device is CL_DEVICE_TYPE_CPU): GPUs first, then the rest, each group in
// platform then device order. PRIMCACHE_OCL_DEVICE narrows the list: a value
// of decimal digits only is an index into the full list (one device); any
// other value keeps the devices whose platform or device name contains it
// (case-sensitive). A malformed value (an index out of range, a name that
// matches nothing) is reported once through primcache's env reporting and
// ignored: every device stays.
//
// Thread-safety: discovered once, on first use; the list is immutable.
#pragma once

#include <CL/cl.h>

#include <optional>
#include <string>
#include <vector>

#include "primcache/base/result.hpp"

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

// The engine order of devices listed in platform then device order: every
// GPU (CL_DEVICE_TYPE_GPU among the type bits) first, then every other
// device, each group keeping its order.
std::vector<device_entry> gpus_first(std::vector<device_entry> discovered);

// What PRIMCACHE_OCL_DEVICE = `value` leaves of `all` (engine order); unset
// or empty keeps every device. A malformed value is a failure
// (invalid_arguments) whose message says why; the caller reports it and
// keeps `all`.
result<std::vector<device_entry>> select_devices(const std::vector<device_entry>& all,
                                                 const std::optional<std::string>& value);

// The facts of one device, discovered or not (interop engines).
device_entry describe_device(cl_device_id device);

// A device's string parameter (CL_DEVICE_NAME, ...).
std::string device_string(cl_device_id device, cl_device_info what);

}  // namespace primcache::ocl_internal
