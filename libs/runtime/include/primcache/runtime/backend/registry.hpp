// primcache/runtime/backend/registry.hpp — where backends register engine
// factories and primitive implementations.
//
// A backend registers from a static initializer of its shared library, so
// linking it is all a user does:
//
//   static const bool registered = [] {
//     primcache::backend::register_implementation(
//         {"jit:matmul", primcache::engine_kind::cpu,
//          primcache::backend::primitive_kind::matmul, /*priority=*/100,
//          &make_jit_matmul_pd});
//     return true;
//   }();
//
// Implementations of one (engine kind, primitive kind) are tried in order of
// decreasing priority; the first whose factory returns a descriptor wins.
// A factory declines with status::unimplemented (the next one is tried) and
// rejects malformed input with status::invalid_arguments (creation fails at
// once with that message).
//
// Thread-safety: registration and lookup may run concurrently.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/base/result.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"
#include "primcache/runtime/backend/op_desc.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"

namespace primcache::backend {

using pd_factory = result<std::shared_ptr<const primitive_desc_impl>> (*)(
    const op_desc& op, const primitive_attr& attr, const engine_impl& eng);

struct implementation_entry {
  const char* name;  // stable: it is part of every key this impl makes
  engine_kind engine;
  primitive_kind kind;
  int priority;
  pd_factory create;
};

PRIMCACHE_API void register_implementation(const implementation_entry& entry);

using engine_count_fn = std::size_t (*)();
using engine_factory_fn = std::shared_ptr<const engine_impl> (*)(std::size_t index);
PRIMCACHE_API void register_engine_factory(engine_kind kind, engine_count_fn count,
                                           engine_factory_fn create);

// Creates the primitive descriptor for `op` on `eng`: the first accepting
// implementation's. Throws primcache::error.
PRIMCACHE_API std::shared_ptr<const primitive_desc_impl> create_primitive_desc(
    const op_desc& op, const primitive_attr& attr, const engine& eng);

}  // namespace primcache::backend
