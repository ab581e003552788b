// primcache/runtime/engine.hpp — engines: where primitives run.
//
// An engine names a device of one kind (cpu, gpu) by index. Engines are
// cheap handles: every handle made for one (kind, index) shares one device
// object and compares equal, so memory, streams and primitives made from
// separately constructed handles of one device work together. Memory and
// streams of another engine are refused by primitive::execute. The runtime itself knows no
// device: backends register engine factories (linking primcache::cpu is what
// makes engine(engine_kind::cpu) work).
//
//   primcache::engine cpu(primcache::engine_kind::cpu, 0);
//   std::size_t n = primcache::engine::get_count(primcache::engine_kind::gpu);
//
// Thread-safety: engines are immutable; use them from any thread.
// Exceptions: the constructor throws primcache::error (invalid_arguments for
// an index out of range, unimplemented when no backend serves the kind).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>

#include "primcache/base/export.hpp"

namespace primcache {

enum class engine_kind : int { cpu = 1, gpu = 2 };
PRIMCACHE_API std::string_view to_string(engine_kind kind) noexcept;

class engine;
namespace backend {
class engine_impl;
// An engine for a device object a backend made itself, outside the
// registry's (kind, index) devices: interop engines wrapping a user's
// context. Such an engine equals only its own copies.
PRIMCACHE_API engine wrap_engine(std::shared_ptr<const engine_impl> impl);
// The backend's device object behind an engine.
const engine_impl& impl_of(const engine& eng) noexcept;
}  // namespace backend

class PRIMCACHE_API engine {
 public:
  using kind = engine_kind;
  engine(engine_kind kind, std::size_t index);

  engine_kind get_kind() const noexcept;
  std::size_t get_index() const noexcept;
  // How many devices of this kind the registered backends see (0 if none).
  static std::size_t get_count(engine_kind kind);

  friend bool operator==(const engine& a, const engine& b) noexcept { return a.impl_ == b.impl_; }

 private:
  friend engine backend::wrap_engine(std::shared_ptr<const backend::engine_impl>);
  friend const backend::engine_impl& backend::impl_of(const engine&) noexcept;
  explicit engine(std::shared_ptr<const backend::engine_impl> impl) noexcept
      : impl_(std::move(impl)) {}
  std::shared_ptr<const backend::engine_impl> impl_;
};

inline const backend::engine_impl& backend::impl_of(const engine& eng) noexcept {
  return *eng.impl_;
}

}  // namespace primcache
