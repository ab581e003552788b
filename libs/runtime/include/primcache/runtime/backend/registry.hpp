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
// Configurations come from the config source when one is set (the tuning
// library fills it from tune tables), else from each implementation's
// heuristic:
//
//   primcache::backend::set_config_source(
//       [&](const primcache::backend::primitive_desc_impl& pd)
//           -> std::optional<primcache::backend::kernel_config> {
//         return table.find(pd.problem_key());    // nullopt: the heuristic
//       });
//
// Thread-safety: registration, lookup and set_config_source may run
// concurrently; the source itself is called with no registry lock held, from
// any thread creating a primitive descriptor.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/base/result.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"
#include "primcache/runtime/backend/kernel_config.hpp"
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

// `count` says how many devices the backend lists (it should not throw:
// engine::get_count returns it). `create` makes device `index`; it is also
// called when count() is 0, so that a backend can throw why it has no
// device (what it returns then is dropped, and the index is out of range).
using engine_count_fn = std::size_t (*)();
using engine_factory_fn = std::shared_ptr<const engine_impl> (*)(std::size_t index);
PRIMCACHE_API void register_engine_factory(engine_kind kind, engine_count_fn count,
                                           engine_factory_fn create);

// Where primitive descriptors with configurations get theirs: given the
// descriptor (its problem_key(), kind(), name() and validate_config()), a
// configuration, or nullopt for the implementation's heuristic.
using config_source = std::function<std::optional<kernel_config>(const primitive_desc_impl& pd)>;
// Sets the source (an empty function removes it). Primitive descriptors
// created before are not found again by later creations: those ask the new
// source. Primitives already made keep their code.
PRIMCACHE_API void set_config_source(config_source source);
// What the source says for `pd`: its configuration when it gives one that
// pd.validate_config() accepts; nullopt when there is no source, it gives
// none, it throws, or it gives one the descriptor refuses (the last two are
// reported in PRIMCACHE_VERBOSE output). primitive_desc_impl::finalize
// calls it.
PRIMCACHE_API std::optional<kernel_config> config_from_source(const primitive_desc_impl& pd);

// Creates the primitive descriptor for `op` on `eng`: the first accepting
// implementation's. Throws primcache::error.
PRIMCACHE_API std::shared_ptr<const primitive_desc_impl> create_primitive_desc(
    const op_desc& op, const primitive_attr& attr, const engine& eng);

}  // namespace primcache::backend
