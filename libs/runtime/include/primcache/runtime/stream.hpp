// primcache/runtime/stream.hpp — streams: the queue primitives execute on.
//
//   primcache::stream s(eng);
//   prim.execute(s, args);
//   s.wait();
//
// CPU streams execute in order and synchronously: execute() returns when the
// work is done and wait() returns at once. Thread-safety: a stream may be
// used from several threads; executions from different threads are not
// ordered relative to each other. Exceptions: primcache::error.
#pragma once

#include <memory>

#include "primcache/base/export.hpp"
#include "primcache/runtime/engine.hpp"

namespace primcache {

class PRIMCACHE_API stream {
 public:
  explicit stream(const engine& eng);
  const engine& get_engine() const noexcept { return engine_; }
  void wait();

 private:
  engine engine_;
};

}  // namespace primcache
