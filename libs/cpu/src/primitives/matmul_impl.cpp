// matmul on the CPU: "jit:matmul" (the generated kernel) and "ref:matmul"
// (plain loops, for what the kernel declines, e.g. hosts below AVX2).
#include <memory>

#include "kernels/matmul_kernel.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primitives/cpu_engine.hpp"

namespace primcache::cpu_internal {
namespace {

using runtime_internal::exec_ctx;
using runtime_internal::matmul_op;
using runtime_internal::op_desc;
using runtime_internal::primitive_desc_impl;
using runtime_internal::primitive_impl;
using runtime_internal::primitive_kind;

// `any` becomes row-major; concrete layouts stay as they are.
void resolve_plain(memory_desc& md) {
  if (!md.is_any()) return;
  static constexpr format_tag kRowMajor[] = {format_tag::a, format_tag::ab, format_tag::abc};
  md = memory_desc(md.dims(), md.data_type(), kRowMajor[md.ndims() - 1]);
}

class matmul_pd final : public primitive_desc_impl, public isa_bound_pd {
 public:
  matmul_pd(const primitive_attr& attr, const char* name, bool jit, matmul_op&& op,
            matmul_problem problem, cpu_isa isa)
      : primitive_desc_impl(primitive_kind::matmul, attr, name),
        isa_bound_pd(isa),
        jit_(jit),
        op_(std::move(op)),
        problem_(std::move(problem)),
        isa_(isa) {}

  memory_desc arg_md(int arg) const override {
    switch (arg) {
      case PRIMCACHE_ARG_SRC: return op_.src;
      case PRIMCACHE_ARG_WEIGHTS: return op_.weights;
      case PRIMCACHE_ARG_BIAS: return op_.bias;
      case PRIMCACHE_ARG_DST: return op_.dst;
      default: return {};
    }
  }
  void write_op_key(key_writer& w) const override {
    write_isa_key(w);
    op_.src.write_key(w);
    op_.weights.write_key(w);
    op_.bias.write_key(w);
    op_.dst.write_key(w);
  }
  std::shared_ptr<const primitive_impl> create_impl(const engine& eng) const override;

  const matmul_problem& problem() const noexcept { return problem_; }

 private:
  bool jit_;
  matmul_op op_;
  matmul_problem problem_;
  cpu_isa isa_;
};

class matmul_impl final : public primitive_impl {
 public:
  matmul_impl(std::shared_ptr<const matmul_pd> pd, std::unique_ptr<matmul_kernel> kernel)
      : primitive_impl(pd), pd_(std::move(pd)), kernel_(std::move(kernel)) {}

  std::size_t scratchpad_bytes() const override {
    return kernel_ ? kernel_->scratchpad_bytes() : 0;
  }
  void execute(const exec_ctx& ctx) const override {
    const matmul_problem& p = pd_->problem();
    const auto operands = collect_binary_operands(ctx, p.post_ops, "matmul");
    matmul_args args;
    args.src = static_cast<const float*>(required_arg(ctx, PRIMCACHE_ARG_SRC, "matmul", "src"));
    args.weights =
        static_cast<const float*>(required_arg(ctx, PRIMCACHE_ARG_WEIGHTS, "matmul", "weights"));
    args.bias =
        p.with_bias
            ? static_cast<const float*>(required_arg(ctx, PRIMCACHE_ARG_BIAS, "matmul", "bias"))
            : nullptr;
    args.dst = static_cast<float*>(required_arg(ctx, PRIMCACHE_ARG_DST, "matmul", "dst"));
    args.binary_operands = operands.data();
    if (kernel_) {
      kernel_->execute(args, ctx.scratchpad, default_thread_pool());
    } else {
      matmul_reference(p, args);
    }
  }

