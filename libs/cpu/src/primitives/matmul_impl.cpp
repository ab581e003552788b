// matmul on the CPU: "jit:matmul" (the generated kernel) and "ref:matmul"
// (plain loops, for what the kernel declines, e.g. hosts below AVX2).
#include <memory>

#include "kernels/generic_matmul_kernel.hpp"
#include "kernels/matmul_config.hpp"
#include "kernels/matmul_kernel.hpp"
#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primitives/constant_weights.hpp"
#include "primitives/cpu_engine.hpp"
#include "primitives/kernel_primitive.hpp"
#include "tiered/tiered_impl.hpp"

namespace primcache::cpu_internal {
namespace {

using backend::exec_ctx;
using backend::matmul_op;
using backend::op_desc;
using backend::primitive_desc_impl;
using backend::primitive_kind;

// `any` becomes row-major; concrete layouts stay as they are.
void resolve_plain(memory_desc& md) {
  if (!md.is_any()) return;
  static constexpr format_tag kRowMajor[] = {format_tag::a, format_tag::ab, format_tag::abc};
  md = memory_desc(md.dims(), md.data_type(), kRowMajor[md.ndims() - 1]);
}

// What a matmul descriptor keeps: the op (its descriptors name the
// arguments and enter the key) and the kernel's problem.
struct matmul_desc {
  matmul_op op;
  matmul_problem problem;
};

struct matmul_traits {
  using desc = matmul_desc;
  using kernel = matmul_kernel;
  static constexpr primitive_kind kind = primitive_kind::matmul;
  static constexpr const char* jit_name = "jit:matmul";
  static constexpr const char* ref_name = "ref:matmul";

