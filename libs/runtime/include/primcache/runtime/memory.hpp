// primcache/runtime/memory.hpp — memory objects: a descriptor plus a buffer
// on an engine.
//
//   using tag = primcache::memory::format_tag;
//   using dt = primcache::memory::data_type;
//   primcache::memory::desc md({64, 128}, dt::f32, tag::ab);
//   primcache::memory src(md, eng);                 // allocates (64-byte aligned)
//   primcache::memory view(md, eng, user_ptr);      // wraps the caller's buffer
//   float* p = static_cast<float*>(src.get_data_handle());
//
// memory is a handle: copies share one buffer, held in the engine's backend
// storage (backend/memory_storage.hpp). A buffer the memory allocated lives
// until the last copy goes; a wrapped buffer belongs to the caller, who
// keeps it alive while the memory is used.
//
// Each memory object has an id (get_id): process-unique, never reused,
// increasing, and replaced by a fresh one whenever the data handle changes
// (set_data_handle). Copies share it. It is the identity of the data for
// the constant tensor cache (primitive_attr::set_constant_weights): a raw
// pointer is not, since a freed buffer's address comes back from the next
// allocation.
//
// Thread-safety: concurrent reads are safe; set_data_handle must not race
// with executions that use the memory. Exceptions: primcache::error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/runtime/engine.hpp"
#include "primcache/tensor/data_type.hpp"
#include "primcache/tensor/format_tag.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace primcache {

class memory;
namespace backend {
class memory_storage;
// The backend storage of `m` (nullptr when empty): what kernels receive.
PRIMCACHE_API const memory_storage* storage_of(const memory& m) noexcept;
// Runs `action` once the data `m` holds now stops being its data: at
// set_data_handle, or when the last copy of the memory object goes — when
// its id (memory::get_id) dies. For backends that key caches by the id, so
// that an entry no one can look up again is dropped. Of the actions given
// the same `token` for the same data, only the first is kept. Actions run
// on the thread that releases the data and must not throw. Throws
// invalid_arguments for an empty memory.
PRIMCACHE_API void on_data_release(const memory& m, std::string_view token,
                                   std::function<void()> action);
}  // namespace backend

class PRIMCACHE_API memory {
 public:
  using desc = memory_desc;
  using data_type = primcache::data_type;
  using format_tag = primcache::format_tag;
  using dims = std::vector<std::int64_t>;

  memory() = default;  // empty: an absent argument
  memory(const desc& md, const engine& eng);
  memory(const desc& md, const engine& eng, void* handle);

  const desc& get_desc() const;
  const engine& get_engine() const;
  // The backend handle: a host pointer on the CPU, a device buffer on a GPU.
  void* get_data_handle() const;
  // Replaces the buffer by the caller's (which the caller keeps alive); a
  // buffer the memory allocated is freed. Gives the memory a new id.
  void set_data_handle(void* handle);
  // The identity of this memory's data (see above); never 0.
  std::uint64_t get_id() const;
  // Host access to the data wherever it lives: map_data returns a pointer
  // the host may read and write until unmap_data (for host memory, the
  // buffer itself).
  void* map_data() const;
  void unmap_data(void* mapped) const;
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  friend const backend::memory_storage* backend::storage_of(const memory& m) noexcept;
  friend void backend::on_data_release(const memory& m, std::string_view token,
                                       std::function<void()> action);
  struct state;
  std::shared_ptr<state> state_;
};

}  // namespace primcache
