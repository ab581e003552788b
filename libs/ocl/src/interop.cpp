#include <memory>

#include "device_list.hpp"
#include "ocl_engine.hpp"
#include "ocl_stream.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"

namespace primcache::ocl_interop {

engine make_engine(cl_device_id device, cl_context context) {
  ocl_internal::device_entry dev = ocl_internal::describe_device(device);
  // The index is the device's place among discovered devices (0 if absent):
  // informative only; interop engines are told apart by their impl.
  std::size_t index = 0;
  const auto& all = ocl_internal::engine_devices();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].device == device) index = i;
  }
  return backend::wrap_engine(
      std::make_shared<const ocl_internal::ocl_engine>(index, std::move(dev), context));
}

stream make_stream(const engine& eng, cl_command_queue queue) {
  ocl_internal::ocl_engine_of(backend::impl_of(eng));
  return backend::wrap_stream(eng,
                              std::make_shared<ocl_internal::queue_stream>(queue, /*adopt=*/false));
}

cl_context get_context(const engine& eng) {
  return ocl_internal::ocl_engine_of(backend::impl_of(eng)).context();
}

cl_device_id get_device(const engine& eng) {
  return ocl_internal::ocl_engine_of(backend::impl_of(eng)).device();
}

cl_command_queue get_queue(const stream& strm) {
  return ocl_internal::queue_of(backend::impl_of(strm));
}

}  // namespace primcache::ocl_interop
