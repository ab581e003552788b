/* primcache/runtime/primcache.h — the runtime's C API.
 *
 * Mirrors the C++ API (runtime.hpp) with pc_ names. Every function returns a
 * pc_status_t; no exception crosses this boundary. On failure,
 * pc_last_error_message() gives this thread's last message until its next
 * failing call. Handles are opaque; each *_create has a *_destroy.
 *
 *   pc_engine_t eng;
 *   pc_engine_create(&eng, pc_engine_cpu, 0);
 *   int64_t dims[2] = {64, 64};
 *   pc_memory_desc_t md;
 *   pc_memory_desc_create_with_tag(&md, 2, dims, pc_f32, pc_tag_ab);
 *   pc_primitive_desc_t pd;
 *   pc_matmul_primitive_desc_create(&pd, eng, md, md, NULL, md, NULL);
 *   pc_primitive_t prim;
 *   pc_primitive_create(&prim, pd);
 *   pc_exec_arg_t args[3] = {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, b},
 *                            {PRIMCACHE_ARG_DST, c}};
 *   pc_primitive_execute(prim, strm, 3, args);
 *
 * Thread-safety: as the C++ API. */
#ifndef PRIMCACHE_RUNTIME_PRIMCACHE_H
#define PRIMCACHE_RUNTIME_PRIMCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "primcache/runtime/args.h"

#if defined(__GNUC__) || defined(__clang__)
#define PC_API __attribute__((visibility("default")))
#else
#define PC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Values match primcache::status. */
typedef enum {
  pc_success = 0,
  pc_invalid_arguments = 1,
  pc_unimplemented = 2,
  pc_out_of_memory = 3,
  pc_not_found = 4,
  pc_already_exists = 5,
  pc_corrupt_data = 6,
  pc_permission_denied = 7,
  pc_runtime_error = 8,
  pc_status_max = 0x7fffffff,
} pc_status_t;

/* Each enum ends in a _max value so that, in C++ too, any int a C caller
 * passes is a valid value of the type: the API checks and rejects the values
 * it does not know rather than relying on the caller. */
typedef enum {
  pc_engine_cpu = 1,
  pc_engine_gpu = 2,
  pc_engine_kind_max = 0x7fffffff
} pc_engine_kind_t;
/* Values match primcache::data_type. */
typedef enum {
  pc_f32 = 1,
  pc_f16 = 2,
  pc_bf16 = 3,
  pc_s8 = 4,
  pc_u8 = 5,
  pc_s32 = 6,
  pc_data_type_max = 0x7fffffff
} pc_data_type_t;
typedef enum {
  pc_tag_any = 0,
  pc_tag_a,
  pc_tag_ab,
  pc_tag_ba,
  pc_tag_abc,
  pc_tag_acb,
  pc_tag_nchw,
  pc_tag_nhwc,
  pc_tag_nChw8c,
  pc_tag_nChw16c,
  pc_tag_oihw,
  pc_tag_hwio,
  pc_tag_goihw,
  pc_format_tag_max = 0x7fffffff,
} pc_format_tag_t;
/* Values match primcache::algorithm. */
typedef enum {
  pc_eltwise_relu = 1,
  pc_eltwise_gelu_erf,
  pc_eltwise_gelu_tanh,
  pc_eltwise_tanh,
  pc_eltwise_logistic,
  pc_eltwise_exp,
  pc_eltwise_linear,
  pc_eltwise_clip,
  pc_binary_add,
  pc_convolution_direct,
  pc_convolution_auto, /* the library picks the method */
  pc_algorithm_max = 0x7fffffff,
} pc_algorithm_t;

typedef struct pc_engine* pc_engine_t;
typedef struct pc_stream* pc_stream_t;
typedef struct pc_memory_desc* pc_memory_desc_t;
typedef const struct pc_memory_desc* const_pc_memory_desc_t;
typedef struct pc_memory* pc_memory_t;
typedef const struct pc_memory* const_pc_memory_t;
typedef struct pc_primitive_attr* pc_primitive_attr_t;
typedef const struct pc_primitive_attr* const_pc_primitive_attr_t;
typedef struct pc_primitive_desc* pc_primitive_desc_t;
typedef const struct pc_primitive_desc* const_pc_primitive_desc_t;
typedef struct pc_primitive* pc_primitive_t;

typedef struct {
  int arg;
  pc_memory_t memory;
} pc_exec_arg_t;

