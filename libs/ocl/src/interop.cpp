#include <memory>

#include "cl_error.hpp"
#include "device_list.hpp"
#include "ocl_engine.hpp"
#include "ocl_stream.hpp"
#include "primcache/base/error.hpp"
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
  const ocl_internal::ocl_engine& ocl = ocl_internal::ocl_engine_of(backend::impl_of(eng));
  // A queue of another context or device would fail at the first enqueue
  // (or run on the wrong device); an out-of-order queue would let a
  // primitive start before the one it reads from has finished.
  cl_context context = nullptr;
  cl_device_id device = nullptr;
  cl_command_queue_properties props = 0;
  ocl_internal::check(
      clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof context, &context, nullptr),
      "clGetCommandQueueInfo(CL_QUEUE_CONTEXT) of the queue given to make_stream");
  ocl_internal::check(
      clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof device, &device, nullptr),
      "clGetCommandQueueInfo(CL_QUEUE_DEVICE) of the queue given to make_stream");
  ocl_internal::check(
      clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, nullptr),
      "clGetCommandQueueInfo(CL_QUEUE_PROPERTIES) of the queue given to make_stream");
  if (context != ocl.context()) {
    throw error(status::invalid_arguments,
                "ocl_interop::make_stream: the queue belongs to another cl_context than engine " +
                    ocl.describe() + "'s");
  }
  if (device != ocl.device()) {
    throw error(
        status::invalid_arguments,
        "ocl_interop::make_stream: the queue is on another device than engine " + ocl.describe());
  }
  if ((props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) != 0) {
    throw error(status::invalid_arguments,
                "ocl_interop::make_stream: the queue is out of order "
                "(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE); streams are in-order queues");
  }
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
