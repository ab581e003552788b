// primcache/runtime/backend/verbose.hpp — PRIMCACHE_VERBOSE for backends:
// lines about work the runtime does not see (a background compilation
// finishing), in the runtime's format ("primcache_verbose,<event>,...").
//
//   if (primcache::backend::verbose_level() >= 1)
//     primcache::backend::verbose_print("primcache_verbose,specialized,matmul,...");
//
// Thread-safety: both may be called from any thread; a line is written
// whole. Exceptions: none.
#pragma once

#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache::backend {

// PRIMCACHE_VERBOSE, read once: 0 off, 1 creations, 2 also executions.
PRIMCACHE_API int verbose_level() noexcept;
// Writes one line to stdout and flushes it.
PRIMCACHE_API void verbose_print(std::string_view line) noexcept;

}  // namespace primcache::backend
