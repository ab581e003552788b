/* primcache/runtime/primcache_persistent.h — the C API of the built-in
 * persistent kernel cache (persistent_cache.hpp): attach a directory that
 * primitive-cache misses read before compiling and fresh compilations are
 * written to in the background; detach it; wait for the writes.
 *
 *   if (pc_set_persistent_cache_dir("/var/cache/primcache", 1024) != pc_success)
 *     fprintf(stderr, "%s\n", pc_last_error_message());
 *   ... create primitives ...
 *   pc_flush_persistent_cache();
 *   pc_detach_persistent_cache();
 *
 * Included by primcache.h. Thread-safety: as the C++ API. */
#ifndef PRIMCACHE_RUNTIME_PRIMCACHE_PERSISTENT_H
#define PRIMCACHE_RUNTIME_PRIMCACHE_PERSISTENT_H

#include <stdint.h>

#include "primcache/runtime/primcache.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens `dir` as a directory store of capacity_mb MB (creating it with mode
 * 0700 if missing; the fleet key and read-only mode from the environment, as
 * PRIMCACHE_PERSISTENT_CACHE_DIR would) and attaches it, replacing any
 * attached store. Returns invalid_arguments for a NULL or empty dir, a
 * negative capacity, or a path that names something other than a directory;
 * permission_denied for a directory group or others can write or another
 * user owns; runtime_error when it cannot be created or opened; the fleet
 * key's status (not_found for a missing file, permission_denied,
 * invalid_arguments, runtime_error) when PRIMCACHE_PERSISTENT_CACHE_KEY_FILE
 * is set but unusable (in these cases the previous store stays attached);
 * already_exists when another cache is registered in control as
 * "persistent" (then no store is attached). */
PC_API pc_status_t pc_set_persistent_cache_dir(const char* dir, int64_t capacity_mb);
/* Detaches the store (after finishing its queued writes); success when none
 * was attached. */
PC_API pc_status_t pc_detach_persistent_cache(void);
/* Returns once every queued write has been done. */
PC_API pc_status_t pc_flush_persistent_cache(void);

#ifdef __cplusplus
}
#endif

#endif
