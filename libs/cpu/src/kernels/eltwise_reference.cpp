#include <span>
#include <vector>

#include "kernels/eltwise_kernel.hpp"
#include "kernels/padded_index_walk.hpp"
#include "primcache/tensor/numeric.hpp"

namespace primcache::cpu_internal {

void eltwise_reference(const eltwise_problem& p, const eltwise_args& args) {
  const memory_desc& s = p.src;
  const memory_desc& d = p.dst;
  auto read = [&](std::int64_t off) {
    return s.data_type() == data_type::f32
               ? static_cast<const float*>(args.src)[off]
               : bf16_to_f32(static_cast<const std::uint16_t*>(args.src)[off]);
  };
  auto write = [&](std::int64_t off, float v) {
    if (d.data_type() == data_type::f32) {
      static_cast<float*>(args.dst)[off] = v;
    } else {
      static_cast<std::uint16_t*>(args.dst)[off] = f32_to_bf16(v);
    }
  };
  std::vector<float> operands(p.post_ops.size());
  for_each_padded_index(d, [&](dims_view index, bool real) {
    const std::int64_t doff = d.offset_of(index);
    if (!real) {
      write(doff, 0.f);
      return;
    }
    for (std::size_t k = 0; k < p.post_ops.size(); ++k) {
      const post_op& op = p.post_ops[k];
      if (op.what != post_op::kind::binary_add) continue;
      const float* base = args.binary_operands[op.binary.arg_index];
      switch (op.binary.broadcast) {
        case binary_broadcast::per_channel:
          operands[k] = base[index.size() > 1 ? index[1] : 0];
          break;
        case binary_broadcast::scalar: operands[k] = base[0]; break;
        default: operands[k] = base[doff]; break;
      }
    }
    const float y = eltwise_reference(read(s.offset_of(index)), p.op);
    write(doff, apply_post_ops_reference(y, p.post_ops, operands.data()));
  });
}

}  // namespace primcache::cpu_internal
