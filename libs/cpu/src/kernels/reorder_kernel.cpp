#include "kernels/reorder_kernel.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "kernels/layout_walk.hpp"
#include "kernels/reorder_config.hpp"
#include "kernels/reorder_validation.hpp"

namespace primcache::cpu_internal {
namespace {

constexpr const char* kSymbol = "reorder";

}  // namespace

result<std::unique_ptr<reorder_kernel>> reorder_kernel::finish(const reorder_problem& p,
                                                               const reorder_config& c,
                                                               std::unique_ptr<jit_module> m,
                                                               std::int64_t work_items) {
  auto fn = m->lookup_function<fn_type>(kSymbol);
  if (!fn) return fn.why();
  std::unique_ptr<reorder_kernel> k(new reorder_kernel());
  k->problem_ = p;
  k->config_ = c;
  k->module_ = std::move(m);
  k->fn_ = fn.value();
  k->work_items_ = work_items;
  return k;
}

namespace {
struct prepared {
  walk_plan plan;
  walk_codegen gen;
  std::int64_t work_items;
};

result<prepared> prepare(const reorder_problem& p, const reorder_config& c) {
  if (auto ok = validate_reorder_problem(p); !ok) return ok.why();
  if (auto ok = validate_reorder_config(c); !ok) return ok.why();
  auto plan = reorder_walk_plan(p);
  if (!plan) return plan.why();
  prepared out{std::move(plan).value(), {}, 0};
  walk_codegen& g = out.gen;
  g.src_dt = p.src.data_type();
  g.dst_dt = p.dst.data_type();
  g.scales = p.scales;
  g.scale_dim = p.scale_dim;
  g.tile = c.tile;
  g.vector_lanes = c.vector_lanes;
  g.unroll = c.unroll;
  g.chunk = walk_chunk(out.plan, c.chunk, reorder_chunk_unit(out.plan, c));
  g.use_memcpy = c.use_memcpy;
  g.tile_block = c.block_i;
  g.tile_block_j = c.block_j;
  g.nontemporal = reorder_streams_past_cache(p);
  out.work_items = out.plan.work_items(g.chunk);
  return out;
}

std::string kernel_name(const reorder_problem& p) {
  return "reorder_" + p.src.to_string() + "_to_" + p.dst.to_string();
}
}  // namespace

result<std::unique_ptr<reorder_kernel>> reorder_kernel::create(const reorder_problem& p,
                                                               const reorder_config& c,
                                                               cpu_isa isa) {
  auto prep = prepare(p, c);
  if (!prep) return prep.why();
  const prepared& pr = prep.value();
  auto m = jit_module::compile(kernel_name(p), isa, [&](llvm::Module& mod) {
    emit_walk_function(mod, kSymbol, pr.plan, pr.gen);
  });
  if (!m) return m.why();
  return finish(p, c, std::move(m).value(), pr.work_items);
}

result<std::unique_ptr<reorder_kernel>> reorder_kernel::load(const reorder_problem& p,
                                                             const reorder_config& c,
                                                             std::span<const std::byte> object,
                                                             cpu_isa highest) {
  auto prep = prepare(p, c);
  if (!prep) return prep.why();
  auto m = jit_module::load(kernel_name(p), object, highest);
  if (!m) return m.why();
  return finish(p, c, std::move(m).value(), prep.value().work_items);
}

void reorder_kernel::execute(const reorder_args& args, void* /*scratchpad*/,
                             thread_pool& pool) const {
  run_walk(fn_, args.src, args.dst, args.scales, nullptr, work_items_, problem_.nthr, pool);
}

}  // namespace primcache::cpu_internal
