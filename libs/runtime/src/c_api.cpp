// The C API: each function translates its arguments, calls the C++ API and
// turns any exception into a status plus this thread's last error message.
#include "primcache/runtime/primcache.h"
#include "primcache/runtime/primcache_tune.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "c_api_guard.hpp"
#include "primcache/base/error.hpp"
#include "primcache/runtime/runtime.hpp"

struct pc_engine {
  primcache::engine value;
};
struct pc_stream {
  primcache::stream value;
};
struct pc_memory_desc {
  primcache::memory_desc value;
};
struct pc_memory {
  primcache::memory value;
};
struct pc_primitive_attr {
  primcache::primitive_attr value;
};
struct pc_primitive_desc {
  primcache::primitive_desc value;
};
struct pc_primitive {
  primcache::primitive value;
};

namespace {

// A fixed buffer: recording an error never allocates, so the error path
// works when memory has run out (a std::string here could throw from inside
// the noexcept wrapper and terminate the process).
thread_local char tl_last_error[1024] = "";

pc_status_t fail(pc_status_t s, std::string_view message) noexcept {
  const std::size_t n = std::min(message.size(), sizeof tl_last_error - 1);
  std::memcpy(tl_last_error, message.data(), n);
  tl_last_error[n] = '\0';
  return s;
}

}  // namespace

// For the C API's other files (through c_api_guard.hpp): the same last-error
// buffer.
namespace primcache::runtime_internal {
pc_status_t c_api_fail(pc_status_t s, std::string_view message) noexcept {
  return fail(s, message);
}
}  // namespace primcache::runtime_internal

namespace {

using primcache::runtime_internal::c_api_guarded;

// A precondition of a C call; c_api_guarded() turns it into pc_invalid_arguments.
void require(bool condition, const char* what) {
  if (!condition) throw primcache::error(primcache::status::invalid_arguments, what);
}

void require_engine_kind(pc_engine_kind_t kind) {
  if (kind != pc_engine_cpu && kind != pc_engine_gpu) {
    throw primcache::error(primcache::status::invalid_arguments,
                           "unknown engine kind " + std::to_string(static_cast<int>(kind)));
  }
}

primcache::format_tag to_tag(pc_format_tag_t tag) {
  using primcache::format_tag;
  switch (tag) {
    case pc_tag_any: return format_tag::any;
    case pc_tag_a: return format_tag::a;
    case pc_tag_ab: return format_tag::ab;
    case pc_tag_ba: return format_tag::ba;
    case pc_tag_abc: return format_tag::abc;
    case pc_tag_acb: return format_tag::acb;
    case pc_tag_nchw: return format_tag::nchw;
    case pc_tag_nhwc: return format_tag::nhwc;
    case pc_tag_nChw8c: return format_tag::nChw8c;
    case pc_tag_nChw16c: return format_tag::nChw16c;
    case pc_tag_oihw: return format_tag::oihw;
    case pc_tag_hwio: return format_tag::hwio;
    case pc_tag_goihw: return format_tag::goihw;
    case pc_format_tag_max: break;
  }
  throw primcache::error(primcache::status::invalid_arguments,
                         "unknown format tag " + std::to_string(static_cast<int>(tag)));
}

primcache::data_type to_dt(pc_data_type_t dt) {
  if (dt < pc_f32 || dt > pc_s32) {
    throw primcache::error(primcache::status::invalid_arguments,
                           "unknown data type " + std::to_string(static_cast<int>(dt)));
  }
  return static_cast<primcache::data_type>(dt);
}

primcache::algorithm to_alg(pc_algorithm_t alg) {
  if (alg < pc_eltwise_relu || alg > pc_convolution_auto) {
    throw primcache::error(primcache::status::invalid_arguments,
                           "unknown algorithm " + std::to_string(static_cast<int>(alg)));
  }
  return static_cast<primcache::algorithm>(alg);
}

primcache::memory::dims to_dims(int n, const int64_t* values) {
  if (n < 0 || n > primcache::max_ndims || (n > 0 && values == nullptr)) {
    throw primcache::error(primcache::status::invalid_arguments,
                           "ndims " + std::to_string(n) + " is invalid or dims are missing");
  }
  return primcache::memory::dims(values, values + n);
}

primcache::primitive_attr attr_of(const_pc_primitive_attr_t attr) {
  return attr ? attr->value : primcache::primitive_attr();
}

primcache::memory_desc md_of(const_pc_memory_desc_t md) {
  return md ? md->value : primcache::memory_desc();
}

}  // namespace

