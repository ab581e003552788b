// primcache/const_cache/constant_buffer.hpp — a constant tensor's memory: a
// block of `size` bytes obtained from a backend's allocate function and
// returned to its free function when the last holder lets go.
//
// The constant tensor cache keeps buffers behind std::shared_ptr, so a buffer
// handed out stays valid for its holder even if the cache evicts it
// meanwhile. Backends pass their own allocate/free (host memory on a CPU, a
// device buffer on a GPU, where data() is the backend's handle); they may
// also derive from constant_buffer to carry more state.
//
//   auto buf = primcache::make_constant_buffer(
//       bytes, [](std::size_t n) { return std::malloc(n); },
//       [](void* p, std::size_t) { std::free(p); });
//   pack_weights(weights, buf->data_as<float>());
//
// Thread-safety: an immutable object once filled; data() and size() may be
// read from any thread. Whoever creates a buffer fills it before handing it
// to the cache (or to anyone else). Exceptions: the constructor throws
// error(invalid_arguments) for missing functions and error(out_of_memory)
// when allocate returns null for a non-zero size; what allocate throws passes
// through. free must not throw (it runs from the destructor).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "primcache/base/export.hpp"

namespace primcache {

class PRIMCACHE_API constant_buffer {
 public:
  using allocate_function = std::function<void*(std::size_t size)>;
  using free_function = std::function<void(void* data, std::size_t size)>;

  // Allocates `size` bytes with `allocate`; `free` gets them back.
  constant_buffer(std::size_t size, allocate_function allocate, free_function free);
  virtual ~constant_buffer();

  constant_buffer(const constant_buffer&) = delete;
  constant_buffer& operator=(const constant_buffer&) = delete;
  constant_buffer(constant_buffer&&) = delete;
  constant_buffer& operator=(constant_buffer&&) = delete;

  // The memory (or the backend's handle to it). Null only for size 0 when
  // allocate returned null.
  void* data() const noexcept { return data_; }
  template <typename T>
  T* data_as() const noexcept {
    return static_cast<T*>(data_);
  }
  std::size_t size() const noexcept { return size_; }

 private:
  std::size_t size_;
  free_function free_;
  void* data_;
};

// std::make_shared<constant_buffer>(size, allocate, free).
PRIMCACHE_API std::shared_ptr<constant_buffer> make_constant_buffer(
    std::size_t size, constant_buffer::allocate_function allocate,
    constant_buffer::free_function free);

}  // namespace primcache
