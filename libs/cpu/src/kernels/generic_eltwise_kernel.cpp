#include "kernels/generic_eltwise_kernel.hpp"

#include <cstring>
#include <string>

#include "kernels/eltwise_config.hpp"
#include "kernels/eltwise_validation.hpp"
#include "kernels/generic_eltwise_generator.hpp"
#include "kernels/kernel_failure.hpp"
#include "tiered/generic_code.hpp"

namespace primcache::cpu_internal {
result<std::unique_ptr<generic_eltwise_kernel>> generic_eltwise_kernel::create(
    const eltwise_problem& p, const eltwise_config& specialized, cpu_isa isa) {
  if (isa < cpu_isa::avx2) {
    return kernel_unimplemented(
        "eltwise", "the generic eltwise needs avx2, not " + std::string(to_string(isa)));
  }
  if (auto ok = validate_eltwise_problem(p); !ok) return ok.why();
  if (auto ok = validate_eltwise_config(specialized); !ok) return ok.why();
  if (p.op.scale != 1.f) {
    return kernel_unimplemented("eltwise", "the generic eltwise scales no algorithm result");
  }
  if (p.post_ops.size() > static_cast<std::size_t>(gw_max_post_ops)) {
    return kernel_unimplemented("eltwise", "the generic eltwise takes at most " +
                                               std::to_string(gw_max_post_ops) + " post-ops, not " +
                                               std::to_string(p.post_ops.size()));
  }
  auto plan = plan_walk(p.src, p.dst, eltwise_keep_dims(p));
  if (!plan) return plan.why();
  const walk_plan& w = plan.value();
  if (w.inner != walk_plan::inner_kind::stream) {
    return kernel_unimplemented("eltwise", "the generic eltwise walks no transposition");
  }
  bool per_channel = false;
  for (const post_op& op : p.post_ops) {
    per_channel = per_channel || (op.what == post_op::kind::binary_add &&
                                  op.binary.broadcast == binary_broadcast::per_channel);
  }
  // The specialized kernel's chunk (eltwise_kernel.cpp), hence its work items.
  const std::int64_t chunk =
      walk_chunk(w, specialized.chunk, specialized.vector_lanes * specialized.unroll);
  auto params = make_generic_walk_params("eltwise", w, chunk, per_channel ? 1 : -1);
  if (!params) return params.why();
  auto code_isa = generic_isa_for(generic_kernel::eltwise, isa);
  if (!code_isa) return code_isa.why();
  const std::string symbol =
      generic_eltwise_symbol(generic_eltwise_form_of(p.op), p.src.data_type(), p.dst.data_type());
  auto fn = generic_function<generic_walk_function>(generic_kernel::eltwise, code_isa.value(),
                                                    symbol.c_str());
  if (!fn) return fn.why();
  std::unique_ptr<generic_eltwise_kernel> k(new generic_eltwise_kernel());
  k->problem_ = p;
  k->isa_ = code_isa.value();
  k->fn_ = fn.value();
  k->work_items_ = w.work_items(chunk);
  k->params_ = std::move(params).value();
  auto& v = k->params_;
  put_generic_f32(v[gw_alpha], p.op.alpha);
  put_generic_f32(v[gw_beta], p.op.beta);
  write_generic_post_ops(p.post_ops, v[gw_post_op_count], &v[gw_post_ops]);
  return k;
}

void generic_eltwise_kernel::execute(const eltwise_args& args, void* /*scratchpad*/,
                                     thread_pool& pool) const {
  run_generic_walk(fn_, params_, args.src, args.dst, nullptr, args.binary_operands, work_items_,
                   problem_.nthr, pool);
}

}  // namespace primcache::cpu_internal
