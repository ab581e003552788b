// reorder on the CPU: "jit:reorder" and "ref:reorder" (plain loops).
#include <memory>

#include "kernels/generic_reorder_kernel.hpp"
#include "kernels/reorder_config.hpp"
#include "kernels/reorder_kernel.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primitives/cpu_engine.hpp"
#include "primitives/kernel_primitive.hpp"
#include "tiered/tiered_impl.hpp"

namespace primcache::cpu_internal {
namespace {

using backend::exec_ctx;
using backend::op_desc;
using backend::primitive_desc_impl;
using backend::primitive_kind;
using backend::reorder_op;

struct reorder_traits {
  using desc = reorder_problem;
  using kernel = reorder_kernel;
  static constexpr primitive_kind kind = primitive_kind::reorder;
  static constexpr const char* jit_name = "jit:reorder";
  static constexpr const char* ref_name = "ref:reorder";

  static const reorder_problem& problem(const desc& d) { return d; }
  static memory_desc arg_md(const desc& p, int arg) {
    if (arg == PRIMCACHE_ARG_FROM) return p.src;
    if (arg == PRIMCACHE_ARG_TO) return p.dst;
    return {};
  }
  static void write_op_key(const desc& p, key_writer& w) {
    p.src.write_key(w);
    p.dst.write_key(w);
  }
  using config = reorder_config;
  static config default_config(const desc& d, cpu_isa isa) {
    return default_reorder_config(d, isa);
  }
  static enumerated_configs<config> candidates(const desc& d, cpu_isa isa) {
    return reorder_config_candidates(d, isa);
  }
  static result<bool> validate(const desc& d, const config& c, cpu_isa isa) {
    return validate_reorder_config_for(d, c, isa);
  }
  static result<config> from_fields(const backend::kernel_config& f) {
    return reorder_config_from_fields(f);
  }
  // Tiered creation: the generic walk built into the library until the
  // specialized one is installed (tiered/tiered_impl.hpp); element by
  // element the same IR, so every configuration can be tiered, padded
  // layouts included (up to two padded dimensions; more are created
  // synchronously).
  using generic_kernel = generic_reorder_kernel;
  static std::shared_ptr<const backend::primitive_impl> create_tiered(
      std::shared_ptr<const kernel_pd<reorder_traits>> pd, const config& c, cpu_isa isa) {
    return make_tiered_impl<reorder_traits>(std::move(pd), c, isa);
  }
  static std::size_t specialized_scratchpad_bytes(const config&) { return 0; }
  // Kernel: reorder_kernel or generic_reorder_kernel (null: the reference).
  template <class Kernel>
  static void execute(const kernel_pd<reorder_traits>& pd, const exec_ctx& ctx, const Kernel* k) {
    reorder_args args;
    args.src = required_arg(ctx, PRIMCACHE_ARG_FROM, "reorder", "src");
    args.dst = required_arg(ctx, PRIMCACHE_ARG_TO, "reorder", "dst");
    // The executing primitive's scales: they are not part of the key.
    const auto& scales = ctx.run_time_attr(pd).get_output_scales();
    args.scales = scales.empty() ? nullptr : scales.data();
    if (k) {
      k->execute(args, ctx.scratchpad, default_thread_pool());
    } else {
      reorder_reference(pd.problem(), args);
    }
  }
};

result<std::shared_ptr<const primitive_desc_impl>> make_reorder_pd(const op_desc& desc,
                                                                   const primitive_attr& attr,
                                                                   const backend::engine_impl& eng,
                                                                   bool jit) {
  const reorder_op& op = std::get<reorder_op>(desc);
  if (op.src_engine != engine_kind::cpu || op.dst_engine != engine_kind::cpu) {
    return unimplemented("reorders across engines are not supported on cpu");
  }
  if (!attr.get_post_ops().entries().empty()) return unimplemented("post-ops on reorder");
  reorder_problem p;
  p.src = op.src;
  p.dst = op.dst;
  if (attr.has_output_scales()) {
    const int mask = attr.get_output_scales_mask();
    if (mask == 0) {
      p.scales = reorder_scales::common;
    } else {
      int d = 0;
      while ((mask >> d) != 1) ++d;
      if (d >= op.src.ndims()) {
        return failure{status::invalid_arguments, "output scales mask " + std::to_string(mask) +
                                                      " names dimension " + std::to_string(d) +
                                                      " of a " + std::to_string(op.src.ndims()) +
                                                      "-D tensor"};
      }
      const auto n = static_cast<std::size_t>(op.src.dims()[d]);
      if (attr.get_output_scales().size() != n) {
        return failure{status::invalid_arguments,
                       "output scales along dimension " + std::to_string(d) + " need " +
                           std::to_string(n) + " values, got " +
                           std::to_string(attr.get_output_scales().size())};
      }
      p.scales = reorder_scales::per_dim;
      p.scale_dim = d;
    }
  }
  p.nthr = get_num_threads();
  const cpu_isa isa = effective_isa();
  if (jit && isa < cpu_isa::avx2) return unimplemented("the JIT reorder needs avx2");
  if (auto ok = check_reorder_problem(p); !ok) return ok.why();
  const int nthr = p.nthr;
  return make_kernel_pd<reorder_traits>(attr, eng, jit, std::move(p), nthr, isa);
}

}  // namespace

void register_reorder_impls() {
  backend::register_implementation(
      {"jit:reorder", engine_kind::cpu, primitive_kind::reorder, 100,
       [](const op_desc& op, const primitive_attr& attr, const backend::engine_impl& e) {
         return make_reorder_pd(op, attr, e, true);
       }});
  backend::register_implementation(
      {"ref:reorder", engine_kind::cpu, primitive_kind::reorder, 0,
       [](const op_desc& op, const primitive_attr& attr, const backend::engine_impl& e) {
         return make_reorder_pd(op, attr, e, false);
       }});
}

}  // namespace primcache::cpu_internal
