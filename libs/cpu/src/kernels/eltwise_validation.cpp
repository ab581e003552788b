#include "kernels/eltwise_validation.hpp"

#include <algorithm>
#include <string>

#include "kernels/integer_math.hpp"
#include "kernels/kernel_failure.hpp"

namespace primcache::cpu_internal {
namespace {

failure invalid(const std::string& message) {
  return kernel_invalid("eltwise", message);
}
failure unimplemented(const std::string& message) {
  return kernel_unimplemented("eltwise", message);
}

result<bool> validate_op(const eltwise_op& op, const std::string& what) {
  if (static_cast<int>(op.alg) > static_cast<int>(eltwise_alg::clip)) {
    return invalid(what + " algorithm " + std::to_string(static_cast<int>(op.alg)) +
                   " is not a known algorithm");
  }
  return true;
}

}  // namespace

result<bool> validate_eltwise_problem(const eltwise_problem& p) {
  if (auto ok = validate_walk_tensors("eltwise", p.src, p.dst, p.nthr); !ok) return ok;
  for (const memory_desc* md : {&p.src, &p.dst}) {
    if (md->data_type() != data_type::f32 && md->data_type() != data_type::bf16) {
      return unimplemented(md->to_string() + ": only f32 and bf16 are supported");
    }
  }
  if (p.src.with_offset0(0).with_data_type(data_type::f32) !=
      p.dst.with_offset0(0).with_data_type(data_type::f32)) {
    return unimplemented("src " + p.src.to_string() + " and dst " + p.dst.to_string() +
                         " have different layouts; reorder one first");
  }
  for (std::int64_t o : p.dst.padded_offsets()) {
    if (o != 0) return unimplemented(p.dst.to_string() + " has non-zero padded offsets");
  }
  if (auto ok = validate_op(p.op, "the"); !ok) return ok;
  for (std::size_t i = 0; i < p.post_ops.size(); ++i) {
    const post_op& op = p.post_ops[i];
    const std::string which = "post-op " + std::to_string(i);
    if (op.what == post_op::kind::eltwise) {
      if (auto ok = validate_op(op.eltwise, which); !ok) return ok;
    } else if (op.what == post_op::kind::binary_add) {
      if (op.binary.arg_index < 0) {
        return invalid(which + " has operand index " + std::to_string(op.binary.arg_index));
      }
      switch (op.binary.broadcast) {
        case binary_broadcast::none:
        case binary_broadcast::scalar: break;
        case binary_broadcast::per_channel:
          if (p.dst.ndims() < 2) {
            return invalid(which + " is per channel, but " + p.dst.to_string() +
                           " has no dimension 1");
          }
          break;
        default: return invalid(which + " has an unknown broadcast kind");
      }
    } else {
      return invalid(which + " has an unknown kind");
    }
  }
  return true;
}

result<bool> validate_eltwise_config(const eltwise_config& c) {
  return validate_walk_vectors("eltwise", c.vector_lanes, c.unroll, c.chunk);
}

result<bool> check_eltwise_problem(const eltwise_problem& p) {
  return validate_eltwise_problem(p);
}

}  // namespace primcache::cpu_internal
