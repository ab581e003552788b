// The OpenCL backend's registration: engine_kind::gpu engines (one per
// discovered device, each with its own context) and the implementations.
#include <memory>

#include "device_list.hpp"
#include "ocl_engine.hpp"
#include "primcache/base/error.hpp"
#include "primcache/base/export.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primitives/registration.hpp"

namespace primcache::ocl_internal {
namespace {

// The devices engine(gpu, i) can pick: 0 when there are none, whether no
// ICD, platform or device is there or the OpenCL queries failed (a count is
// a question callers ask before making an engine; it never throws).
std::size_t device_count() {
  return engine_devices().size();
}

// The runtime asks for an engine here when the index is in range, and also
// when the count is 0 so that a backend can say why it has no device: where
// OpenCL queries failed and left none, that is their CL errors
// (discovery_failure) instead of "out of range (0 available)".
std::shared_ptr<const backend::engine_impl> create_engine(std::size_t index) {
  const auto& devices = engine_devices();
  if (devices.empty()) {
    if (const auto& why = discovery_failure()) throw error(status::runtime_error, *why);
  }
  if (index >= devices.size()) {
    throw error(status::invalid_arguments, "no OpenCL device " + std::to_string(index) + " (" +
                                               std::to_string(devices.size()) + " found)");
  }
  return std::make_shared<const ocl_engine>(index, devices[index]);
}

void register_ocl_backend() {
  backend::register_engine_factory(engine_kind::gpu, &device_count, &create_engine);
  register_eltwise_impls();
  register_reorder_impls();
  register_matmul_impls();
  register_conv_impls();
}

const bool registered = (register_ocl_backend(), true);

}  // namespace
}  // namespace primcache::ocl_internal

// Referenced by -Wl,--undefined in static links (libs/ocl/CMakeLists.txt).
extern "C" PRIMCACHE_API void primcache_ocl_backend_anchor() {}
