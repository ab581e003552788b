// The persistent cache's hook in the creation path (primitive.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "primcache/runtime/backend/primitive_impl.hpp"

namespace primcache::runtime_internal {

// What the persistent cache did for one creation.
enum class persistent_outcome {
  none,  // no store attached
  hit,   // loaded from the store: nothing compiled
  // The store had nothing usable: compiled, the write queued — unless a
  // blob failed to load for a reason outside it (out of memory, a driver
  // failure): then its entry is kept and nothing is written over it.
  miss,
};

struct persistent_created {
  std::shared_ptr<const backend::primitive_impl> impl;
  persistent_outcome outcome = persistent_outcome::none;
};

// Creates pd's impl on a primitive-cache miss: from the attached store when
// it holds a blob that loads, else by compiling (and queueing the write). A
// blob that fails to load is erased only when the failure's status says
// the blob is bad (persistent_cache.hpp). Throws what create_impl throws.
persistent_created create_through_persistent_cache(const backend::primitive_desc_impl& pd,
                                                   const engine& eng);

// primitive_desc::cache_blob_id() of pd.
std::vector<std::uint8_t> cache_blob_id_of(const backend::primitive_desc_impl& pd);

}  // namespace primcache::runtime_internal
