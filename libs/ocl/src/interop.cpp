#include <memory>
#include <optional>
#include <vector>

#include "cl_error.hpp"
#include "device_list.hpp"
#include "ocl_engine.hpp"
#include "ocl_stream.hpp"
#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"

namespace primcache::ocl_internal {
namespace {

// The devices of interop engines that engine(gpu, i) does not list (left
// out by PRIMCACHE_OCL_DEVICE, sub-devices, ...), each given the index
// listed + its place here. Compared by their facts too: a released
// sub-device's cl_device_id may come back as another device.
class unlisted_devices {
 public:
  std::size_t index_of(const device_entry& dev, std::size_t listed) PRIMCACHE_EXCLUDES(mu_) {
    lock_guard<mutex> lock(mu_);
    for (std::size_t i = 0; i < seen_.size(); ++i) {
      if (same_device(seen_[i], dev)) return listed + i;
    }
    seen_.push_back(dev);
    return listed + seen_.size() - 1;
  }

 private:
  static bool same_device(const device_entry& a, const device_entry& b) {
    return a.device == b.device && a.platform == b.platform && a.platform_name == b.platform_name &&
           a.device_name == b.device_name && a.driver_version == b.driver_version &&
           a.versions == b.versions && a.type == b.type &&
           a.max_work_group_size == b.max_work_group_size && a.local_mem_size == b.local_mem_size &&
           a.compute_units == b.compute_units && a.max_mem_alloc_size == b.max_mem_alloc_size;
  }

  mutex mu_;
  std::vector<device_entry> seen_ PRIMCACHE_GUARDED_BY(mu_);
};

unlisted_devices& the_unlisted_devices() {
  static unlisted_devices* d = new unlisted_devices;  // never destroyed, as the registry
  return *d;
}

}  // namespace
}  // namespace primcache::ocl_internal

namespace primcache::ocl_interop {

engine make_engine(cl_device_id device, cl_context context) {
  ocl_internal::device_entry dev = ocl_internal::describe_device(device);
  // The index must name this device alone: the runtime gives each index its
  // own constant tensor cache ("gpu.<index>", with its own capacity) and
  // names engines "gpu:<index>" in messages and in transform places. A
  // listed device has its place in engine(gpu, i)'s list; any other one an
  // index past that list, its own for the life of the process, which
  // engine(gpu, i) refuses as out of range.
  const auto& listed = ocl_internal::engine_devices();
  std::optional<std::size_t> index;
  for (std::size_t i = 0; i < listed.size() && !index; ++i) {
    if (listed[i].device == device) index = i;
  }
  if (!index) index = ocl_internal::the_unlisted_devices().index_of(dev, listed.size());
  return backend::wrap_engine(
      std::make_shared<const ocl_internal::ocl_engine>(*index, std::move(dev), context));
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
