#include "primitives/constant_weights.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

#include "primcache/base/error.hpp"
#include "primcache/const_cache/constant_tensor_caches.hpp"
#include "primcache/runtime/args.h"

namespace primcache::cpu_internal {

constant_tensor_cache& cpu_constant_cache() {
  // The set lives as long as the process; the device's cache as long as it.
  static constant_tensor_cache& cache = constant_caches().device("cpu");
  return cache;
}

std::shared_ptr<const constant_buffer> packed_constant_weights(const backend::exec_ctx& ctx,
                                                               const char* what, std::size_t bytes,
                                                               const write_packing_fn& packing,
                                                               const pack_fn& pack) {
  const memory* weights = ctx.arg(PRIMCACHE_ARG_WEIGHTS);
  if (weights == nullptr || ctx.arg_ptr(PRIMCACHE_ARG_WEIGHTS) == nullptr) {
    throw error(status::invalid_arguments, std::string(what) + ": argument weights was not passed");
  }
  // The weights' identity is the memory's id, never their address: a freed
  // buffer's address comes back from the next allocation.
  key_writer w;
  packing(w);
  w.str("memory_id").u64(weights->get_id());
  const key k = w.finish();
  const auto* user = static_cast<const float*>(ctx.arg_ptr(PRIMCACHE_ARG_WEIGHTS));
  const std::string_view key_bytes(reinterpret_cast<const char*>(k.bytes().data()),
                                   k.bytes().size());
  const constant_key ck(cpu_backend_id, key_bytes);
  auto r = cpu_constant_cache().get_or_add(ck, bytes, [&] {
    // Host memory of its own (not the engine's allocate): a cached
    // buffer may outlive every engine handle.
    auto buf = make_constant_buffer(
        bytes, [](std::size_t n) { return std::aligned_alloc(64, (n + 63) & ~std::size_t{63}); },
        [](void* p, std::size_t) { std::free(p); });
    pack(user, buf->data_as<float>());
    return buf;
  });
  if (r.outcome == lookup_outcome::miss) {
    // No one can look this entry up once the id is gone (the memory
    // object's last copy, or set_data_handle): drop it then, instead of
    // keeping it until an eviction. Once per entry and memory id.
    backend::on_data_release(*weights, key_bytes, [ck]() noexcept {
      try {
        cpu_constant_cache().remove_if_exist(ck);
      } catch (...) {
        // Out of memory while removing: the entry stays
        // until an eviction; nothing else is affected.
      }
    });
  }
  return r.value;
}

}  // namespace primcache::cpu_internal
