// The runtime's constant tensor cache API over const_cache's process set.
#include "primcache/runtime/constant_cache.hpp"

#include <string>
#include <string_view>

#include "primcache/base/error.hpp"
#include "primcache/const_cache/constant_tensor_caches.hpp"

namespace primcache {
namespace {

// The kind's name in const_cache ("cpu", "gpu"), or invalid_arguments for a
// value outside engine_kind (a C caller's or a cast's).
std::string_view kind_name(engine_kind kind) {
  switch (kind) {
    case engine_kind::cpu:
    case engine_kind::gpu: return to_string(kind);
  }
  throw error(status::invalid_arguments, "constant tensor cache: engine kind " +
                                             std::to_string(static_cast<int>(kind)) +
                                             " is not cpu (1) or gpu (2)");
}

std::uint64_t to_megabytes(engine_kind kind, std::int64_t megabytes) {
  if (megabytes < 0) {
    throw error(status::invalid_arguments,
                "constant tensor cache capacity of " + std::string(to_string(kind)) + ": " +
                    std::to_string(megabytes) + " MB is negative; it must be >= 0");
  }
  if (megabytes == constant_tensor_cache_unlimited) return constant_tensor_cache::unlimited;
  if (megabytes > max_constant_tensor_cache_capacity) {
    throw error(status::invalid_arguments,
                "constant tensor cache capacity of " + std::string(to_string(kind)) + ": " +
                    std::to_string(megabytes) + " MB is too large (the limit is " +
                    std::to_string(max_constant_tensor_cache_capacity) +
                    " MB; constant_tensor_cache_unlimited for none)");
  }
  return static_cast<std::uint64_t>(megabytes);
}

constexpr engine_kind all_kinds[] = {engine_kind::cpu, engine_kind::gpu};

}  // namespace

void set_constant_tensor_cache_capacity(engine_kind kind, std::int64_t megabytes) {
  const std::string_view name = kind_name(kind);
  constant_caches().set_capacity(name, to_megabytes(kind, megabytes));
}

std::int64_t get_constant_tensor_cache_capacity(engine_kind kind) {
  const std::uint64_t mb = constant_caches().capacity(kind_name(kind));
  return mb == constant_tensor_cache::unlimited ? constant_tensor_cache_unlimited
                                                : static_cast<std::int64_t>(mb);
}

capacity_change_effect preview_constant_tensor_cache_capacity(engine_kind kind,
                                                              std::int64_t megabytes) {
  const std::string_view name = kind_name(kind);
  return constant_caches().preview_capacity(name, to_megabytes(kind, megabytes));
}

void set_constant_tensor_cache(int flag) {
  if (flag < 0) {
    throw error(status::invalid_arguments, "set_constant_tensor_cache: flag " +
                                               std::to_string(flag) +
                                               " is negative; 0 disables, > 0 enables");
  }
  for (engine_kind k : all_kinds) {
    set_constant_tensor_cache_capacity(k, flag > 0 ? constant_tensor_cache_unlimited : 0);
  }
}

int get_constant_tensor_cache() {
  for (engine_kind k : all_kinds) {
    if (get_constant_tensor_cache_capacity(k) != 0) return 1;
  }
  return 0;
}

constant_tensor_cache& constant_tensor_cache_for(engine_kind kind, std::size_t index) {
  const std::string_view name = kind_name(kind);
  if (kind == engine_kind::cpu) return constant_caches().device(name);
  return constant_caches().device(std::string(name) + "." + std::to_string(index));
}

constant_tensor_cache& constant_tensor_cache_for(const engine& eng) {
  return constant_tensor_cache_for(eng.get_kind(), eng.get_index());
}

}  // namespace primcache
