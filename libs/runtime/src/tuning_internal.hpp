// The runtime's tune mode, as primitive.cpp and registry.cpp call it
// (tuning.cpp; the public side is primcache/runtime/tuning.hpp).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/attr.hpp"
#include "primcache/runtime/backend/kernel_config.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/primitive.hpp"

namespace primcache::runtime_internal {

// Whether an execution of a primitive with these attributes should tune it
// (its `tunable`, else the switch). One atomic load on the execute path.
bool tuning_wanted(const primitive_attr& attr);

// Tunes the primitive of `pd` (see tuning.hpp). Never throws: a failure is
// reported on stderr and counted.
void tune_on_first_execute(const primitive_desc& pd, const stream& strm) noexcept;

// The tune table's configuration for `pd` on `eng` when the table has one
// for its implementation that the descriptor validates; else nullopt (a
// refused entry is reported in verbose output). Called by finalize() when
// the config source gives none.
std::optional<backend::kernel_config> tuned_config(const backend::primitive_desc_impl& pd,
                                                   const backend::engine_impl& eng);

// The implementation the tune table chose for `pd`'s problem on `eng` when
// it is another than pd's own (a cross-implementation winner), else
// nullopt. The registry then asks that implementation instead.
std::optional<std::string> tuned_implementation(const backend::primitive_desc_impl& pd,
                                                const backend::engine_impl& eng);

// The descriptors the other registered implementations of `pd`'s engine
// and primitive kind make for the op `pd` was made from (registry.cpp):
// those that accept it with the same arguments and have configurations,
// the candidates a tuning may also measure. Empty when the registry did not
// make `pd` (or its kind is not tuned).
std::vector<std::shared_ptr<const backend::primitive_desc_impl>> alternative_descs(
    const backend::primitive_desc_impl& pd, const engine& eng);

// While this thread builds tuning candidates: the private cache their
// nested impls are created in instead of the global primitive cache (and
// the persistent cache). nullptr otherwise.
using private_impl_cache = std::unordered_map<key, std::shared_ptr<const backend::primitive_impl>>;
private_impl_cache* tuning_private_cache() noexcept;

// Cached primitive descriptors are never found again (registry.cpp): the
// next creation of each asks the implementations, and so the tune table.
void invalidate_primitive_descs() noexcept;

}  // namespace primcache::runtime_internal
