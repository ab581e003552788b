#include "ocl_stream.hpp"

#include <utility>

#include "cl_error.hpp"
#include "primcache/base/error.hpp"

namespace primcache::ocl_internal {

queue_stream::queue_stream(cl_command_queue queue, bool adopt) : queue_(queue) {
  if (!adopt) check(clRetainCommandQueue(queue_), "clRetainCommandQueue");
  cl_command_queue_properties props = 0;
  if (clGetCommandQueueInfo(queue_, CL_QUEUE_PROPERTIES, sizeof props, &props, nullptr) ==
      CL_SUCCESS) {
    can_profile_ = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
  }
}

queue_stream::~queue_stream() {
  std::vector<cl_event> left;
  {
    lock_guard<mutex> g(mu_);
    left.swap(events_);
  }
  for (cl_event e : left) clReleaseEvent(e);
  clReleaseCommandQueue(queue_);
}

void queue_stream::wait() {
  check(clFinish(queue_), "clFinish");
}

bool queue_stream::reset_profiling() {
  if (!can_profile_) return false;
  std::vector<cl_event> old;
  {
    lock_guard<mutex> g(mu_);
    old.swap(events_);
    folded_ns_ = 0;
    profiling_.store(true, std::memory_order_release);
  }
  for (cl_event e : old) clReleaseEvent(e);
  return true;
}

void queue_stream::stop_profiling() {
  std::vector<cl_event> old;
  {
    lock_guard<mutex> g(mu_);
    profiling_.store(false, std::memory_order_release);
    old.swap(events_);
    folded_ns_ = 0;
  }
  for (cl_event e : old) clReleaseEvent(e);
}

void queue_stream::record(cl_event done) {
  std::vector<cl_event> full;
  {
    lock_guard<mutex> g(mu_);
    events_.push_back(done);
    if (events_.size() >= kEventsHeld) full.swap(events_);
  }
  if (full.empty()) return;
  const std::int64_t ns = drain(full);
  lock_guard<mutex> g(mu_);
  folded_ns_ += ns;
}

std::optional<std::int64_t> queue_stream::profiled_ns() {
  if (!profiling()) return std::nullopt;
  std::vector<cl_event> pending;
  {
    lock_guard<mutex> g(mu_);
    pending.swap(events_);
  }
  const std::int64_t ns = drain(pending);
  lock_guard<mutex> g(mu_);
  folded_ns_ += ns;
  return folded_ns_;
}

std::int64_t queue_stream::drain(std::vector<cl_event>& events) {
  struct release_all {
    std::vector<cl_event>& events;
    ~release_all() {
      for (cl_event e : events) clReleaseEvent(e);
      events.clear();
    }
  } release{events};
  if (events.empty()) return 0;
  check(clWaitForEvents(static_cast<cl_uint>(events.size()), events.data()),
        "clWaitForEvents (profiling)");
  std::int64_t sum = 0;
  for (cl_event e : events) {
    cl_ulong start = 0, end = 0;
    check(clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr),
          "clGetEventProfilingInfo (CL_PROFILING_COMMAND_START)");
    check(clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr),
          "clGetEventProfilingInfo (CL_PROFILING_COMMAND_END)");
    if (end > start) sum += static_cast<std::int64_t>(end - start);
  }
  return sum;
}

cl_command_queue queue_of(const backend::stream_impl& s) {
  const auto* q = dynamic_cast<const queue_stream*>(&s);
  if (q == nullptr) throw error(status::invalid_arguments, "the stream is not an OpenCL stream");
  return q->queue();
}

queue_stream& queue_stream_of(backend::stream_impl& s) {
  auto* q = dynamic_cast<queue_stream*>(&s);
  if (q == nullptr) throw error(status::invalid_arguments, "the stream is not an OpenCL stream");
  return *q;
}

}  // namespace primcache::ocl_internal