/* Pass as the handle to make pc_memory_create allocate the buffer (only
 * there). */
#define PC_MEMORY_ALLOCATE ((void*)(intptr_t)-1)

PC_API const char* pc_last_error_message(void);

/* The library version ("0.1.0"), the LLVM version its CPU kernels are
 * compiled with, and the build identity (see primcache/runtime/version.hpp).
 * The strings live for the whole process. Any pointer may be NULL. */
PC_API void pc_get_version(int* major, int* minor, int* patch, const char** version,
                           const char** llvm, const char** build_identity);

PC_API pc_status_t pc_engine_create(pc_engine_t* engine, pc_engine_kind_t kind, size_t index);
PC_API pc_status_t pc_engine_get_count(size_t* count, pc_engine_kind_t kind);
PC_API pc_status_t pc_engine_destroy(pc_engine_t engine);

PC_API pc_status_t pc_stream_create(pc_stream_t* stream, pc_engine_t engine);
PC_API pc_status_t pc_stream_wait(pc_stream_t stream);
PC_API pc_status_t pc_stream_destroy(pc_stream_t stream);

PC_API pc_status_t pc_memory_desc_create_with_tag(pc_memory_desc_t* md, int ndims,
                                                  const int64_t* dims, pc_data_type_t dt,
                                                  pc_format_tag_t tag);
PC_API pc_status_t pc_memory_desc_create_with_strides(pc_memory_desc_t* md, int ndims,
                                                      const int64_t* dims, pc_data_type_t dt,
                                                      const int64_t* strides);
PC_API pc_status_t pc_memory_desc_get_size(size_t* bytes, const_pc_memory_desc_t md);
PC_API pc_status_t pc_memory_desc_equal(int* equal, const_pc_memory_desc_t a,
                                        const_pc_memory_desc_t b);
PC_API pc_status_t pc_memory_desc_destroy(pc_memory_desc_t md);

PC_API pc_status_t pc_memory_create(pc_memory_t* memory, const_pc_memory_desc_t md,
                                    pc_engine_t engine, void* handle);
PC_API pc_status_t pc_memory_get_data_handle(pc_memory_t memory, void** handle);
/* handle: the caller's buffer (or NULL, which an execution refuses);
 * PC_MEMORY_ALLOCATE is pc_invalid_arguments here. */
PC_API pc_status_t pc_memory_set_data_handle(pc_memory_t memory, void* handle);
/* The memory's id: unique in the process, shared by nothing else, renewed by
 * every pc_memory_set_data_handle (even to the same pointer). Constant
 * weights are known by it (pc_primitive_attr_set_constant_weights). */
PC_API pc_status_t pc_memory_get_id(const_pc_memory_t memory, uint64_t* id);
PC_API pc_status_t pc_memory_destroy(pc_memory_t memory);

PC_API pc_status_t pc_primitive_attr_create(pc_primitive_attr_t* attr);
PC_API pc_status_t pc_primitive_attr_append_eltwise(pc_primitive_attr_t attr, float scale,
                                                    pc_algorithm_t alg, float alpha, float beta);
PC_API pc_status_t pc_primitive_attr_append_binary(pc_primitive_attr_t attr, pc_algorithm_t alg,
                                                   const_pc_memory_desc_t src1);
PC_API pc_status_t pc_primitive_attr_set_output_scales(pc_primitive_attr_t attr, int64_t count,
                                                       int mask, const float* scales);
/* Nonzero: the weights passed to primitives made with attr do not change
 * while their memory keeps its id, so their packed form may be kept in the
 * engine kind's constant tensor cache (primcache_constant.h). */
PC_API pc_status_t pc_primitive_attr_set_constant_weights(pc_primitive_attr_t attr, int constant);
PC_API pc_status_t pc_primitive_attr_get_constant_weights(const_pc_primitive_attr_t attr,
                                                          int* constant);
PC_API pc_status_t pc_primitive_attr_destroy(pc_primitive_attr_t attr);

/* attr and bias may be NULL. */
PC_API pc_status_t pc_matmul_primitive_desc_create(pc_primitive_desc_t* pd, pc_engine_t engine,
                                                   const_pc_memory_desc_t src,
                                                   const_pc_memory_desc_t weights,
                                                   const_pc_memory_desc_t bias,
                                                   const_pc_memory_desc_t dst,
                                                   const_pc_primitive_attr_t attr);
