#include "kernels/eltwise_kernel.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "kernels/eltwise_config.hpp"
#include "kernels/eltwise_generator.hpp"
#include "kernels/eltwise_validation.hpp"
#include "kernels/layout_walk.hpp"

namespace primcache::cpu_internal {
namespace {

struct prepared {
  walk_plan plan;
  walk_codegen gen;
  std::int64_t work_items = 0;
};

result<prepared> prepare(const eltwise_problem& p, const eltwise_config& c) {
  if (auto ok = validate_eltwise_problem(p); !ok) return ok.why();
  if (auto ok = validate_eltwise_config(c); !ok) return ok.why();
  auto plan = eltwise_walk_plan(p);
  if (!plan) return plan.why();
  prepared out{std::move(plan).value(), {}, 0};
  walk_codegen& g = out.gen;
  g.src_dt = p.src.data_type();
  g.dst_dt = p.dst.data_type();
  g.vector_lanes = c.vector_lanes;
  g.unroll = c.unroll;
  g.chunk = walk_chunk(out.plan, c.chunk, c.vector_lanes * c.unroll);
  g.use_memcpy = false;
  out.work_items = out.plan.work_items(g.chunk);
  return out;
}

std::string kernel_name(const eltwise_problem& p) {
  return "eltwise_" + p.src.to_string() + "_to_" + p.dst.to_string();
}

}  // namespace

result<std::unique_ptr<eltwise_kernel>> eltwise_kernel::finish(const eltwise_problem& p,
                                                               const eltwise_config& c,
                                                               std::unique_ptr<jit_module> m,
                                                               std::int64_t work_items) {
  auto fn = m->lookup_function<fn_type>(eltwise_symbol);
  if (!fn) return fn.why();
  std::unique_ptr<eltwise_kernel> k(new eltwise_kernel());
  k->problem_ = p;
  k->config_ = c;
  k->module_ = std::move(m);
  k->fn_ = fn.value();
  k->work_items_ = work_items;
  return k;
}

result<std::unique_ptr<eltwise_kernel>> eltwise_kernel::create(const eltwise_problem& p,
                                                               const eltwise_config& c,
                                                               cpu_isa isa) {
  auto prep = prepare(p, c);
  if (!prep) return prep.why();
  prepared& pr = prep.value();
  auto m = jit_module::compile(
      kernel_name(p), isa, [&](llvm::Module& mod) { generate_eltwise(mod, p, pr.plan, pr.gen); });
  if (!m) return m.why();
  return finish(p, c, std::move(m).value(), pr.work_items);
}

result<std::unique_ptr<eltwise_kernel>> eltwise_kernel::load(const eltwise_problem& p,
                                                             const eltwise_config& c,
                                                             std::span<const std::byte> object,
                                                             cpu_isa highest) {
  auto prep = prepare(p, c);
  if (!prep) return prep.why();
  auto m = jit_module::load(kernel_name(p), object, highest);
  if (!m) return m.why();
  return finish(p, c, std::move(m).value(), prep.value().work_items);
}

void eltwise_kernel::execute(const eltwise_args& args, void* /*scratchpad*/,
                             thread_pool& pool) const {
  run_walk(fn_, args.src, args.dst, nullptr, args.binary_operands, work_items_, problem_.nthr,
           pool);
}

}  // namespace primcache::cpu_internal
