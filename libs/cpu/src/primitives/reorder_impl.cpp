// reorder on the CPU: "jit:reorder" and "ref:reorder" (plain loops).
#include <memory>

#include "kernels/reorder_kernel.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primitives/cpu_engine.hpp"

namespace primcache::cpu_internal {
namespace {

using runtime_internal::exec_ctx;
using runtime_internal::op_desc;
using runtime_internal::primitive_desc_impl;
using runtime_internal::primitive_impl;
using runtime_internal::primitive_kind;
using runtime_internal::reorder_op;

class reorder_pd final : public primitive_desc_impl, public isa_bound_pd {
 public:
  reorder_pd(const primitive_attr& attr, const char* name, bool jit, reorder_problem p, cpu_isa isa)
      : primitive_desc_impl(primitive_kind::reorder, attr, name),
        isa_bound_pd(isa),
        jit_(jit),
        problem_(std::move(p)),
        isa_(isa) {}

  memory_desc arg_md(int arg) const override {
    if (arg == PRIMCACHE_ARG_FROM) return problem_.src;
    if (arg == PRIMCACHE_ARG_TO) return problem_.dst;
    return {};
  }
  void write_op_key(key_writer& w) const override {
    write_isa_key(w);
    problem_.src.write_key(w);
    problem_.dst.write_key(w);
  }
  std::shared_ptr<const primitive_impl> create_impl(const engine& eng) const override;
  const reorder_problem& problem() const noexcept { return problem_; }

 private:
  bool jit_;
  reorder_problem problem_;
  cpu_isa isa_;
};

class reorder_impl final : public primitive_impl {
 public:
  reorder_impl(std::shared_ptr<const reorder_pd> pd, std::unique_ptr<reorder_kernel> kernel)
      : primitive_impl(pd), pd_(std::move(pd)), kernel_(std::move(kernel)) {}

  void execute(const exec_ctx& ctx) const override {
    reorder_args args;
    args.src = required_arg(ctx, PRIMCACHE_ARG_FROM, "reorder", "src");
    args.dst = required_arg(ctx, PRIMCACHE_ARG_TO, "reorder", "dst");
    // The executing primitive's scales: they are not part of the key.
    const auto& scales = ctx.run_time_attr(*pd_).get_output_scales();
    args.scales = scales.empty() ? nullptr : scales.data();
    if (kernel_) {
      kernel_->execute(args, ctx.scratchpad, default_thread_pool());
    } else {
      reorder_reference(pd_->problem(), args);
    }
  }

 private:
  std::shared_ptr<const reorder_pd> pd_;
  std::unique_ptr<reorder_kernel> kernel_;
};

std::shared_ptr<const primitive_impl> reorder_pd::create_impl(const engine&) const {
  auto self = std::static_pointer_cast<const reorder_pd>(shared_from_this());
  if (!jit_) return std::make_shared<const reorder_impl>(self, nullptr);
  auto kernel = reorder_kernel::create(problem_, default_reorder_config(problem_, isa_), isa_);
  if (!kernel) throw_failure(kernel.why());
  return std::make_shared<const reorder_impl>(self, std::move(kernel).value());
}

result<std::shared_ptr<const primitive_desc_impl>> make_reorder_pd(
    const op_desc& desc, const primitive_attr& attr, const runtime_internal::engine_impl& eng,
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
  auto pd = std::make_shared<reorder_pd>(attr, jit ? "jit:reorder" : "ref:reorder", jit,
                                         std::move(p), isa);
  pd->finalize(eng, pd->problem().nthr);
  return std::shared_ptr<const primitive_desc_impl>(std::move(pd));
}

}  // namespace

void register_reorder_impls() {
  runtime_internal::register_implementation(
      {"jit:reorder", engine_kind::cpu, primitive_kind::reorder, 100,
       [](const op_desc& op, const primitive_attr& attr, const runtime_internal::engine_impl& e) {
         return make_reorder_pd(op, attr, e, true);
       }});
  runtime_internal::register_implementation(
      {"ref:reorder", engine_kind::cpu, primitive_kind::reorder, 0,
       [](const op_desc& op, const primitive_attr& attr, const runtime_internal::engine_impl& e) {
         return make_reorder_pd(op, attr, e, false);
       }});
}

}  // namespace primcache::cpu_internal
