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

// The runtime asks for the count before it asks for an engine, and says
// only "out of range (0 available)" when it is 0: where OpenCL queries
// failed and left no device, the count throws their CL errors instead (no
// ICD, no platform or no device is still 0).
std::size_t device_count() {
  if (const auto& why = discovery_failure()) throw error(status::runtime_error, *why);
  return engine_devices().size();
}

std::shared_ptr<const backend::engine_impl> create_engine(std::size_t index) {
  const auto& devices = engine_devices();
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
