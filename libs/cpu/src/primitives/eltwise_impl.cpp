// eltwise forward on the CPU:
//   "jit:eltwise"              src and dst in one layout: the generated kernel
//   "jit:eltwise:via_reorder"  different layouts: a nested reorder of src into
//                              dst's layout, then the eltwise in place on dst
//                              — both nested primitives come from the global
//                              primitive cache
//   "ref:eltwise"              plain loops, one layout
#include <memory>

#include "kernels/eltwise_config.hpp"
#include "kernels/eltwise_kernel.hpp"
#include "kernels/generic_eltwise_kernel.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primitives/cpu_engine.hpp"
#include "primitives/kernel_primitive.hpp"
#include "tiered/tiered_impl.hpp"

namespace primcache::cpu_internal {
namespace {

using backend::eltwise_fwd_op;
using backend::exec_ctx;
using backend::op_desc;
using backend::primitive_desc_impl;
using backend::primitive_impl;
using backend::primitive_kind;

result<eltwise_op> translate_alg(algorithm alg, float alpha, float beta) {
  primitive_attr one;
  post_ops ops;
  ops.append_eltwise(1.f, alg, alpha, beta);
  one.set_post_ops(ops);
  auto chain = translate_post_ops(one, memory_desc(), 0);
  if (!chain) return chain.why();
  return chain.value()[0].eltwise;
}

struct eltwise_traits {
  using desc = eltwise_problem;
  using kernel = eltwise_kernel;
  static constexpr primitive_kind kind = primitive_kind::eltwise;
  static constexpr const char* jit_name = "jit:eltwise";
  static constexpr const char* ref_name = "ref:eltwise";

  static const eltwise_problem& problem(const desc& d) { return d; }
  static memory_desc arg_md(const desc& p, int arg) {
    if (arg == PRIMCACHE_ARG_SRC) return p.src;
    if (arg == PRIMCACHE_ARG_DST) return p.dst;
    return {};
  }
  static void write_op_key(const desc& p, key_writer& w) {
    p.src.write_key(w);
    p.dst.write_key(w);
    w.enumeration(p.op.alg).f32(p.op.alpha).f32(p.op.beta);
  }
  using config = eltwise_config;
  static config default_config(const desc& d, cpu_isa isa) {
    return default_eltwise_config(d, isa);
  }
  static enumerated_configs<config> candidates(const desc& d, cpu_isa isa) {
    return eltwise_config_candidates(d, isa);
  }
  static result<bool> validate(const desc& d, const config& c, cpu_isa isa) {
    return validate_eltwise_config_for(d, c, isa);
  }
  static result<config> from_fields(const backend::kernel_config& f) {
    return eltwise_config_from_fields(f);
  }
  // Tiered creation: the generic kernel built into the library until the
  // specialized one is installed (tiered/tiered_impl.hpp). The generic walk
  // is the specialized one's, element by element the same IR, so every
  // configuration can be tiered, padded layouts included (up to two padded
  // dimensions; more are created synchronously).
  using generic_kernel = generic_eltwise_kernel;
  static std::shared_ptr<const backend::primitive_impl> create_tiered(
      std::shared_ptr<const kernel_pd<eltwise_traits>> pd, const config& c, cpu_isa isa) {
    return make_tiered_impl<eltwise_traits>(std::move(pd), c, isa);
  }
  static std::size_t specialized_scratchpad_bytes(const config&) { return 0; }
  // Kernel: eltwise_kernel or generic_eltwise_kernel (null: the reference).
  template <class Kernel>
  static void execute(const kernel_pd<eltwise_traits>& pd, const exec_ctx& ctx, const Kernel* k) {
    const eltwise_problem& p = pd.problem();
    // src's and dst's offset0 are the kernels' (the walk adds them); the
    // per-channel and scalar operands' are applied here.
    const auto operands = collect_binary_operands(ctx, pd.attr().get_post_ops(), p.post_ops,
                                                  dst_addressing::kernel_adds_offset0, "eltwise");
    eltwise_args args;
    args.src = required_arg(ctx, PRIMCACHE_ARG_SRC, "eltwise", "src");
    args.dst = required_arg(ctx, PRIMCACHE_ARG_DST, "eltwise", "dst");
    args.binary_operands = operands.data();
    if (k) {
      k->execute(args, ctx.scratchpad, default_thread_pool());
    } else {
      eltwise_reference(p, args);
    }
  }
};

// src → (nested reorder) → dst → (nested eltwise, in place) → dst.
class eltwise_via_reorder_pd final : public primitive_desc_impl {
 public:
  eltwise_via_reorder_pd(const primitive_attr& attr,
                         std::shared_ptr<const primitive_desc_impl> reorder,
                         std::shared_ptr<const primitive_desc_impl> eltwise)
      : primitive_desc_impl(primitive_kind::eltwise, attr, "jit:eltwise:via_reorder"),
        reorder_(std::move(reorder)),
        eltwise_(std::move(eltwise)) {}

