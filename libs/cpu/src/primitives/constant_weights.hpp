// primitives/constant_weights.hpp — packed constant weights of CPU
// primitives, kept in the CPU device's constant tensor cache.
//
// A primitive whose attribute marks its weights constant
// (primitive_attr::set_constant_weights) packs them on its first execution
// and keeps the packed bytes in constant_caches().device("cpu") under
// (cpu_backend_id, packing key, the weights memory's id). Later executions
// of any primitive with the same packing and the same weights memory — the
// same id: a new memory object or set_data_handle gives a new one — reuse
// them. When the cache would not keep a new tensor (disabled, or full under
// no_evict) and holds none for these weights, the caller says what to do:
// `decline` returns nullptr (a kernel that can pack as it goes, like the
// convolution's, runs as without the attribute), `pack_for_this_call` packs
// into a buffer used for this execution only — one of a few kept for the
// next such call, since fresh pages for tens of MB cost more than the
// kernel. Either way the cache counts a miss and a refusal.
//
//   auto packed = packed_constant_weights(ctx, "matmul", bytes,
//       [&](key_writer& w) { packing.write_key(w); },
//       [&](const float* user, float* out) { matmul_pack_weights(packing, user, out, pool); },
//       when_not_kept::pack_for_this_call);
//   args.weights = packed->data_as<const float>();   // held until the call returns
//
// Thread-safety: any number of threads; racing first executions pack once
// (the cache's single-flight creation), the others wait. A buffer stays
// valid for its holder after an eviction. Exceptions: what the pack function
// and the allocation throw (error(out_of_memory)); invalid_arguments when
// the weights argument is missing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "primcache/const_cache/constant_buffer.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"

namespace primcache {
class constant_tensor_cache;
}  // namespace primcache

namespace primcache::cpu_internal {

// The CPU backend's id in constant tensor keys ("cpu" in ASCII).
inline constexpr std::uint64_t cpu_backend_id = 0x757063;

// The cache the CPU backend keeps constant tensors in.
constant_tensor_cache& cpu_constant_cache();

using write_packing_fn = std::function<void(key_writer&)>;
using pack_fn = std::function<void(const float* user, float* packed)>;

// What packed_constant_weights does when the cache would not keep them.
enum class when_not_kept {
  decline,             // return nullptr; the caller does without packed weights
  pack_for_this_call,  // pack into a reused buffer held until the call returns
};

// The packed weights of PRIMCACHE_ARG_WEIGHTS for this execution, or
// nullptr when declined (see above).
std::shared_ptr<const constant_buffer> packed_constant_weights(const backend::exec_ctx& ctx,
                                                               const char* what, std::size_t bytes,
                                                               const write_packing_fn& packing,
                                                               const pack_fn& pack,
                                                               when_not_kept fallback);

// Buffers allocated for weights packed for one call since the process
// started (reuses are not counted): for tests.
std::uint64_t packing_buffer_allocations() noexcept;

}  // namespace primcache::cpu_internal
