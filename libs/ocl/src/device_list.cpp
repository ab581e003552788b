#include "device_list.hpp"

#include <algorithm>
#include <cstdio>

#include "cl_error.hpp"
#include "primcache/base/env.hpp"
#include "primcache/base/error.hpp"

namespace primcache::ocl_internal {
namespace {

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  std::size_t n = 0;
  check(clGetPlatformInfo(p, what, 0, nullptr, &n), "clGetPlatformInfo");
  std::string s(n, '\0');
  check(clGetPlatformInfo(p, what, n, s.data(), nullptr), "clGetPlatformInfo");
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

// ocl-icd's clGetPlatformIDs when no ICD is registered
// (CL_PLATFORM_NOT_FOUND_KHR, cl_khr_icd): no device, not a failure.
constexpr cl_int kNoPlatformRegistered = -1001;

std::vector<cl_platform_id> icd_platforms() {
  cl_uint np = 0;
  const cl_int err = clGetPlatformIDs(0, nullptr, &np);
  if (err == kNoPlatformRegistered || (err == CL_SUCCESS && np == 0)) return {};
  check(err, "clGetPlatformIDs");
  std::vector<cl_platform_id> platforms(np);
  check(clGetPlatformIDs(np, platforms.data(), nullptr), "clGetPlatformIDs");
  return platforms;
}

std::vector<cl_device_id> icd_devices(cl_platform_id platform) {
  cl_uint nd = 0;
  const cl_int err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd);
  if (err == CL_DEVICE_NOT_FOUND || (err == CL_SUCCESS && nd == 0)) return {};
  check(err, "clGetDeviceIDs");
  std::vector<cl_device_id> devices(nd);
  check(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, nd, devices.data(), nullptr),
        "clGetDeviceIDs");
  return devices;
}

const discovery& icd_discovery() {
  static const discovery found = [] {
    discovery d = discover(icd_queries());
    // Once per process, as a malformed environment variable is.
    const char* left = d.devices.empty() ? "no OpenCL device is left" : "the other devices stay";
    for (const std::string& line : d.skipped) {
      std::fprintf(stderr, "primcache: OpenCL discovery left out %s; %s\n", line.c_str(), left);
    }
    return d;
  }();
  return found;
}

}  // namespace

std::vector<device_entry> gpus_first(std::vector<device_entry> discovered) {
  std::stable_partition(discovered.begin(), discovered.end(),
                        [](const device_entry& e) { return (e.type & CL_DEVICE_TYPE_GPU) != 0; });
  return discovered;
}

result<std::vector<device_entry>> select_devices(const std::vector<device_entry>& all,
                                                 const std::optional<std::string>& value) {
  if (!value || value->empty()) return all;
  if (std::all_of(value->begin(), value->end(), [](char c) { return c >= '0' && c <= '9'; })) {
    auto index = parse_int(*value, 0, 1 << 20);
    if (index && static_cast<std::size_t>(index.value()) < all.size()) {
      return std::vector<device_entry>{all[static_cast<std::size_t>(index.value())]};
    }
    return failure{status::invalid_arguments,
                   "no OpenCL device has that index (" + std::to_string(all.size()) + " found)"};
  }
  std::vector<device_entry> chosen;
  for (const auto& e : all) {
    if (e.platform_name.find(*value) != std::string::npos ||
        e.device_name.find(*value) != std::string::npos) {
      chosen.push_back(e);
    }
  }
  if (chosen.empty()) {
    return failure{status::invalid_arguments, "no OpenCL platform or device name contains it"};
  }
  return chosen;
}

std::string device_string(cl_device_id device, cl_device_info what) {
  std::size_t n = 0;
  check(clGetDeviceInfo(device, what, 0, nullptr, &n), "clGetDeviceInfo");
  std::string s(n, '\0');
  check(clGetDeviceInfo(device, what, n, s.data(), nullptr), "clGetDeviceInfo");
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

device_entry describe_device(cl_device_id device) {
  device_entry e;
  e.device = device;
  check(clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof e.platform, &e.platform, nullptr),
        "clGetDeviceInfo(CL_DEVICE_PLATFORM)");
  check(clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof e.type, &e.type, nullptr),
        "clGetDeviceInfo(CL_DEVICE_TYPE)");
  check(clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof e.max_work_group_size,
                        &e.max_work_group_size, nullptr),
        "clGetDeviceInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE)");
  check(clGetDeviceInfo(device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof e.local_mem_size,
                        &e.local_mem_size, nullptr),
        "clGetDeviceInfo(CL_DEVICE_LOCAL_MEM_SIZE)");
  check(clGetDeviceInfo(device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof e.compute_units,
                        &e.compute_units, nullptr),
        "clGetDeviceInfo(CL_DEVICE_MAX_COMPUTE_UNITS)");
  check(clGetDeviceInfo(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof e.max_mem_alloc_size,
                        &e.max_mem_alloc_size, nullptr),
        "clGetDeviceInfo(CL_DEVICE_MAX_MEM_ALLOC_SIZE)");
  e.platform_name = platform_string(e.platform, CL_PLATFORM_NAME);
  e.device_name = device_string(device, CL_DEVICE_NAME);
  e.driver_version = device_string(device, CL_DRIVER_VERSION);
  e.versions = platform_string(e.platform, CL_PLATFORM_VERSION) + " / " +
               device_string(device, CL_DEVICE_VERSION);
  return e;
}

std::optional<std::string> discovery::failure() const {
  if (!devices.empty() || skipped.empty()) return std::nullopt;
  std::string why = "no OpenCL device could be listed: ";
  for (std::size_t i = 0; i < skipped.size(); ++i) {
    why.append(i == 0 ? "" : "; ").append(skipped[i]);
  }
  return why;
}

discovery_queries icd_queries() {
  return {&icd_platforms, &icd_devices, &describe_device};
}

discovery discover(const discovery_queries& queries) {
  discovery found;
  std::vector<cl_platform_id> platforms;
  try {
    platforms = queries.platforms();
  } catch (const error& e) {
    found.skipped.push_back("every OpenCL platform: " + e.message());
    return found;
  }
  for (std::size_t p = 0; p < platforms.size(); ++p) {
    const std::string platform = "OpenCL platform " + std::to_string(p);
    std::vector<cl_device_id> devices;
    try {
      devices = queries.devices(platforms[p]);
    } catch (const error& e) {
      found.skipped.push_back(platform + ": " + e.message());
      continue;
    }
    for (std::size_t d = 0; d < devices.size(); ++d) {
      try {
        found.devices.push_back(queries.describe(devices[d]));
      } catch (const error& e) {
        found.skipped.push_back("device " + std::to_string(d) + " of " + platform + ": " +
                                e.message());
      }
    }
  }
  return found;
}

const std::optional<std::string>& discovery_failure() {
  static const std::optional<std::string> why = icd_discovery().failure();
  return why;
}

const std::vector<device_entry>& engine_devices() {
  static const std::vector<device_entry> devices = [] {
    std::vector<device_entry> all = gpus_first(icd_discovery().devices);
    const auto value = env_string("PRIMCACHE_OCL_DEVICE");
    auto chosen = select_devices(all, value);
    if (!chosen) {
      report_malformed_env("PRIMCACHE_OCL_DEVICE", *value, chosen.why().message, "every device");
      return all;
    }
    return std::move(chosen).value();
  }();
  return devices;
}

}  // namespace primcache::ocl_internal
