#include "primcache/runtime/memory.hpp"

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"
#include "primcache/runtime/backend/memory_storage.hpp"
#include "primcache/runtime/stream.hpp"

namespace primcache {
namespace backend {

memory_storage::~memory_storage() = default;
stream_impl::~stream_impl() = default;

namespace {

// Host memory: the engine's allocate/deallocate, or the caller's pointer.
class host_storage final : public memory_storage {
 public:
  // Wraps `handle`, or with `allocate` allocates `bytes` (none for 0).
  host_storage(const engine_impl& eng, std::size_t bytes, void* handle, bool allocate)
      : memory_storage(eng), ptr_(handle) {
    if (allocate && bytes > 0) {
      ptr_ = eng.allocate(bytes);
      owned_ = true;
    }
  }
  ~host_storage() override { release(); }
  void* handle() const noexcept override { return ptr_; }
  void set_handle(void* handle) override {
    release();
    ptr_ = handle;
  }
  void* host_ptr() const noexcept override { return ptr_; }
  void* map() override { return ptr_; }
  void unmap(void*) noexcept override {}

 private:
  void release() noexcept {
    if (owned_) engine().deallocate(ptr_);
    owned_ = false;
  }
  void* ptr_;
  bool owned_ = false;  // allocated here, freed with the storage
};

class synchronous_stream final : public stream_impl {
 public:
  void wait() override {}
};

}  // namespace

std::unique_ptr<memory_storage> engine_impl::allocate_storage(std::size_t bytes) const {
  return std::make_unique<host_storage>(*this, bytes, nullptr, true);
}

std::unique_ptr<memory_storage> engine_impl::wrap_storage(std::size_t bytes, void* handle) const {
  return std::make_unique<host_storage>(*this, bytes, handle, false);
}

std::unique_ptr<stream_impl> engine_impl::create_stream() const {
  return std::make_unique<synchronous_stream>();
}

}  // namespace backend

namespace {
// Ids of memory data: the first is 1, none is reused (2^64 ids outlast any
// process).
std::uint64_t next_memory_id() noexcept {
  static std::atomic<std::uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}
}  // namespace

struct memory::state {
  state(const desc& d, const engine& e, std::unique_ptr<backend::memory_storage> s)
      : md(d), eng(e), storage(std::move(s)) {}
  ~state() { run_release_actions(); }
  desc md;
  engine eng;  // keeps the engine (and so the storage's engine_impl) alive
  std::unique_ptr<backend::memory_storage> storage;
  // Relaxed: set_data_handle may not race with executions reading it (the
  // memory's contract); atomic so that a misuse is not undefined behaviour.
  std::atomic<std::uint64_t> id{next_memory_id()};

  // What backends asked to run when the current data is released
  // (backend::on_data_release); executions of several threads may add.
  using action_list = std::vector<std::pair<std::string, std::function<void()>>>;
  mutex release_mutex;
  action_list release_actions PRIMCACHE_GUARDED_BY(release_mutex);

  void run_release_actions() noexcept {
    action_list actions;
    {
      lock_guard g(release_mutex);
      actions.swap(release_actions);
    }
    for (auto& a : actions) a.second();
  }
};

namespace {
void check_desc(const memory::desc& md) {
  if (md.is_any()) {
    throw error(status::invalid_arguments,
                "memory needs a concrete layout; " + md.to_string() +
                    " is format any (take the layout from the primitive descriptor)");
  }
}

[[noreturn]] void empty_memory() {
  throw error(status::invalid_arguments, "the memory object is empty");
}
}  // namespace

memory::memory(const desc& md, const engine& eng) {
  check_desc(md);
  state_ =
      std::make_shared<state>(md, eng, backend::impl_of(eng).allocate_storage(md.size_bytes()));
}

memory::memory(const desc& md, const engine& eng, void* handle) {
  check_desc(md);
  state_ =
      std::make_shared<state>(md, eng, backend::impl_of(eng).wrap_storage(md.size_bytes(), handle));
}

const memory::desc& memory::get_desc() const {
  if (!state_) empty_memory();
  return state_->md;
}
const engine& memory::get_engine() const {
  if (!state_) empty_memory();
  return state_->eng;
}
void* memory::get_data_handle() const {
  if (!state_) empty_memory();
  return state_->storage->handle();
}
void memory::set_data_handle(void* handle) {
  if (!state_) empty_memory();
  state_->storage->set_handle(handle);
  // Even for the same pointer: the caller says the data may be other data.
  state_->id.store(next_memory_id(), std::memory_order_relaxed);
  state_->run_release_actions();
}
std::uint64_t memory::get_id() const {
  if (!state_) empty_memory();
  return state_->id.load(std::memory_order_relaxed);
}
void* memory::map_data() const {
  if (!state_) empty_memory();
  return state_->storage->map();
}
void memory::unmap_data(void* mapped) const {
  if (!state_) empty_memory();
  state_->storage->unmap(mapped);
}

namespace backend {
const memory_storage* storage_of(const memory& m) noexcept {
  return m.state_ ? m.state_->storage.get() : nullptr;
}

void on_data_release(const memory& m, std::string_view token, std::function<void()> action) {
  if (!m.state_) empty_memory();
  lock_guard g(m.state_->release_mutex);
  for (const auto& a : m.state_->release_actions) {
    if (a.first == token) return;
  }
  m.state_->release_actions.emplace_back(std::string(token), std::move(action));
}
}  // namespace backend

namespace backend {
stream wrap_stream(const engine& eng, std::shared_ptr<stream_impl> impl) {
  if (!impl) throw error(status::invalid_arguments, "wrap_stream: the stream's queue is null");
  return stream(eng, std::move(impl));
}
}  // namespace backend

stream::stream(const engine& eng) : engine_(eng), impl_(backend::impl_of(eng).create_stream()) {}
void stream::wait() {
  impl_->wait();
}
bool stream::reset_profiling() {
  return impl_->reset_profiling();
}
std::optional<std::int64_t> stream::profiled_ns() {
  return impl_->profiled_ns();
}
void stream::stop_profiling() {
  impl_->stop_profiling();
}

}  // namespace primcache
