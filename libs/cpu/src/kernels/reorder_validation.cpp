#include "kernels/reorder_validation.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "kernels/integer_math.hpp"
#include "kernels/kernel_failure.hpp"
#include "kernels/layout_walk.hpp"
#include "kernels/reorder_config.hpp"

namespace primcache::cpu_internal {
namespace {

failure invalid(const std::string& message) {
  return kernel_invalid("reorder", message);
}
failure unimplemented(const std::string& message) {
  return kernel_unimplemented("reorder", message);
}

}  // namespace

result<bool> validate_reorder_problem(const reorder_problem& p) {
  if (auto ok = validate_walk_tensors("reorder", p.src, p.dst, p.nthr); !ok) return ok;
  switch (p.scales) {
    case reorder_scales::none:
    case reorder_scales::common: break;
    case reorder_scales::per_dim:
      if (p.scale_dim < 0 || p.scale_dim >= p.src.ndims()) {
        return invalid("scale dimension " + std::to_string(p.scale_dim) + " is outside [0, " +
                       std::to_string(p.src.ndims()) + ")");
      }
      break;
    default:
      return invalid("scale kind " + std::to_string(static_cast<int>(p.scales)) +
                     " is not a known kind");
  }
  for (const memory_desc* md : {&p.src, &p.dst}) {
    for (std::int64_t o : md->padded_offsets()) {
      if (o != 0) return unimplemented(md->to_string() + " has non-zero padded offsets");
    }
  }
  return true;
}

result<bool> validate_reorder_config(const reorder_config& c) {
  if (c.tile != 4 && c.tile != 8 && c.tile != 16) {
    return invalid("config tile " + std::to_string(c.tile) + " is not 4, 8 or 16");
  }
  for (auto [name, b] : {std::pair<const char*, std::int64_t>{"block_i", c.block_i},
                         std::pair<const char*, std::int64_t>{"block_j", c.block_j}}) {
    if (b < 0 || b % c.tile != 0) {
      return invalid("config " + std::string(name) + " " + std::to_string(b) +
                     " is not a non-negative multiple of tile " + std::to_string(c.tile));
    }
  }
  return validate_walk_vectors("reorder", c.vector_lanes, c.unroll, c.chunk);
}

result<bool> check_reorder_problem(const reorder_problem& p) {
  if (auto ok = validate_reorder_problem(p); !ok) return ok.why();
  auto plan = plan_walk(p.src, p.dst, reorder_keep_mask(p));
  if (!plan) return plan.why();
  return true;
}

}  // namespace primcache::cpu_internal
