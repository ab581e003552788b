// primcache/runtime/constant_cache.hpp — the constant tensor cache as the
// runtime's users and backends see it: a capacity in MB per engine kind
// (the constant-tensor-cache capacity RFC's API), the old on/off switch, and
// the cache of an engine's device that backends keep prepacked weights in.
//
//   #include <primcache/runtime/constant_cache.hpp>
//   primcache::set_constant_tensor_cache_capacity(primcache::engine_kind::cpu, 1024);  // 1 GiB
//   std::int64_t mb = primcache::get_constant_tensor_cache_capacity(primcache::engine_kind::gpu);
//   primcache::set_constant_tensor_cache(0);           // the old switch: 0 for every kind
//   // a backend:
//   primcache::constant_tensor_cache& c = primcache::constant_tensor_cache_for(eng);
//   auto r = c.get_or_add(key, bytes, [&] { return pack(weights); });
//
// One cache per engine kind, and per device where a kind has several: the
// CPU engines share "cpu", GPU engine N has "gpu.N" (its own budget of the
// kind's capacity). In control they are constant.cpu, constant.gpu.N.
//
// Capacity rules (the RFC's): the default is unlimited
// (constant_tensor_cache_unlimited). The first explicit setting of a kind
// and any decrease flush that kind's caches; an increase (or the same value)
// keeps their contents; 0 flushes and disables them (every use computes its
// tensor and keeps nothing). A capacity changed live through the admin API
// (control) follows the same rules. PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY
// (`cpu:10240;gpu:2048`, optional `:policy` per kind) is read once, when the
// process's caches are first used, before any setting: the API wins over it.
// The old switch set_constant_tensor_cache(flag) sets every kind to the
// default (flag > 0) or 0 (flag == 0).
//
// Thread-safety: every function may be called from any thread at once.
// Settings are serialized; a flushed tensor still in use stays valid for its
// holder. Exceptions: error(invalid_arguments) for a negative capacity or
// flag, a capacity above max_constant_tensor_cache_capacity (other than
// unlimited), or an engine kind that is not cpu or gpu; std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "primcache/base/export.hpp"
#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "primcache/runtime/engine.hpp"

namespace primcache {

// The capacity of a kind without a limit, as the int64 API reads and sets it.
inline constexpr std::int64_t constant_tensor_cache_unlimited =
    std::numeric_limits<std::int64_t>::max();
// The largest limited capacity in MB (its bytes must fit in std::size_t).
inline constexpr std::int64_t max_constant_tensor_cache_capacity =
    static_cast<std::int64_t>(constant_tensor_cache::max_megabytes);

// Sets the capacity (MB) of every cache of `kind`, by the rules above.
PRIMCACHE_API void set_constant_tensor_cache_capacity(engine_kind kind, std::int64_t megabytes);
// The kind's capacity in MB (constant_tensor_cache_unlimited by default).
PRIMCACHE_API std::int64_t get_constant_tensor_cache_capacity(engine_kind kind);
// What set_constant_tensor_cache_capacity(kind, megabytes) would drop now
// (whether it flushes, tensors, bytes), summed over the kind's devices;
// changes nothing.
PRIMCACHE_API capacity_change_effect preview_constant_tensor_cache_capacity(engine_kind kind,
                                                                            std::int64_t megabytes);

// The old switch: flag > 0 sets every kind to the default (unlimited), 0
// sets every kind to 0; negative flags are invalid_arguments.
PRIMCACHE_API void set_constant_tensor_cache(int flag);
// 1 when any kind's capacity is not 0, else 0.
PRIMCACHE_API int get_constant_tensor_cache();

// The cache backends keep an engine's constant tensors in: "cpu" for every
// CPU engine, "gpu.<index>" for GPU engines. Created (with its kind's
// capacity) and registered in control on first use; the reference stays
// valid for the life of the process.
PRIMCACHE_API constant_tensor_cache& constant_tensor_cache_for(engine_kind kind,
                                                               std::size_t index = 0);
PRIMCACHE_API constant_tensor_cache& constant_tensor_cache_for(const engine& eng);

}  // namespace primcache
