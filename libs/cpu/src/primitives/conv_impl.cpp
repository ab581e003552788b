// Convolution (forward inference) on the CPU: "jit:conv" and "ref:conv".
#include <memory>

#include "kernels/conv_kernel.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primitives/cpu_engine.hpp"

namespace primcache::cpu_internal {
namespace {

using runtime_internal::convolution_op;
using runtime_internal::exec_ctx;
using runtime_internal::op_desc;
using runtime_internal::primitive_desc_impl;
using runtime_internal::primitive_impl;
using runtime_internal::primitive_kind;

class conv_pd final : public primitive_desc_impl, public isa_bound_pd {
 public:
  conv_pd(const primitive_attr& attr, const char* name, bool jit, conv_problem p, cpu_isa isa)
      : primitive_desc_impl(primitive_kind::convolution, attr, name),
        isa_bound_pd(isa),
        jit_(jit),
        problem_(std::move(p)),
        isa_(isa) {}

  memory_desc arg_md(int arg) const override {
    switch (arg) {
      case PRIMCACHE_ARG_SRC: return problem_.src;
      case PRIMCACHE_ARG_WEIGHTS: return problem_.weights;
      case PRIMCACHE_ARG_BIAS: return problem_.bias;
      case PRIMCACHE_ARG_DST: return problem_.dst;
      default: return {};
    }
  }
  void write_op_key(key_writer& w) const override {
    write_isa_key(w);
    problem_.src.write_key(w);
    problem_.weights.write_key(w);
    problem_.bias.write_key(w);
    problem_.dst.write_key(w);
    w.i64(problem_.stride_h).i64(problem_.stride_w);
    w.i64(problem_.dilation_h).i64(problem_.dilation_w);
    w.i64(problem_.pad_t).i64(problem_.pad_l).i64(problem_.pad_b).i64(problem_.pad_r);
    w.i64(problem_.groups);
  }
  std::shared_ptr<const primitive_impl> create_impl(const engine& eng) const override;
  const conv_problem& problem() const noexcept { return problem_; }

 private:
  bool jit_;
  conv_problem problem_;
  cpu_isa isa_;
};

class conv_impl final : public primitive_impl {
 public:
  conv_impl(std::shared_ptr<const conv_pd> pd, std::unique_ptr<conv_kernel> kernel)
      : primitive_impl(pd), pd_(std::move(pd)), kernel_(std::move(kernel)) {}

  std::size_t scratchpad_bytes() const override {
    return kernel_ ? kernel_->scratchpad_bytes() : 0;
  }
  void execute(const exec_ctx& ctx) const override {
    const conv_problem& p = pd_->problem();
    const auto operands = collect_binary_operands(ctx, p.post_ops, "convolution");
    conv_args args;
    args.src = required_arg(ctx, PRIMCACHE_ARG_SRC, "convolution", "src");
    args.weights = required_arg(ctx, PRIMCACHE_ARG_WEIGHTS, "convolution", "weights");
    args.bias =
        p.bias.is_zero() ? nullptr : required_arg(ctx, PRIMCACHE_ARG_BIAS, "convolution", "bias");
    args.dst = required_arg(ctx, PRIMCACHE_ARG_DST, "convolution", "dst");
    args.binary_operands = operands.data();
    if (kernel_) {
      kernel_->execute(args, ctx.scratchpad, default_thread_pool());
    } else {
      conv_reference(p, args);
    }
  }

 private:
  std::shared_ptr<const conv_pd> pd_;
  std::unique_ptr<conv_kernel> kernel_;
};

std::shared_ptr<const primitive_impl> conv_pd::create_impl(const engine&) const {
  auto self = std::static_pointer_cast<const conv_pd>(shared_from_this());
  if (!jit_) return std::make_shared<const conv_impl>(self, nullptr);
  auto kernel = conv_kernel::create(problem_, default_conv_config(problem_, isa_), isa_);
  if (!kernel) throw_failure(kernel.why());
  return std::make_shared<const conv_impl>(self, std::move(kernel).value());
}

memory_desc resolve_activation(const memory_desc& md) {
  if (!md.is_any()) return md;
  // Blocked channels when they fill whole blocks, else channels-last.
  return memory_desc(md.dims(), md.data_type(),
                     md.dims()[1] % 16 == 0 ? format_tag::nChw16c : format_tag::nhwc);
}

result<std::shared_ptr<const primitive_desc_impl>> make_conv_pd(
    const op_desc& desc, const primitive_attr& attr, const runtime_internal::engine_impl& eng,
    bool jit) {
  const convolution_op& op = std::get<convolution_op>(desc);
  if (attr.has_output_scales()) return unimplemented("output scales on convolution");
  conv_problem p;
  p.src = resolve_activation(op.src);
  p.dst = resolve_activation(op.dst);
  p.bias = op.bias;
  if (!p.bias.is_zero() && p.bias.is_any()) {
    p.bias = memory_desc(p.bias.dims(), p.bias.data_type(), format_tag::a);
  }
  p.stride_h = op.strides[0];
  p.stride_w = op.strides[1];
  p.dilation_h = op.dilates[0];
  p.dilation_w = op.dilates[1];
  p.pad_t = op.padding_l[0];
  p.pad_l = op.padding_l[1];
  p.pad_b = op.padding_r[0];
  p.pad_r = op.padding_r[1];
  p.groups = op.grouped() ? op.weights.dims()[0] : 1;
  p.weights = op.weights;
  if (p.weights.is_any()) {
    // Dims are what the preferred layout needs; the layout comes from it.
    p.weights = memory_desc(op.weights.dims(), op.weights.data_type(),
                            op.grouped() ? format_tag::goihw : format_tag::oihw);
    auto preferred = preferred_weights_desc(p);
    if (!preferred) return preferred.why();
    p.weights = preferred.value();
  }
  for (const memory_desc* md : {&p.src, &p.weights, &p.dst, &p.bias}) {
    if (!md->is_zero() && md->data_type() != data_type::f32) {
      return unimplemented(md->to_string() + " is not f32");
    }
  }
  auto chain = translate_post_ops(attr, p.dst, 1);
  if (!chain) return chain.why();
  p.post_ops = std::move(chain).value();
  p.nthr = get_num_threads();
  const cpu_isa isa = effective_isa();
  if (jit && isa < cpu_isa::avx2) return unimplemented("the JIT convolution needs avx2");
  // Accept only what the kernel and the reference handle (layouts, types).
  if (auto ok = check_conv_problem(p); !ok) return ok.why();
  auto pd = std::make_shared<conv_pd>(attr, jit ? "jit:conv" : "ref:conv", jit, std::move(p), isa);
  pd->finalize(eng, pd->problem().nthr);
  return std::shared_ptr<const primitive_desc_impl>(std::move(pd));
}

}  // namespace

void register_conv_impls() {
  runtime_internal::register_implementation(
      {"jit:conv", engine_kind::cpu, primitive_kind::convolution, 100,
       [](const op_desc& op, const primitive_attr& attr, const runtime_internal::engine_impl& e) {
         return make_conv_pd(op, attr, e, true);
       }});
  runtime_internal::register_implementation(
      {"ref:conv", engine_kind::cpu, primitive_kind::convolution, 0,
       [](const op_desc& op, const primitive_attr& attr, const runtime_internal::engine_impl& e) {
         return make_conv_pd(op, attr, e, false);
       }});
}

}  // namespace primcache::cpu_internal
