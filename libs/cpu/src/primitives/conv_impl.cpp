// Convolution (forward inference) on the CPU: "jit:conv" and "ref:conv".
#include <memory>

#include "kernels/conv_config.hpp"
#include "kernels/conv_kernel.hpp"
#include "kernels/generic_conv_kernel.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primitives/constant_weights.hpp"
#include "primitives/cpu_engine.hpp"
#include "primitives/kernel_primitive.hpp"
#include "tiered/tiered_impl.hpp"

namespace primcache::cpu_internal {
namespace {

using backend::convolution_op;
using backend::exec_ctx;
using backend::op_desc;
using backend::primitive_desc_impl;
using backend::primitive_kind;

struct conv_traits {
  using desc = conv_problem;
  using kernel = conv_kernel;
  static constexpr primitive_kind kind = primitive_kind::convolution;
  static constexpr const char* jit_name = "jit:conv";
  static constexpr const char* ref_name = "ref:conv";

  static const conv_problem& problem(const desc& d) { return d; }
  static memory_desc arg_md(const desc& p, int arg) {
    switch (arg) {
      case PRIMCACHE_ARG_SRC: return p.src;
      case PRIMCACHE_ARG_WEIGHTS: return p.weights;
      case PRIMCACHE_ARG_BIAS: return p.bias;
      case PRIMCACHE_ARG_DST: return p.dst;
      default: return {};
    }
  }
  static void write_op_key(const desc& p, key_writer& w) {
    p.src.write_key(w);
    p.weights.write_key(w);
    p.bias.write_key(w);
    p.dst.write_key(w);
    w.i64(p.stride_h).i64(p.stride_w);
    w.i64(p.dilation_h).i64(p.dilation_w);
    w.i64(p.pad_t).i64(p.pad_l).i64(p.pad_b).i64(p.pad_r);
    w.i64(p.groups);
  }
  using config = conv_config;
  static config default_config(const desc& d, cpu_isa isa) { return default_conv_config(d, isa); }
  static enumerated_configs<config> candidates(const desc& d, cpu_isa isa) {
    return conv_config_candidates(d, isa);
  }
  static result<bool> validate(const desc& d, const config& c, cpu_isa isa) {
    return validate_conv_config_for(d, c, isa);
  }
  static result<config> from_fields(const backend::kernel_config& f) {
    return conv_config_from_fields(f);
  }
  // Tiered creation: the generic kernel built into the library until the
  // specialized one is installed (tiered/tiered_impl.hpp). A configuration
  // accumulates each output in the generic kernel's order (bias, then kh,
  // input channels, kw; depthwise: bias, then kh, kw) unless it has K
  // panels (ic_block) over a kernel of several rows
  // (conv_config_sums_as_generic): generic_conv_kernel::create declines
  // those and what else it lists, and they are created synchronously.
  // Every other configuration is tiered, depthwise convolutions included
  // (the generic kernel's depthwise tiles).
  using generic_kernel = generic_conv_kernel;
  static std::shared_ptr<const backend::primitive_impl> create_tiered(
      std::shared_ptr<const kernel_pd<conv_traits>> pd, const config& c, cpu_isa isa) {
    return make_tiered_impl<conv_traits>(std::move(pd), c, isa);
  }
  // The specialized kernel packs into its scratchpad exactly when the
  // generic one does (the same layouts are read in place), the same bytes.
  static std::size_t specialized_scratchpad_bytes(const config&) { return 0; }
  // Kernel: conv_kernel or generic_conv_kernel (null: the reference).
  //
  // Every tier adds the offset0 of src, weights and dst itself (the
  // problem's descriptors carry them); the bias, a dense vector read from
  // its first element, is advanced here by its offset0, before any tier
  // runs, as are per-channel and scalar binary operands.
  template <class Kernel>
  static void execute(const kernel_pd<conv_traits>& pd, const exec_ctx& ctx, const Kernel* k) {
    const conv_problem& p = pd.problem();
    const auto operands =
        collect_binary_operands(ctx, pd.attr().get_post_ops(), p.post_ops,
                                dst_addressing::kernel_adds_offset0, "convolution");
    conv_args args;
    args.src = required_arg(ctx, PRIMCACHE_ARG_SRC, "convolution", "src");
    args.weights = required_arg(ctx, PRIMCACHE_ARG_WEIGHTS, "convolution", "weights");
    args.bias = p.bias.is_zero() ? nullptr
                                 : static_cast<const float*>(required_arg(ctx, PRIMCACHE_ARG_BIAS,
                                                                          "convolution", "bias")) +
                                       p.bias.offset0();
    args.dst = required_arg(ctx, PRIMCACHE_ARG_DST, "convolution", "dst");
    args.binary_operands = operands.data();
    if (!k) {
      conv_reference(p, args);
      return;
    }
    thread_pool& pool = default_thread_pool();
    // Constant weights not in the kernel's layout are packed once into the
    // constant tensor cache. The generated code is the same either way, so
    // the flag is not in the key: it comes from the executing primitive's
    // attributes (the impl is shared by primitives with and without it).
    std::shared_ptr<const constant_buffer> packed;
    if (k->packs_weights() && ctx.run_time_attr(pd).get_constant_weights()) {
      packed = packed_constant_weights(
          ctx, "convolution", k->packed_bytes(), [&](key_writer& w) { k->write_packing_key(w); },
          [&](const float* user, float* out) { k->pack_weights(user, out, pool); },
          when_not_kept::decline);
      // Declined (the cache keeps nothing): the kernel packs as it goes.
      if (packed) args.packed_weights = packed->data_as<const float>();
    }
    k->execute(args, ctx.scratchpad, pool);
  }
};

memory_desc resolve_activation(const memory_desc& md) {
  if (!md.is_any()) return md;
  // Blocked channels when they fill whole blocks, else channels-last.
  return memory_desc(md.dims(), md.data_type(),
                     md.dims()[1] % 16 == 0 ? format_tag::nChw16c : format_tag::nhwc);
}

result<std::shared_ptr<const primitive_desc_impl>> make_conv_pd(const op_desc& desc,
                                                                const primitive_attr& attr,
                                                                const backend::engine_impl& eng,
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
  const int nthr = p.nthr;
  return make_kernel_pd<conv_traits>(attr, eng, jit, std::move(p), nthr, isa);
}

}  // namespace

void register_conv_impls() {
  backend::register_implementation(
      {"jit:conv", engine_kind::cpu, primitive_kind::convolution, 100,
       [](const op_desc& op, const primitive_attr& attr, const backend::engine_impl& e) {
         return make_conv_pd(op, attr, e, true);
       }});
  backend::register_implementation(
      {"ref:conv", engine_kind::cpu, primitive_kind::convolution, 0,
       [](const op_desc& op, const primitive_attr& attr, const backend::engine_impl& e) {
         return make_conv_pd(op, attr, e, false);
       }});
}

}  // namespace primcache::cpu_internal
