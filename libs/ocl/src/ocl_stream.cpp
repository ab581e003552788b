#include "ocl_stream.hpp"

#include "cl_error.hpp"
#include "primcache/base/error.hpp"

namespace primcache::ocl_internal {

queue_stream::queue_stream(cl_command_queue queue, bool adopt) : queue_(queue) {
  if (!adopt) check(clRetainCommandQueue(queue_), "clRetainCommandQueue");
}

queue_stream::~queue_stream() {
  clReleaseCommandQueue(queue_);
}

void queue_stream::wait() {
  check(clFinish(queue_), "clFinish");
}

cl_command_queue queue_of(const backend::stream_impl& s) {
  const auto* q = dynamic_cast<const queue_stream*>(&s);
  if (q == nullptr) throw error(status::invalid_arguments, "the stream is not an OpenCL stream");
  return q->queue();
}

}  // namespace primcache::ocl_internal