 private:
  std::shared_ptr<const matmul_pd> pd_;
  std::unique_ptr<matmul_kernel> kernel_;  // null for the reference
};

std::shared_ptr<const primitive_impl> matmul_pd::create_impl(const engine&) const {
  auto self = std::static_pointer_cast<const matmul_pd>(shared_from_this());
  if (!jit_) return std::make_shared<const matmul_impl>(self, nullptr);
  auto kernel = matmul_kernel::create(problem_, default_matmul_config(problem_, isa_), isa_);
  if (!kernel) throw_failure(kernel.why());
  return std::make_shared<const matmul_impl>(self, std::move(kernel).value());
}

result<std::shared_ptr<const primitive_desc_impl>> make_matmul_pd(
    const op_desc& desc, const primitive_attr& attr, const runtime_internal::engine_impl& eng,
    bool jit) {
  matmul_op op = std::get<matmul_op>(desc);
  resolve_plain(op.src);
  resolve_plain(op.weights);
  resolve_plain(op.dst);
  if (!op.bias.is_zero()) resolve_plain(op.bias);
  for (const memory_desc* md : {&op.src, &op.weights, &op.dst, &op.bias}) {
    if (md->is_zero()) continue;
    if (md->data_type() != data_type::f32) return unimplemented(md->to_string() + " is not f32");
    if (!md->is_plain()) return unimplemented(md->to_string() + " is not a plain layout");
  }
  if (attr.has_output_scales()) return unimplemented("output scales on matmul");
  const bool batched = op.src.ndims() == 3;
  matmul_problem p;
  auto s = op.src.strides(), w = op.weights.strides(), d = op.dst.strides();
  const int o = batched ? 1 : 0;  // index of the M/K dimension in the strides
  // The batch is dst's; src and weights each have it or broadcast a batch of 1.
  p.batch = batched ? op.dst.dims()[0] : 1;
  p.m = op.src.dims()[o];
  p.k = op.src.dims()[o + 1];
  p.n = op.weights.dims()[o + 1];
  const bool broadcast_src = batched && op.src.dims()[0] == 1 && p.batch > 1;
  p.src_strides = {batched && !broadcast_src ? s[0] : 0, s[o], s[o + 1]};
  const bool broadcast_weights = batched && op.weights.dims()[0] == 1 && p.batch > 1;
  p.wei_strides = {batched && !broadcast_weights ? w[0] : 0, w[o], w[o + 1]};
  p.dst_strides = {batched ? d[0] : 0, d[o], d[o + 1]};
  if (!op.bias.is_zero()) {
    if (!op.bias.is_dense()) return unimplemented("bias " + op.bias.to_string() + " is not dense");
    p.with_bias = true;
  }
  auto chain = translate_post_ops(attr, op.dst, op.dst.ndims() - 1);
  if (!chain) return chain.why();
  p.post_ops = std::move(chain).value();
  p.nthr = get_num_threads();
  const cpu_isa isa = effective_isa();
  if (jit && isa < cpu_isa::avx2) return unimplemented("the JIT matmul needs avx2");
  // Accept only what the kernel (or the reference) builds and runs.
  if (auto ok = check_matmul_problem(p, !jit); !ok) return ok.why();
  auto pd = std::make_shared<matmul_pd>(attr, jit ? "jit:matmul" : "ref:matmul", jit, std::move(op),
                                        std::move(p), isa);
  pd->finalize(eng, pd->problem().nthr);
  return std::shared_ptr<const primitive_desc_impl>(std::move(pd));
}

}  // namespace

void register_matmul_impls() {
  runtime_internal::register_implementation(
      {"jit:matmul", engine_kind::cpu, primitive_kind::matmul, 100,
       [](const op_desc& op, const primitive_attr& attr, const runtime_internal::engine_impl& e) {
         return make_matmul_pd(op, attr, e, true);
       }});
  runtime_internal::register_implementation(
      {"ref:matmul", engine_kind::cpu, primitive_kind::matmul, 0,
       [](const op_desc& op, const primitive_attr& attr, const runtime_internal::engine_impl& e) {
         return make_matmul_pd(op, attr, e, false);
       }});
}

}  // namespace primcache::cpu_internal
