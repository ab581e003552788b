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
// A platform or device whose OpenCL query fails (clGetDeviceIDs,
// clGetDeviceInfo, clGetPlatformInfo) is left out and reported once on
// stderr, naming it and the CL error; the others stay. When queries failed
// and no device is left, discovery_failure() says why: the backend's engine
// count is 0 (as with no device at all) and its engine factory throws it
// (so engine(gpu, i) names the CL error instead of "out of range (0
// available)").
//
// Thread-safety: discovered once, on first use; the list is immutable.
#pragma once

#include <CL/cl.h>

#include <functional>
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
  // CL_PLATFORM_VERSION and CL_DEVICE_VERSION, joined by " / ": where a
  // driver names what its binaries depend on beyond its own version (PoCL:
  // the LLVM it was built with, and the CPU it compiles for).
  std::string versions;
  cl_device_type type = 0;
  std::size_t max_work_group_size = 1;
  cl_ulong local_mem_size = 0;
  cl_uint compute_units = 1;
  cl_ulong max_mem_alloc_size = 0;
};

// The devices engine(engine_kind::gpu, i) can pick, after PRIMCACHE_OCL_DEVICE.
const std::vector<device_entry>& engine_devices();

// Why engine_devices() is empty when OpenCL queries failed ("no OpenCL
// device could be listed: ..." with each failure); nullopt when a device
// was listed or none failed (no ICD, no platform, no device is not a
// failure).
const std::optional<std::string>& discovery_failure();

// What discovery found: every device it could describe, in platform then
// device order, and a line for each platform or device it left out because
// a query about it failed ("device 1 of OpenCL platform 0: clGetDeviceInfo
// (CL_DEVICE_NAME) failed: CL_INVALID_DEVICE (-33)").
struct discovery {
  std::vector<device_entry> devices;
  std::vector<std::string> skipped;
  // The failure to report when no device is left: see discovery_failure().
  std::optional<std::string> failure() const;
};

// The OpenCL queries discovery makes. A failing query throws
// primcache::error (as check() does); tests replace them to make one fail.
struct discovery_queries {
  std::function<std::vector<cl_platform_id>()> platforms;
  std::function<std::vector<cl_device_id>(cl_platform_id)> devices;
  std::function<device_entry(cl_device_id)> describe;
};
// The ICD loader's: clGetPlatformIDs (none registered is an empty list),
// clGetDeviceIDs (CL_DEVICE_NOT_FOUND is an empty list), describe_device.
discovery_queries icd_queries();
// Every device `queries` list, skipping the platforms and devices whose
// queries fail.
discovery discover(const discovery_queries& queries);

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
