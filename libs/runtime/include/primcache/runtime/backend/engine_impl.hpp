// primcache/runtime/backend/engine_impl.hpp — what a backend implements to
// provide engines of one kind.
//
//   class cpu_engine final : public primcache::backend::engine_impl { ... };
//   primcache::backend::register_engine_factory(
//       primcache::engine_kind::cpu, [] { return std::size_t{1}; },
//       [](std::size_t index) { return std::make_shared<const cpu_engine>(index); });
//
// Thread-safety: engine_impl objects are immutable after construction and
// shared by every copy of an engine handle.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "primcache/base/export.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/backend/memory_storage.hpp"
#include "primcache/runtime/engine.hpp"

namespace primcache::backend {

class PRIMCACHE_API engine_impl {
 public:
  engine_impl(engine_kind kind, std::size_t index) : kind_(kind), index_(index) {}
  virtual ~engine_impl();

  engine_kind kind() const noexcept { return kind_; }
  std::size_t index() const noexcept { return index_; }

  // Writes what makes code compiled for this device differ from code for
  // another: the runtime kind and the device identity (CPU: the ISA in use;
  // OpenCL: platform, device and driver). Never pointers.
  virtual void write_identity(key_writer& w) const = 0;
  // A short description for verbose logs ("cpu:avx512_core").
  virtual std::string describe() const = 0;

  // Host buffers (64-byte aligned) for memory objects on this engine.
  virtual void* allocate(std::size_t bytes) const = 0;
  virtual void deallocate(void* p) const noexcept = 0;

  // The storage of a memory object of `bytes` bytes: allocated (and freed
  // with the storage), or wrapping the caller's `handle` (which may be null:
  // a memory without a buffer yet). Default: host memory from
  // allocate()/deallocate().
  virtual std::unique_ptr<memory_storage> allocate_storage(std::size_t bytes) const;
  virtual std::unique_ptr<memory_storage> wrap_storage(std::size_t bytes, void* handle) const;
  // The backend part of a stream. Default: synchronous (kernels finish
  // before execute returns; wait() returns at once).
  virtual std::unique_ptr<stream_impl> create_stream() const;

 private:
  engine_kind kind_;
  std::size_t index_;
};

}  // namespace primcache::backend
