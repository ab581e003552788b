/* primcache/runtime/primcache_constant.h — the C API of the constant tensor
 * cache (constant_cache.hpp): a capacity in MB per engine kind, the old
 * on/off switch, and a preview of what a capacity would drop.
 *
 *   if (pc_set_constant_tensor_cache_capacity(pc_engine_cpu, 1024) != pc_success)
 *     fprintf(stderr, "%s\n", pc_last_error_message());
 *   int64_t mb;
 *   pc_get_constant_tensor_cache_capacity(pc_engine_gpu, &mb);
 *   pc_set_constant_tensor_cache(0);   (the old switch: every kind to 0)
 *
 * The RFC's rules: the default is unlimited (PC_CONSTANT_TENSOR_CACHE_UNLIMITED);
 * the first explicit setting of a kind and any decrease flush that kind's
 * caches; an increase keeps them; 0 flushes and disables.
 * PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY is read once, before any setting.
 * Errors are statuses (never a crash): pc_invalid_arguments for a negative
 * or too large capacity, a negative flag, an engine kind that is not
 * pc_engine_cpu or pc_engine_gpu, or a NULL output pointer.
 *
 * Included by primcache.h. Thread-safety: as the C++ API. */
#ifndef PRIMCACHE_RUNTIME_PRIMCACHE_CONSTANT_H
#define PRIMCACHE_RUNTIME_PRIMCACHE_CONSTANT_H

#include <stdint.h>

#include "primcache/runtime/primcache.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The capacity of a kind without a limit (INT64_MAX). */
#define PC_CONSTANT_TENSOR_CACHE_UNLIMITED INT64_MAX

PC_API pc_status_t pc_set_constant_tensor_cache_capacity(pc_engine_kind_t kind,
                                                         int64_t capacity_mb);
PC_API pc_status_t pc_get_constant_tensor_cache_capacity(pc_engine_kind_t kind,
                                                         int64_t* capacity_mb);
/* What pc_set_constant_tensor_cache_capacity(kind, capacity_mb) would drop
 * now, summed over the kind's devices: *flushes 1 when it would empty a
 * cache, *tensors and *bytes what would go. Changes nothing. */
PC_API pc_status_t pc_preview_constant_tensor_cache_capacity(pc_engine_kind_t kind,
                                                             int64_t capacity_mb, int* flushes,
                                                             int64_t* tensors, int64_t* bytes);
/* flag > 0: every kind to the default (unlimited); 0: every kind to 0. */
PC_API pc_status_t pc_set_constant_tensor_cache(int flag);
/* *flag = 1 when any kind's capacity is not 0, else 0. */
PC_API pc_status_t pc_get_constant_tensor_cache(int* flag);

#ifdef __cplusplus
}
#endif

#endif
