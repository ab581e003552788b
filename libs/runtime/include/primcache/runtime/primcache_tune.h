/* primcache/runtime/primcache_tune.h — the C API of tune mode (tuning.hpp):
 * the global switch, the `tunable` attribute, the candidates measured per
 * primitive, and saving the process's tune table.
 *
 *   pc_set_tune(1);                  (or PRIMCACHE_TUNE=1)
 *   pc_primitive_execute(prim, ...); (the first execution tunes)
 *   pc_set_tune(0);
 *   if (pc_save_tune_table("tune.json") != pc_success)
 *     fprintf(stderr, "%s\n", pc_last_error_message());
 *
 * Errors are statuses: pc_invalid_arguments for a NULL output pointer, a
 * max_nconfigs outside 1..1000, or pc_save_tune_table(NULL) without
 * PRIMCACHE_TUNE_TABLE; pc_runtime_error when the file cannot be written.
 *
 * Thread-safety: as the C++ API. */
#ifndef PRIMCACHE_RUNTIME_PRIMCACHE_TUNE_H
#define PRIMCACHE_RUNTIME_PRIMCACHE_TUNE_H

#include <stddef.h>

#include "primcache/runtime/primcache.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tune: 0 off, anything else on. */
PC_API pc_status_t pc_set_tune(int tune);
PC_API pc_status_t pc_get_tune(int* tune);
PC_API pc_status_t pc_set_tune_max_nconfigs(size_t n);
/* The primitive attribute `tunable` (primitive_attr::set_tunable): 0 off,
 * anything else on; an attribute never set follows the switch. */
PC_API pc_status_t pc_primitive_attr_set_tunable(pc_primitive_attr_t attr, int tunable);
/* path NULL or "": PRIMCACHE_TUNE_TABLE's. *entries (may be NULL) gets the
 * number of entries written. */
PC_API pc_status_t pc_save_tune_table(const char* path, size_t* entries);

#ifdef __cplusplus
}
#endif

#endif /* PRIMCACHE_RUNTIME_PRIMCACHE_TUNE_H */