  memory_desc arg_md(int arg) const override {
    if (arg == PRIMCACHE_ARG_SRC) return reorder_->arg_md(PRIMCACHE_ARG_FROM);
    if (arg == PRIMCACHE_ARG_DST) return eltwise_->arg_md(PRIMCACHE_ARG_DST);
    return {};
  }
  void write_op_key(key_writer& w) const override {
    // The nested keys name everything: the reorder's layouts and the
    // eltwise's algorithm, attributes and layout.
    w.raw(reorder_->cache_key().bytes());
    w.raw(eltwise_->cache_key().bytes());
  }
  std::shared_ptr<const primitive_impl> create_impl(const engine& eng) const override;

 protected:
  // The nested primitives from their blobs, through the global cache.
  std::shared_ptr<const primitive_impl> load_impl(const engine& eng,
                                                  const backend::impl_blob& blob) const override;

 private:
  std::shared_ptr<const primitive_desc_impl> reorder_;
  std::shared_ptr<const primitive_desc_impl> eltwise_;
};

class eltwise_via_reorder_impl final : public primitive_impl {
 public:
  eltwise_via_reorder_impl(std::shared_ptr<const primitive_desc_impl> pd,
                           std::shared_ptr<const primitive_impl> reorder,
                           std::shared_ptr<const primitive_impl> eltwise)
      : primitive_impl(std::move(pd)), reorder_(std::move(reorder)), eltwise_(std::move(eltwise)) {}

  std::vector<const primitive_impl*> nested() const override {
    return {reorder_.get(), eltwise_.get()};
  }
  std::size_t scratchpad_bytes() const override {
    return std::max(reorder_->scratchpad_bytes(), eltwise_->scratchpad_bytes());
  }
  void execute(const exec_ctx& ctx) const override {
    const memory* src = ctx.arg(PRIMCACHE_ARG_SRC);
    const memory* dst = ctx.arg(PRIMCACHE_ARG_DST);
    if (src == nullptr || dst == nullptr) {
      throw error(status::invalid_arguments, "eltwise: argument src or dst was not passed");
    }
    const std::unordered_map<int, memory> reorder_args = {{PRIMCACHE_ARG_FROM, *src},
                                                          {PRIMCACHE_ARG_TO, *dst}};
    reorder_->execute(ctx.nested(&reorder_args, ctx.scratchpad));
    std::unordered_map<int, memory> eltwise_args = *ctx.args;
    eltwise_args[PRIMCACHE_ARG_SRC] = *dst;
    eltwise_->execute(ctx.nested(&eltwise_args, ctx.scratchpad));
  }
  // No code of its own: the nested primitives' blobs.
  std::vector<std::uint8_t> serialize() const override {
    backend::impl_blob b;
    b.name = pd().name();
    const auto k = pd().cache_key().bytes();
    b.key_bytes.assign(k.begin(), k.end());
    b.nested = {reorder_->serialize(), eltwise_->serialize()};
    return b.encode();
  }