  static const matmul_problem& problem(const desc& d) { return d.problem; }
  static memory_desc arg_md(const desc& d, int arg) {
    switch (arg) {
      case PRIMCACHE_ARG_SRC: return d.op.src;
      case PRIMCACHE_ARG_WEIGHTS: return d.op.weights;
      case PRIMCACHE_ARG_BIAS: return d.op.bias;
      case PRIMCACHE_ARG_DST: return d.op.dst;
      default: return {};
    }
  }
  static void write_op_key(const desc& d, key_writer& w) {
    d.op.src.write_key(w);
    d.op.weights.write_key(w);
    d.op.bias.write_key(w);
    d.op.dst.write_key(w);
    // Constant weights change the code (it reads prepacked weights), so the
    // key says so; written only then, so other keys keep their bytes.
    if (d.problem.prepacked_weights) w.str("prepacked_weights");
  }
  using config = matmul_config;
  static config default_config(const desc& d, cpu_isa isa) {
    return default_matmul_config(d.problem, isa);
  }
  static enumerated_configs<config> candidates(const desc& d, cpu_isa isa) {
    return matmul_config_candidates(d.problem, isa);
  }
  static result<bool> validate(const desc& d, const config& c, cpu_isa isa) {
    return validate_matmul_config_for(d.problem, c, isa);
  }
  static result<config> from_fields(const backend::kernel_config& f) {
    return matmul_config_from_fields(f);
  }
  // Tiered creation: the generic kernel built into the library until the
  // specialized one is installed (tiered/tiered_impl.hpp). Every matmul
  // configuration accumulates each output over k in order, so every
  // configuration can be tiered.
  using generic_kernel = generic_matmul_kernel;
  static std::shared_ptr<const backend::primitive_impl> create_tiered(
      std::shared_ptr<const kernel_pd<matmul_traits>> pd, const config& c, cpu_isa isa) {
    return make_tiered_impl<matmul_traits>(std::move(pd), c, isa);
  }
  static std::size_t specialized_scratchpad_bytes(const config& c) {
    return matmul_pack_slot_bytes(c) * static_cast<std::size_t>(c.thr_m * c.thr_n);
  }
  // Kernel: matmul_kernel or generic_matmul_kernel (null: the reference).
  //
  // The kernels and the reference address every tensor from its element 0
  // (matmul_problem has strides, no offsets): each pointer is advanced here
  // by its descriptor's offset0, before any tier runs. The offsets are in
  // the descriptors, hence in the key; the code does not depend on them.
  template <class Kernel>
  static void execute(const kernel_pd<matmul_traits>& pd, const exec_ctx& ctx, const Kernel* k) {
    const matmul_problem& p = pd.problem();
    const matmul_op& op = pd.desc().op;
    const auto operands = collect_binary_operands(ctx, pd.attr().get_post_ops(), p.post_ops,
                                                  dst_addressing::caller_advances, "matmul");
    matmul_args args;
    args.src = static_cast<const float*>(required_arg(ctx, PRIMCACHE_ARG_SRC, "matmul", "src")) +
               op.src.offset0();
    args.weights =
        static_cast<const float*>(required_arg(ctx, PRIMCACHE_ARG_WEIGHTS, "matmul", "weights")) +
        op.weights.offset0();
    args.bias =
        p.with_bias
            ? static_cast<const float*>(required_arg(ctx, PRIMCACHE_ARG_BIAS, "matmul", "bias")) +
                  op.bias.offset0()
            : nullptr;
    args.dst = static_cast<float*>(required_arg(ctx, PRIMCACHE_ARG_DST, "matmul", "dst")) +
               op.dst.offset0();
    args.binary_operands = operands.data();
    if (!k) {
      matmul_reference(p, args);
      return;
    }
    thread_pool& pool = default_thread_pool();
    if (!p.prepacked_weights) {
      k->execute(args, ctx.scratchpad, pool);
      return;
    }
    // Constant weights: packed once into the constant tensor cache (or for
    // this call when the cache keeps nothing); held until the call returns.
    const matmul_packing packing = matmul_packing::of(p, k->config());
    // The packed bytes are those of the weights from their element 0: the
    // offset joins the packing key (written only when there is one).
    const std::int64_t wei_offset0 = op.weights.offset0();
    const auto packed = packed_constant_weights(
        ctx, "matmul", packing.bytes(),
        [&](key_writer& w) {
          packing.write_key(w);
          if (wei_offset0 != 0) w.str("offset0").i64(wei_offset0);
        },
        [&](const float* user, float* out) {
          matmul_pack_weights(packing, user + wei_offset0, out, pool);
        },
        when_not_kept::pack_for_this_call);
    args.weights = packed->template data_as<const float>();
    k->execute(args, ctx.scratchpad, pool);
  }
};

result<std::shared_ptr<const primitive_desc_impl>> make_matmul_pd(
    const op_desc& desc, const primitive_attr& attr, const backend::engine_impl& eng, bool jit,
    const backend::kernel_config* forced = nullptr) {
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
  // The kernel reads constant weights prepacked (the reference reads them
  // as they are) — unless the constant tensor cache keeps nothing, where
  // prepacking would mean packing on every call: then the code that reads
  // them as they are is faster. (The primitive-descriptor cache keys on
  // that state too; a cache that fills up later is handled at execution.)
  p.prepacked_weights = jit && attr.get_constant_weights() && cpu_constant_cache().capacity() != 0;
  const cpu_isa isa = effective_isa();
  if (jit && isa < cpu_isa::avx2) return unimplemented("the JIT matmul needs avx2");
  // Accept only what the kernel (or the reference) builds and runs.
  if (auto ok = check_matmul_problem(p, !jit); !ok) return ok.why();
  const int nthr = p.nthr;
  return make_kernel_pd<matmul_traits>(attr, eng, jit, matmul_desc{std::move(op), std::move(p)},
                                       nthr, isa, forced);
}

}  // namespace

result<std::shared_ptr<const primitive_desc_impl>> make_jit_matmul_pd_with_config(
    const matmul_op& op, const primitive_attr& attr, const backend::engine_impl& eng,
    const backend::kernel_config& cfg) {
  return make_matmul_pd(op, attr, eng, true, &cfg);
}

void register_matmul_impls() {
  backend::register_implementation(
      {"jit:matmul", engine_kind::cpu, primitive_kind::matmul, 100,
       [](const op_desc& op, const primitive_attr& attr, const backend::engine_impl& e) {
         return make_matmul_pd(op, attr, e, true);
       }});
  backend::register_implementation(
      {"ref:matmul", engine_kind::cpu, primitive_kind::matmul, 0,
       [](const op_desc& op, const primitive_attr& attr, const backend::engine_impl& e) {
         return make_matmul_pd(op, attr, e, false);
       }});
}

}  // namespace primcache::cpu_internal
