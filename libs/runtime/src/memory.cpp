#include "primcache/runtime/memory.hpp"

#include "primcache/base/error.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"
#include "primcache/runtime/stream.hpp"

namespace primcache {

struct memory::state {
  state(const desc& d, const engine& e, void* h, bool o) : md(d), eng(e), handle(h), owned(o) {}
  state(const state&) = delete;
  state& operator=(const state&) = delete;
  ~state() {
    if (owned) eng.impl().deallocate(handle);
  }
  desc md;
  engine eng;
  void* handle;
  bool owned;  // allocated by the memory, freed with the last copy
};

namespace {
void check_desc(const memory::desc& md) {
  if (md.is_any()) {
    throw error(status::invalid_arguments,
                "memory needs a concrete layout; " + md.to_string() +
                    " is format any (take the layout from the primitive descriptor)");
  }
}
}  // namespace

memory::memory(const desc& md, const engine& eng) {
  check_desc(md);
  const std::size_t bytes = md.size_bytes();
  void* p = bytes == 0 ? nullptr : eng.impl().allocate(bytes);
  state_ = std::make_shared<state>(md, eng, p, true);
}

memory::memory(const desc& md, const engine& eng, void* handle) {
  check_desc(md);
  state_ = std::make_shared<state>(md, eng, handle, false);
}

namespace {
[[noreturn]] void empty_memory() {
  throw error(status::invalid_arguments, "the memory object is empty");
}
}  // namespace

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
  return state_->handle;
}
void memory::set_data_handle(void* handle) {
  if (!state_) empty_memory();
  if (state_->owned) {
    state_->eng.impl().deallocate(state_->handle);
    state_->owned = false;
  }
  state_->handle = handle;
}

stream::stream(const engine& eng) : engine_(eng) {}
void stream::wait() {}

}  // namespace primcache
