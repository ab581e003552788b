#include "ocl_engine.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>

#include "cl_error.hpp"
#include "ocl_storage.hpp"
#include "ocl_stream.hpp"
#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"

namespace primcache::ocl_internal {

ocl_engine::ocl_engine(std::size_t index, device_entry dev)
    : engine_impl(engine_kind::gpu, index), dev_(std::move(dev)) {
  cl_int err = CL_SUCCESS;
  const cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                         reinterpret_cast<cl_context_properties>(dev_.platform), 0};
  context_ = clCreateContext(props, 1, &dev_.device, nullptr, nullptr, &err);
  check(err, "clCreateContext for " + dev_.device_name);
  try {
    service_queue_ = make_queue();
  } catch (...) {
    clReleaseContext(context_);
    throw;
  }
}

ocl_engine::ocl_engine(std::size_t index, device_entry dev, cl_context user_context)
    : engine_impl(engine_kind::gpu, index), dev_(std::move(dev)), context_(user_context) {
  check(clRetainContext(context_), "clRetainContext");
  try {
    service_queue_ = make_queue();
  } catch (...) {
    clReleaseContext(context_);
    throw;
  }
}

ocl_engine::~ocl_engine() {
  clReleaseCommandQueue(service_queue_);
  clReleaseContext(context_);
}

cl_command_queue ocl_engine::make_queue() const {
  cl_int err = CL_SUCCESS;
  cl_command_queue q = clCreateCommandQueue(context_, dev_.device, CL_QUEUE_PROFILING_ENABLE, &err);
  check(err, "clCreateCommandQueue");
  return q;
}

void ocl_engine::write_identity(key_writer& w) const {
  w.str("ocl")
      .str(dev_.platform_name)
      .str(dev_.device_name)
      .str(dev_.driver_version)
      .str(dev_.versions);
}

std::string ocl_engine::describe() const {
  return "ocl:" + dev_.device_name;
}

void* ocl_engine::allocate(std::size_t bytes) const {
  const std::size_t rounded = (bytes + 63) & ~std::size_t{63};
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (p == nullptr) {
    throw error(status::out_of_memory, "cannot allocate " + std::to_string(bytes) + " bytes");
  }
  return p;
}

void ocl_engine::deallocate(void* p) const noexcept {
  std::free(p);
}

std::unique_ptr<backend::memory_storage> ocl_engine::allocate_storage(std::size_t bytes) const {
  return std::make_unique<buffer_storage>(*this, bytes);
}

std::unique_ptr<backend::memory_storage> ocl_engine::wrap_storage(std::size_t bytes,
                                                                  void* handle) const {
  return std::make_unique<buffer_storage>(*this, bytes, static_cast<cl_mem>(handle));
}

std::unique_ptr<backend::stream_impl> ocl_engine::create_stream() const {
  return std::make_unique<queue_stream>(make_queue(), /*adopt=*/true);
}

namespace {

// The realized programs of the process, one per (context, device, binary)
// while any primitive holds it. Keyed by context rather than by engine:
// with POCL_KERNEL_CACHE=0, PoCL 3.1 aborts ("Can't get stat() on
// .../_UNCACHED_*/<kernel>") when programs loaded from one binary into one
// context are released concurrently, which two interop engines sharing a
// context did when each kept its own (docs/ocl.md).
class program_registry {
 public:
  struct slot {
    mutex mu;  // held while the slot's program is built
    std::weak_ptr<const realized_program> program PRIMCACHE_GUARDED_BY(mu);
  };
  // The context, the device and the binary's address: while a realized
  // program is alive, it retains its context and the impl that owns the
  // binary is alive too (its users hold both), so a live slot never belongs
  // to another context or binary; an expired one only means "build again".
  using slot_key = std::tuple<cl_context, cl_device_id, const void*>;

  std::shared_ptr<slot> find_or_add(const slot_key& key) PRIMCACHE_EXCLUDES(mu_) {
    lock_guard<mutex> lock(mu_);
    auto& entry = slots_[key];
    if (!entry) entry = std::make_shared<slot>();
    std::shared_ptr<slot> found = entry;
    if (slots_.size() >= 2 * swept_size_) {
      // Drop slots whose programs are gone (none is being built: a slot
      // being built is held by its builder, use_count > 1).
      std::erase_if(
          slots_, [](const auto& kv) { return kv.second.use_count() == 1 && expired(*kv.second); });
      swept_size_ = std::max<std::size_t>(slots_.size(), 64);
    }
    return found;
  }

 private:
  // Whether a slot no one else holds has lost its program. The slot's lock
  // is free: a builder would hold the slot (use_count > 1).
  static bool expired(slot& s) {
    lock_guard<mutex> lock(s.mu);
    return s.program.expired();
  }

  // Held only to find or add a slot, never during a build.
  mutex mu_;
  std::map<slot_key, std::shared_ptr<slot>> slots_ PRIMCACHE_GUARDED_BY(mu_);
  std::size_t swept_size_ PRIMCACHE_GUARDED_BY(mu_) = 64;
};

program_registry& the_programs() {
  // Never destroyed: programs released during static destruction must find
  // nothing gone (slots hold only weak references).
  static program_registry* r = new program_registry;
  return *r;
}

}  // namespace

std::shared_ptr<const realized_program> ocl_engine::program_for(const program_binary& binary,
                                                                const std::string& name) const {
  const std::shared_ptr<program_registry::slot> slot =
      the_programs().find_or_add({context_, dev_.device, binary.data()});
  lock_guard<mutex> lock(slot->mu);
  if (auto p = slot->program.lock()) return p;
  auto p = std::make_shared<const realized_program>(*this, binary, name);
  slot->program = p;
  return p;
}

const ocl_engine& ocl_engine_of(const backend::engine_impl& e) {
  const auto* o = dynamic_cast<const ocl_engine*>(&e);
  if (o == nullptr) {
    throw error(status::invalid_arguments, "engine " + e.describe() + " is not an OpenCL engine");
  }
  return *o;
}

}  // namespace primcache::ocl_internal