/* strides, dilates (may be NULL: dense), padding_l, padding_r: 2 values each. */
PC_API pc_status_t pc_convolution_forward_primitive_desc_create(
    pc_primitive_desc_t* pd, pc_engine_t engine, pc_algorithm_t alg, const_pc_memory_desc_t src,
    const_pc_memory_desc_t weights, const_pc_memory_desc_t bias, const_pc_memory_desc_t dst,
    const int64_t* strides, const int64_t* dilates, const int64_t* padding_l,
    const int64_t* padding_r, const_pc_primitive_attr_t attr);
PC_API pc_status_t pc_eltwise_forward_primitive_desc_create(
    pc_primitive_desc_t* pd, pc_engine_t engine, pc_algorithm_t alg, const_pc_memory_desc_t src,
    const_pc_memory_desc_t dst, float alpha, float beta, const_pc_primitive_attr_t attr);
PC_API pc_status_t pc_reorder_primitive_desc_create(
    pc_primitive_desc_t* pd, const_pc_memory_desc_t src, pc_engine_t src_engine,
    const_pc_memory_desc_t dst, pc_engine_t dst_engine, const_pc_primitive_attr_t attr);
/* The resolved descriptor of an argument (PRIMCACHE_ARG_*); the caller
 * destroys it. */
PC_API pc_status_t pc_primitive_desc_query_md(pc_memory_desc_t* md, const_pc_primitive_desc_t pd,
                                              int arg);
PC_API pc_status_t pc_primitive_desc_destroy(pc_primitive_desc_t pd);
/* The cache blob id (primitive_desc::cache_blob_id). With id NULL, *size
 * receives its length; otherwise *size must be at least that length and the
 * id is written to id (invalid_arguments when the buffer is too small). */
PC_API pc_status_t pc_primitive_desc_get_cache_blob_id(const_pc_primitive_desc_t pd, size_t* size,
                                                       uint8_t* id);

PC_API pc_status_t pc_primitive_create(pc_primitive_t* primitive, const_pc_primitive_desc_t pd);
PC_API pc_status_t pc_primitive_execute(pc_primitive_t primitive, pc_stream_t stream, int nargs,
                                        const pc_exec_arg_t* args);
PC_API pc_status_t pc_primitive_destroy(pc_primitive_t primitive);
/* The primitive's cache blob (primitive::cache_blob), sized like
 * pc_primitive_desc_get_cache_blob_id: blob NULL asks for the length. */
PC_API pc_status_t pc_primitive_get_cache_blob(pc_primitive_t primitive, size_t* size,
                                               uint8_t* blob);
/* A primitive from a cache blob, through the primitive cache: a hit ignores
 * the blob, a miss loads it without compiling. A damaged blob is
 * corrupt_data, another descriptor's invalid_arguments, another format
 * version or an ISA above the cap unimplemented; nothing is loaded. */
PC_API pc_status_t pc_primitive_create_from_cache_blob(pc_primitive_t* primitive,
                                                       const_pc_primitive_desc_t pd, size_t size,
                                                       const uint8_t* blob);

/* Tiered creation (primcache/runtime/jit_mode.hpp): returns when the
 * primitive runs its specialized code (at once for one compiled
 * synchronously), or when its compilation failed. *specialized (if not NULL)
 * receives 1 when the specialized code is installed, else 0. */
PC_API pc_status_t pc_primitive_wait_until_specialized(pc_primitive_t primitive, int* specialized);

/* The JIT mode: pc_jit_mode_tiered (a primitive that misses every cache
 * starts with generic code, specialized in the background) or
 * pc_jit_mode_sync (compiled before creation returns). Wins over
 * PRIMCACHE_JIT_MODE. Other values are invalid_arguments. */
typedef enum {
  pc_jit_mode_tiered = 0,
  pc_jit_mode_sync = 1,
  pc_jit_mode_max = 0x7fffffff
} pc_jit_mode_t;
PC_API pc_status_t pc_set_jit_mode(pc_jit_mode_t mode);
PC_API pc_status_t pc_get_jit_mode(pc_jit_mode_t* mode);

PC_API pc_status_t pc_set_primitive_cache_capacity(int capacity);
PC_API pc_status_t pc_get_primitive_cache_capacity(int* capacity);
PC_API pc_status_t pc_get_primitive_cache_size(int* size);

#ifdef __cplusplus
}
#endif

#include "primcache/runtime/primcache_constant.h"
#include "primcache/runtime/primcache_persistent.h"

#endif