extern "C" {

const char* pc_last_error_message(void) {
  return tl_last_error;
}

void pc_get_version(int* major, int* minor, int* patch, const char** version, const char** llvm,
                    const char** build_identity) {
  const primcache::version_info& v = primcache::version();
  if (major != nullptr) *major = v.major;
  if (minor != nullptr) *minor = v.minor;
  if (patch != nullptr) *patch = v.patch;
  if (version != nullptr) *version = v.version;
  if (llvm != nullptr) *llvm = v.llvm;
  if (build_identity != nullptr) *build_identity = v.build_identity;
}

pc_status_t pc_engine_create(pc_engine_t* engine, pc_engine_kind_t kind, size_t index) {
  return c_api_guarded([&] {
    require(engine != nullptr, "engine is NULL");
    require_engine_kind(kind);
    *engine = new pc_engine{primcache::engine(static_cast<primcache::engine_kind>(kind), index)};
  });
}
pc_status_t pc_engine_get_count(size_t* count, pc_engine_kind_t kind) {
  return c_api_guarded([&] {
    require(count != nullptr, "count is NULL");
    require_engine_kind(kind);
    *count = primcache::engine::get_count(static_cast<primcache::engine_kind>(kind));
  });
}
pc_status_t pc_engine_destroy(pc_engine_t engine) {
  delete engine;
  return pc_success;
}

pc_status_t pc_stream_create(pc_stream_t* stream, pc_engine_t engine) {
  return c_api_guarded([&] {
    require(stream != nullptr && engine != nullptr, "stream or engine is NULL");
    *stream = new pc_stream{primcache::stream(engine->value)};
  });
}
pc_status_t pc_stream_wait(pc_stream_t stream) {
  return c_api_guarded([&] {
    require(stream != nullptr, "stream is NULL");
    stream->value.wait();
  });
}
pc_status_t pc_stream_destroy(pc_stream_t stream) {
  delete stream;
  return pc_success;
}

pc_status_t pc_memory_desc_create_with_tag(pc_memory_desc_t* md, int ndims, const int64_t* dims,
                                           pc_data_type_t dt, pc_format_tag_t tag) {
  return c_api_guarded([&] {
    require(md != nullptr, "md is NULL");
    *md = new pc_memory_desc{primcache::memory_desc(to_dims(ndims, dims), to_dt(dt), to_tag(tag))};
  });
}
pc_status_t pc_memory_desc_create_with_strides(pc_memory_desc_t* md, int ndims, const int64_t* dims,
                                               pc_data_type_t dt, const int64_t* strides) {
  return c_api_guarded([&] {
    require(md != nullptr, "md is NULL");
    *md = new pc_memory_desc{
        primcache::memory_desc(to_dims(ndims, dims), to_dt(dt), to_dims(ndims, strides))};
  });
}
pc_status_t pc_memory_desc_get_size(size_t* bytes, const_pc_memory_desc_t md) {
  return c_api_guarded([&] {
    require(bytes != nullptr && md != nullptr, "bytes or md is NULL");
    *bytes = md->value.size_bytes();
  });
}
pc_status_t pc_memory_desc_equal(int* equal, const_pc_memory_desc_t a, const_pc_memory_desc_t b) {
  return c_api_guarded([&] {
    require(equal != nullptr && a != nullptr && b != nullptr, "an argument is NULL");
    *equal = a->value == b->value ? 1 : 0;
  });
}
pc_status_t pc_memory_desc_destroy(pc_memory_desc_t md) {
  delete md;
  return pc_success;
}

pc_status_t pc_memory_create(pc_memory_t* memory, const_pc_memory_desc_t md, pc_engine_t engine,
                             void* handle) {
  return c_api_guarded([&] {
    require(memory != nullptr && md != nullptr && engine != nullptr,
            "memory, md or engine is NULL");
    *memory = handle == PC_MEMORY_ALLOCATE
                  ? new pc_memory{primcache::memory(md->value, engine->value)}
                  : new pc_memory{primcache::memory(md->value, engine->value, handle)};
  });
}
pc_status_t pc_memory_get_data_handle(pc_memory_t memory, void** handle) {
  return c_api_guarded([&] {
    require(memory != nullptr && handle != nullptr, "memory or handle is NULL");
    *handle = memory->value.get_data_handle();
  });
}
pc_status_t pc_memory_set_data_handle(pc_memory_t memory, void* handle) {
  return c_api_guarded([&] {
    require(memory != nullptr, "memory is NULL");
    // The sentinel means "allocate" to pc_memory_create only: taken as a
    // pointer here, the next execution would write through it.
    require(handle != PC_MEMORY_ALLOCATE,
            "PC_MEMORY_ALLOCATE is for pc_memory_create; pass a buffer (or NULL)");
    memory->value.set_data_handle(handle);
  });
}
pc_status_t pc_memory_get_id(const_pc_memory_t memory, uint64_t* id) {
  return c_api_guarded([&] {
    require(memory != nullptr && id != nullptr, "memory or id is NULL");
    *id = memory->value.get_id();
  });
}
pc_status_t pc_memory_destroy(pc_memory_t memory) {
  delete memory;
  return pc_success;
}

pc_status_t pc_primitive_attr_create(pc_primitive_attr_t* attr) {
  return c_api_guarded([&] {
    require(attr != nullptr, "attr is NULL");
    *attr = new pc_primitive_attr{};
  });
}
pc_status_t pc_primitive_attr_append_eltwise(pc_primitive_attr_t attr, float scale,
                                             pc_algorithm_t alg, float alpha, float beta) {
  return c_api_guarded([&] {
    require(attr != nullptr, "attr is NULL");
    primcache::post_ops ops = attr->value.get_post_ops();
    ops.append_eltwise(scale, to_alg(alg), alpha, beta);
    attr->value.set_post_ops(std::move(ops));
  });
}
pc_status_t pc_primitive_attr_append_binary(pc_primitive_attr_t attr, pc_algorithm_t alg,
                                            const_pc_memory_desc_t src1) {
  return c_api_guarded([&] {
    require(attr != nullptr && src1 != nullptr, "attr or src1 is NULL");
    primcache::post_ops ops = attr->value.get_post_ops();
    ops.append_binary(to_alg(alg), src1->value);
    attr->value.set_post_ops(std::move(ops));
  });
}
pc_status_t pc_primitive_attr_set_output_scales(pc_primitive_attr_t attr, int64_t count, int mask,
                                                const float* scales) {
  return c_api_guarded([&] {
    require(attr != nullptr, "attr is NULL");
    require(count > 0 && scales != nullptr, "scales are missing");
    attr->value.set_output_scales(mask, std::vector<float>(scales, scales + count));
  });
}
pc_status_t pc_primitive_attr_set_constant_weights(pc_primitive_attr_t attr, int constant) {
  return c_api_guarded([&] {
    require(attr != nullptr, "attr is NULL");
    attr->value.set_constant_weights(constant != 0);
  });
}
// primcache_tune.h: here, beside the attribute's other setters.
pc_status_t pc_primitive_attr_set_tunable(pc_primitive_attr_t attr, int tunable) {
  return c_api_guarded([&] {
    require(attr != nullptr, "attr is NULL");
    attr->value.set_tunable(tunable != 0);
  });
}
pc_status_t pc_primitive_attr_get_constant_weights(const_pc_primitive_attr_t attr, int* constant) {
  return c_api_guarded([&] {
    require(attr != nullptr && constant != nullptr, "attr or constant is NULL");
    *constant = attr->value.get_constant_weights() ? 1 : 0;
  });
}
pc_status_t pc_primitive_attr_destroy(pc_primitive_attr_t attr) {
  delete attr;
  return pc_success;
}

pc_status_t pc_matmul_primitive_desc_create(pc_primitive_desc_t* pd, pc_engine_t engine,
                                            const_pc_memory_desc_t src,
                                            const_pc_memory_desc_t weights,
                                            const_pc_memory_desc_t bias, const_pc_memory_desc_t dst,
                                            const_pc_primitive_attr_t attr) {
  return c_api_guarded([&] {
    require(pd != nullptr && engine != nullptr && src != nullptr && weights != nullptr &&
                dst != nullptr,
            "pd, engine, src, weights or dst is NULL");
    primcache::matmul::desc d(src->value, weights->value, md_of(bias), dst->value);
    *pd = new pc_primitive_desc{primcache::matmul::primitive_desc(d, attr_of(attr), engine->value)};
  });
}

pc_status_t pc_convolution_forward_primitive_desc_create(
    pc_primitive_desc_t* pd, pc_engine_t engine, pc_algorithm_t alg, const_pc_memory_desc_t src,
    const_pc_memory_desc_t weights, const_pc_memory_desc_t bias, const_pc_memory_desc_t dst,
    const int64_t* strides, const int64_t* dilates, const int64_t* padding_l,
    const int64_t* padding_r, const_pc_primitive_attr_t attr) {
  return c_api_guarded([&] {
    require(pd != nullptr && engine != nullptr && src != nullptr && weights != nullptr &&
                dst != nullptr && strides != nullptr && padding_l != nullptr &&
                padding_r != nullptr,
            "a required argument is NULL");
    const int64_t dense[2] = {0, 0};
    primcache::convolution_forward::desc d(
        primcache::prop_kind::forward_inference, to_alg(alg), src->value, weights->value,
        md_of(bias), dst->value, to_dims(2, strides), to_dims(2, dilates ? dilates : dense),
        to_dims(2, padding_l), to_dims(2, padding_r));
    *pd = new pc_primitive_desc{
        primcache::convolution_forward::primitive_desc(d, attr_of(attr), engine->value)};
  });
}

pc_status_t pc_eltwise_forward_primitive_desc_create(pc_primitive_desc_t* pd, pc_engine_t engine,
                                                     pc_algorithm_t alg, const_pc_memory_desc_t src,
                                                     const_pc_memory_desc_t dst, float alpha,
                                                     float beta, const_pc_primitive_attr_t attr) {
  return c_api_guarded([&] {
    require(pd != nullptr && engine != nullptr && src != nullptr && dst != nullptr,
            "pd, engine, src or dst is NULL");
    primcache::eltwise_forward::desc d(primcache::prop_kind::forward_inference, to_alg(alg),
                                       src->value, dst->value, alpha, beta);
    *pd = new pc_primitive_desc{
        primcache::eltwise_forward::primitive_desc(d, attr_of(attr), engine->value)};
  });
}

pc_status_t pc_reorder_primitive_desc_create(pc_primitive_desc_t* pd, const_pc_memory_desc_t src,
                                             pc_engine_t src_engine, const_pc_memory_desc_t dst,
                                             pc_engine_t dst_engine,
                                             const_pc_primitive_attr_t attr) {
  return c_api_guarded([&] {
    require(pd != nullptr && src != nullptr && src_engine != nullptr && dst != nullptr &&
                dst_engine != nullptr,
            "a required argument is NULL");
    *pd = new pc_primitive_desc{primcache::reorder::primitive_desc(
        src_engine->value, src->value, dst_engine->value, dst->value, attr_of(attr))};
  });
}

pc_status_t pc_primitive_desc_query_md(pc_memory_desc_t* md, const_pc_primitive_desc_t pd,
                                       int arg) {
  return c_api_guarded([&] {
    require(md != nullptr && pd != nullptr, "md or pd is NULL");
    *md = new pc_memory_desc{pd->value.query_md(arg)};
  });
}
namespace {
// The size-query protocol of the blob functions: out NULL asks the size.
void copy_out(const std::vector<std::uint8_t>& bytes, size_t* size, uint8_t* out) {
  require(size != nullptr, "size is NULL");
  if (out == nullptr) {
    *size = bytes.size();
    return;
  }
  if (*size < bytes.size()) {
    throw primcache::error(primcache::status::invalid_arguments,
                           "the buffer holds " + std::to_string(*size) + " bytes, " +
                               std::to_string(bytes.size()) + " are needed");
  }
  std::copy(bytes.begin(), bytes.end(), out);
  *size = bytes.size();
}
}  // namespace

pc_status_t pc_primitive_desc_get_cache_blob_id(const_pc_primitive_desc_t pd, size_t* size,
                                                uint8_t* id) {
  return c_api_guarded([&] {
    require(pd != nullptr, "pd is NULL");
    copy_out(pd->value.cache_blob_id(), size, id);
  });
}

pc_status_t pc_primitive_desc_destroy(pc_primitive_desc_t pd) {
  delete pd;
  return pc_success;
}

pc_status_t pc_primitive_create(pc_primitive_t* primitive, const_pc_primitive_desc_t pd) {
  return c_api_guarded([&] {
    require(primitive != nullptr && pd != nullptr, "primitive or pd is NULL");
    *primitive = new pc_primitive{primcache::primitive(pd->value)};
  });
}

pc_status_t pc_primitive_get_cache_blob(pc_primitive_t primitive, size_t* size, uint8_t* blob) {
  return c_api_guarded([&] {
    require(primitive != nullptr, "primitive is NULL");
    copy_out(primitive->value.cache_blob(), size, blob);
  });
}

pc_status_t pc_primitive_create_from_cache_blob(pc_primitive_t* primitive,
                                                const_pc_primitive_desc_t pd, size_t size,
                                                const uint8_t* blob) {
  return c_api_guarded([&] {
    require(primitive != nullptr && pd != nullptr, "primitive or pd is NULL");
    require(blob != nullptr || size == 0, "blob is NULL");
    const std::vector<std::uint8_t> bytes(blob, blob + size);
    *primitive = new pc_primitive{primcache::primitive(pd->value, bytes)};
  });
}

pc_status_t pc_primitive_execute(pc_primitive_t primitive, pc_stream_t stream, int nargs,
                                 const pc_exec_arg_t* args) {
  return c_api_guarded([&] {
    require(primitive != nullptr && stream != nullptr, "primitive or stream is NULL");
    require(nargs >= 0 && (nargs == 0 || args != nullptr), "args are missing");
    primcache::primitive::args map;
    for (int i = 0; i < nargs; ++i) {
      if (args[i].memory == nullptr) {
        throw primcache::error(primcache::status::invalid_arguments,
                               "argument " + std::to_string(args[i].arg) + " has a NULL memory");
      }
      map.emplace(args[i].arg, args[i].memory->value);
    }
    primitive->value.execute(stream->value, map);
  });
}
pc_status_t pc_primitive_destroy(pc_primitive_t primitive) {
  delete primitive;
  return pc_success;
}

pc_status_t pc_primitive_wait_until_specialized(pc_primitive_t primitive, int* specialized) {
  return c_api_guarded([&] {
    require(primitive != nullptr, "primitive is NULL");
    primitive->value.wait_until_specialized();
    if (specialized != nullptr) *specialized = primitive->value.specialized() ? 1 : 0;
  });
}

pc_status_t pc_set_jit_mode(pc_jit_mode_t mode) {
  return c_api_guarded([&] {
    if (mode != pc_jit_mode_tiered && mode != pc_jit_mode_sync) {
      throw primcache::error(primcache::status::invalid_arguments,
                             "jit mode " + std::to_string(static_cast<int>(mode)) +
                                 " is neither pc_jit_mode_tiered nor pc_jit_mode_sync");
    }
    primcache::set_jit_mode(mode == pc_jit_mode_sync ? primcache::jit_mode::sync
                                                     : primcache::jit_mode::tiered);
  });
}

pc_status_t pc_get_jit_mode(pc_jit_mode_t* mode) {
  return c_api_guarded([&] {
    require(mode != nullptr, "mode is NULL");
    *mode = primcache::get_jit_mode() == primcache::jit_mode::sync ? pc_jit_mode_sync
                                                                   : pc_jit_mode_tiered;
  });
}

pc_status_t pc_set_primitive_cache_capacity(int capacity) {
  return c_api_guarded([&] { primcache::set_primitive_cache_capacity(capacity); });
}
pc_status_t pc_get_primitive_cache_capacity(int* capacity) {
  return c_api_guarded([&] {
    require(capacity != nullptr, "capacity is NULL");
    *capacity = primcache::get_primitive_cache_capacity();
  });
}
pc_status_t pc_get_primitive_cache_size(int* size) {
  return c_api_guarded([&] {
    require(size != nullptr, "size is NULL");
    *size = primcache::get_primitive_cache_size();
  });
}

}  // extern "C"
