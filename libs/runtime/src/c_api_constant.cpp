// The C API of the constant tensor cache (primcache_constant.h).
#include "primcache/runtime/primcache_constant.h"

#include <new>
#include <string>
#include <string_view>

#include "c_api_guard.hpp"
#include "primcache/base/error.hpp"
#include "primcache/runtime/constant_cache.hpp"
#include "primcache/runtime/primcache.h"

namespace {

using primcache::runtime_internal::c_api_guarded;

void require_output(const void* p, const char* what) {
  if (p == nullptr) {
    throw primcache::error(primcache::status::invalid_arguments, std::string(what) + " is NULL");
  }
}

// Any int a C caller passes converts; the C++ API refuses values it does
// not know.
primcache::engine_kind kind_of(pc_engine_kind_t kind) noexcept {
  return static_cast<primcache::engine_kind>(static_cast<int>(kind));
}

}  // namespace

extern "C" {

pc_status_t pc_set_constant_tensor_cache_capacity(pc_engine_kind_t kind, int64_t capacity_mb) {
  return c_api_guarded(
      [&] { primcache::set_constant_tensor_cache_capacity(kind_of(kind), capacity_mb); });
}

pc_status_t pc_get_constant_tensor_cache_capacity(pc_engine_kind_t kind, int64_t* capacity_mb) {
  return c_api_guarded([&] {
    require_output(capacity_mb, "capacity_mb");
    *capacity_mb = primcache::get_constant_tensor_cache_capacity(kind_of(kind));
  });
}

pc_status_t pc_preview_constant_tensor_cache_capacity(pc_engine_kind_t kind, int64_t capacity_mb,
                                                      int* flushes, int64_t* tensors,
                                                      int64_t* bytes) {
  return c_api_guarded([&] {
    require_output(flushes, "flushes");
    require_output(tensors, "tensors");
    require_output(bytes, "bytes");
    const primcache::capacity_change_effect e =
        primcache::preview_constant_tensor_cache_capacity(kind_of(kind), capacity_mb);
    *flushes = e.flushes ? 1 : 0;
    *tensors = static_cast<int64_t>(e.tensors);
    *bytes = static_cast<int64_t>(e.bytes);
  });
}

pc_status_t pc_set_constant_tensor_cache(int flag) {
  return c_api_guarded([&] { primcache::set_constant_tensor_cache(flag); });
}

pc_status_t pc_get_constant_tensor_cache(int* flag) {
  return c_api_guarded([&] {
    require_output(flag, "flag");
    *flag = primcache::get_constant_tensor_cache();
  });
}

}  // extern "C"