 private:
  std::shared_ptr<const primitive_impl> reorder_;
  std::shared_ptr<const primitive_impl> eltwise_;
};

std::shared_ptr<const primitive_impl> eltwise_via_reorder_pd::create_impl(const engine& eng) const {
  auto reorder = backend::create_nested_impl(*reorder_, eng);
  auto eltwise = backend::create_nested_impl(*eltwise_, eng);
  return std::make_shared<const eltwise_via_reorder_impl>(
      shared_from_this(), std::move(reorder.value), std::move(eltwise.value));
}

std::shared_ptr<const primitive_impl> eltwise_via_reorder_pd::load_impl(
    const engine& eng, const backend::impl_blob& blob) const {
  if (blob.nested.size() != 2 || !blob.object.empty()) {
    throw error(status::corrupt_data,
                std::string(name()) + " from a blob: expected two nested blobs and no code");
  }
  auto reorder = backend::create_nested_impl(*reorder_, eng, blob.nested[0]);
  auto eltwise = backend::create_nested_impl(*eltwise_, eng, blob.nested[1]);
  return std::make_shared<const eltwise_via_reorder_impl>(
      shared_from_this(), std::move(reorder.value), std::move(eltwise.value));
}

result<std::shared_ptr<const primitive_desc_impl>> make_eltwise_pd(const op_desc& desc,
                                                                   const primitive_attr& attr,
                                                                   const backend::engine_impl& eng,
                                                                   bool jit) {
  const eltwise_fwd_op& op = std::get<eltwise_fwd_op>(desc);
  if (attr.has_output_scales()) return unimplemented("output scales on eltwise");
  if (op.src.is_any()) return failure{status::invalid_arguments, "eltwise src cannot be any"};
  eltwise_problem p;
  p.src = op.src;
  p.dst = op.dst.is_any() ? op.src.with_data_type(op.dst.data_type()) : op.dst;
  if (!(p.src.with_data_type(data_type::f32).with_offset0(0) ==
        p.dst.with_data_type(data_type::f32).with_offset0(0))) {
    return unimplemented("src " + p.src.to_string() + " and dst " + p.dst.to_string() +
                         " differ in layout");
  }
  auto alg = translate_alg(op.alg, op.alpha, op.beta);
  if (!alg) return alg.why();
  p.op = alg.value();
  auto chain = translate_post_ops(attr, p.dst, 1);
  if (!chain) return chain.why();
  p.post_ops = std::move(chain).value();
  p.nthr = get_num_threads();
  const cpu_isa isa = effective_isa();
  if (jit && isa < cpu_isa::avx2) return unimplemented("the JIT eltwise needs avx2");
  if (auto ok = check_eltwise_problem(p); !ok) return ok.why();
  const int nthr = p.nthr;
  return make_kernel_pd<eltwise_traits>(attr, eng, jit, std::move(p), nthr, isa);
}

result<std::shared_ptr<const primitive_desc_impl>> make_eltwise_via_reorder_pd(
    const op_desc& desc, const primitive_attr& attr, const backend::engine_impl& eng) {
  const eltwise_fwd_op& op = std::get<eltwise_fwd_op>(desc);
  if (op.src.is_any() || op.dst.is_any()) return unimplemented("layouts are not both concrete");
  if (op.src.with_data_type(data_type::f32).with_offset0(0) ==
      op.dst.with_data_type(data_type::f32).with_offset0(0)) {
    return unimplemented("src and dst share a layout");
  }
  // The nested descriptors go through the registry like any other, so the
  // best reorder and eltwise implementations are chosen.
  const engine cpu(engine_kind::cpu, eng.index());
  try {
    auto reorder = backend::create_primitive_desc(
        backend::reorder_op{op.src, op.dst, engine_kind::cpu, engine_kind::cpu}, primitive_attr(),
        cpu);
    auto eltwise = backend::create_primitive_desc(
        eltwise_fwd_op{op.prop, op.alg, op.dst, op.dst, op.alpha, op.beta}, attr, cpu);
    auto pd =
        std::make_shared<eltwise_via_reorder_pd>(attr, std::move(reorder), std::move(eltwise));
    pd->finalize(eng, get_num_threads());
    return std::shared_ptr<const primitive_desc_impl>(std::move(pd));
  } catch (const error& e) {
    return failure{e.code(), e.message()};
  }
}

}  // namespace

void register_eltwise_impls() {
  backend::register_implementation(
      {"jit:eltwise", engine_kind::cpu, primitive_kind::eltwise, 100,
       [](const op_desc& op, const primitive_attr& attr, const backend::engine_impl& e) {
         return make_eltwise_pd(op, attr, e, true);
       }});
  backend::register_implementation(
      {"jit:eltwise:via_reorder", engine_kind::cpu, primitive_kind::eltwise, 50,
       [](const op_desc& op, const primitive_attr& attr, const backend::engine_impl& e) {
         return make_eltwise_via_reorder_pd(op, attr, e);
       }});
  backend::register_implementation(
      {"ref:eltwise", engine_kind::cpu, primitive_kind::eltwise, 0,
       [](const op_desc& op, const primitive_attr& attr, const backend::engine_impl& e) {
         return make_eltwise_pd(op, attr, e, false);
       }});
}

}  // namespace primcache::cpu_internal
