// Convolution on the CPU through a nested matmul: "jit:conv:via_matmul".
//
// A 1x1, stride-1, unpadded, undilated, ungrouped f32 convolution with
// channels-last (nhwc) activations is one matmul: src, N·H·W rows of IC
// channels, is the M x K matrix (M = N·H·W, K = IC) as it lies in memory;
// dst is M x OC the same way; the weights (OC, IC, 1, 1) in any plain
// layout are B = K x N with strides (weights' IC stride, weights' OC
// stride): oihw gives the transposed B (strides (1, IC)), which the JIT
// matmul packs. Bias (OC) is the matmul's (1, OC) bias; the post-ops are
// the matmul's, binary operands reshaped (scalar (1, 1), per channel
// (1, OC), a full nhwc dst-shaped operand (M, OC)). The constant-weights
// attribute goes to the matmul, which then packs the user's weights once
// into the constant tensor cache.
//
// The nested matmul descriptor is made through the registry (so the matmul
// implementation and its heuristic's configuration are chosen as for any
// matmul) and its impl comes from the global primitive cache; the blob
// carries the nested impl's blob. The configuration of this implementation
// is the nested matmul's (its default, its space, its validation), so it is
// a tuning candidate: registered below "jit:conv", it is created only when
// "jit:conv" declines or when a tune table names it the winner for the op
// (the registry's cross-implementation redirect, docs/autotune.md).
//
// When this descriptor's configuration is not the one the registry's
// matmul descriptor got (a tune table names another for the convolution),
// the nested matmul descriptor is made again with that configuration
// (make_jit_matmul_pd_with_config, which finalizes it with the
// configuration in its key): its impl is then created, cached, tiered and
// serialized like any matmul's. Only a tuning candidate (create_impl_with)
// holds a matmul impl of its own, never cached and not serializable.
//
// Declines (status::unimplemented, the direct convolution stays the
// choice): any other geometry, layout or type, `any` descriptors, output
// scales, binary operands it cannot reshape, and a nested matmul without
// configurations (ref:matmul on hosts below AVX2).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primitives/cpu_engine.hpp"

namespace primcache::cpu_internal {
namespace {

using backend::convolution_op;
using backend::exec_ctx;
using backend::matmul_op;
using backend::op_desc;
using backend::primitive_desc_impl;
using backend::primitive_impl;
using backend::primitive_kind;

constexpr const char* kName = "jit:conv:via_matmul";

class conv_via_matmul_pd final : public primitive_desc_impl {
 public:
  conv_via_matmul_pd(const primitive_attr& attr, const convolution_op& op,
                     std::shared_ptr<const primitive_desc_impl> matmul)
      : primitive_desc_impl(primitive_kind::convolution, attr, kName),
        op_(op),
        matmul_(std::move(matmul)) {}

  memory_desc arg_md(int arg) const override {
    switch (arg) {
      case PRIMCACHE_ARG_SRC: return op_.src;
      case PRIMCACHE_ARG_WEIGHTS: return op_.weights;
      case PRIMCACHE_ARG_BIAS: return op_.bias;
      case PRIMCACHE_ARG_DST: return op_.dst;
      default: return {};
    }
  }
  std::size_t scratchpad_bytes() const override { return matmul_->scratchpad_bytes(); }
  void write_op_key(key_writer& w) const override {
    // The convolution's descriptors, then the nested matmul's problem (its
    // op, attributes, ISA, threads; not its configuration: this
    // descriptor's is appended by finalize).
    op_.src.write_key(w);
    op_.weights.write_key(w);
    op_.bias.write_key(w);
    op_.dst.write_key(w);
    w.raw(matmul_->problem_key().bytes());
  }
  std::shared_ptr<const primitive_impl> create_impl(const engine& eng) const override;

  // The nested matmul's configurations.
  std::optional<backend::kernel_config> default_config() const override {
    return matmul_->config();
  }
  backend::config_space config_candidates() const override { return matmul_->config_candidates(); }
  result<bool> validate_config(const backend::kernel_config& cfg) const override {
    return matmul_->validate_config(cfg);
  }
  std::shared_ptr<const primitive_impl> create_impl_with(
      const engine& eng, const backend::kernel_config& cfg) const override;

  // Whether the configuration is the nested descriptor's; true for every
  // descriptor the factory returns (it remakes the nested one otherwise).
  bool nested_config() const { return config() == matmul_->config(); }

 protected:
  std::shared_ptr<const primitive_impl> load_impl(const engine& eng,
                                                  const backend::impl_blob& blob) const override;

 private:
  convolution_op op_;  // resolved: the descriptors are concrete
  std::shared_ptr<const primitive_desc_impl> matmul_;
};

class conv_via_matmul_impl final : public primitive_impl {
 public:
  conv_via_matmul_impl(std::shared_ptr<const primitive_desc_impl> pd,
                       std::shared_ptr<const primitive_impl> matmul, bool serializable)
      : primitive_impl(std::move(pd)), matmul_(std::move(matmul)), serializable_(serializable) {}

  std::vector<const primitive_impl*> nested() const override { return {matmul_.get()}; }
  std::size_t scratchpad_bytes() const override { return matmul_->scratchpad_bytes(); }
  std::optional<backend::kernel_config> config() const override { return matmul_->config(); }
  bool created_tiered() const override { return matmul_->created_tiered(); }
  void execute(const exec_ctx& ctx) const override {
    // The matmul reads the same arguments under the same indices (only
    // their buffers; the constant weights by the user's memory's id), and
    // its own attributes (the convolution's post-ops, reshaped).
    matmul_->execute(ctx.nested(ctx.args, ctx.scratchpad));
  }
  // No code of its own: the nested matmul's blob.
  std::vector<std::uint8_t> serialize() const override {
    if (!serializable_) {
      throw error(status::unimplemented, std::string(kName) +
                                             " with a configuration other than its nested matmul " +
                                             "descriptor's cannot be serialized into a blob");
    }
    backend::impl_blob b;
    b.name = pd().name();
    const auto k = pd().cache_key().bytes();
    b.key_bytes.assign(k.begin(), k.end());
    b.config = pd().config();
    b.nested = {matmul_->serialize()};
    return b.encode();
  }

 private:
  std::shared_ptr<const primitive_impl> matmul_;
  bool serializable_;
};

std::shared_ptr<const primitive_impl> conv_via_matmul_pd::create_impl(const engine& eng) const {
  if (!nested_config()) {
    throw error(status::runtime_error, std::string(kName) + ": the nested matmul descriptor's " +
                                           "configuration is not this descriptor's");
  }
  auto matmul = backend::create_nested_impl(*matmul_, eng);
  return std::make_shared<const conv_via_matmul_impl>(shared_from_this(), std::move(matmul.value),
                                                      true);
}

std::shared_ptr<const primitive_impl> conv_via_matmul_pd::create_impl_with(
    const engine& eng, const backend::kernel_config& cfg) const {
  return std::make_shared<const conv_via_matmul_impl>(shared_from_this(),
                                                      matmul_->create_impl_with(eng, cfg), false);
}

std::shared_ptr<const primitive_impl> conv_via_matmul_pd::load_impl(
    const engine& eng, const backend::impl_blob& blob) const {
  const std::string who = std::string(kName) + " from a blob";
  if (blob.nested.size() != 1 || !blob.object.empty()) {
    throw error(status::corrupt_data, who + ": expected one nested blob and no code");
  }
  if (!nested_config()) {
    throw error(status::invalid_arguments,
                who + ": the configuration is not the nested matmul descriptor's");
  }
  auto matmul = backend::create_nested_impl(*matmul_, eng, blob.nested[0]);
  return std::make_shared<const conv_via_matmul_impl>(shared_from_this(), std::move(matmul.value),
                                                      true);
}

// Whether `md` is dense channels-last (acdb) at offset 0.
bool dense_nhwc(const memory_desc& md) {
  return md.ndims() == 4 && md.matches(format_tag::nhwc) && md.offset0() == 0;
}

// The convolution's post-ops for the matmul: binary operands as 2-D
// (rows M = N·H·W, columns OC) descriptors over the same memory.
result<post_ops> matmul_post_ops(const post_ops& conv, const memory_desc& dst, std::int64_t m) {
  const std::int64_t oc = dst.dims()[1];
  post_ops out;
  for (const post_ops::entry& e : conv.entries()) {
    if (e.kind == post_ops::kind::eltwise) {
      out.append_eltwise(e.scale, e.alg, e.alpha, e.beta);
      continue;
    }
    const memory_desc& s = e.src1;
    if (s.ndims() != 4 || !s.is_plain() || s.offset0() != 0 || s.data_type() != data_type::f32) {
      return unimplemented("binary post-op operand " + s.to_string() + " is not a plain f32 " +
                           "4-D tensor at offset 0");
    }
    const auto d = s.dims();
    if (d[0] == 1 && d[1] == 1 && d[2] == 1 && d[3] == 1) {
      out.append_binary(e.alg, memory_desc({1, 1}, data_type::f32, format_tag::ab));
    } else if (d[0] == 1 && d[1] == oc && d[2] == 1 && d[3] == 1 && s.strides()[1] == 1) {
      out.append_binary(e.alg, memory_desc({1, oc}, data_type::f32, format_tag::ab));
    } else if (s == dst) {
      out.append_binary(e.alg, memory_desc({m, oc}, data_type::f32, format_tag::ab));
    } else {
      return unimplemented("binary post-op operand " + s.to_string() +
                           " is neither a scalar, a dense per-channel vector nor laid out as dst");
    }
  }
  return out;
}

result<std::shared_ptr<const primitive_desc_impl>> make_conv_via_matmul_pd(
    const op_desc& desc, const primitive_attr& attr, const backend::engine_impl& eng) {
  convolution_op op = std::get<convolution_op>(desc);
  if (attr.has_output_scales()) return unimplemented("output scales on convolution");
  if (op.grouped()) return unimplemented("a grouped convolution");
  if (op.src.is_any() || op.dst.is_any() || op.weights.is_any()) {
    // The direct convolution resolves `any` to its own layouts.
    return unimplemented("src, weights or dst is any");
  }
  if (!op.bias.is_zero() && op.bias.is_any()) {
    op.bias = memory_desc(op.bias.dims(), op.bias.data_type(), format_tag::a);  // as jit:conv
  }
  for (const memory_desc* md : {&op.src, &op.weights, &op.dst, &op.bias}) {
    if (!md->is_zero() && md->data_type() != data_type::f32) {
      return unimplemented(md->to_string() + " is not f32");
    }
  }
  if (op.strides[0] != 1 || op.strides[1] != 1 || op.dilates[0] != 0 || op.dilates[1] != 0 ||
      op.padding_l[0] != 0 || op.padding_l[1] != 0 || op.padding_r[0] != 0 ||
      op.padding_r[1] != 0) {
    return unimplemented("not stride 1, undilated and unpadded");
  }
  const auto w = op.weights.dims();
  if (op.weights.ndims() != 4 || w[2] != 1 || w[3] != 1) return unimplemented("not a 1x1 kernel");
  if (!op.weights.is_plain() || op.weights.offset0() != 0) {
    return unimplemented("weights " + op.weights.to_string() + " are not plain at offset 0");
  }
  if (!dense_nhwc(op.src) || !dense_nhwc(op.dst)) {
    return unimplemented("src " + op.src.to_string() + " and dst " + op.dst.to_string() +
                         " are not both dense nhwc");
  }
  const auto s = op.src.dims(), d = op.dst.dims();
  const std::int64_t oc = w[0], ic = w[1];
  if (s[1] != ic || d[0] != s[0] || d[1] != oc || d[2] != s[2] || d[3] != s[3]) {
    return failure{status::invalid_arguments, "convolution src " + op.src.to_string() +
                                                  ", weights " + op.weights.to_string() +
                                                  " and dst " + op.dst.to_string() + " disagree"};
  }
  if (!op.bias.is_zero() &&
      (op.bias.ndims() != 1 || op.bias.dims()[0] != oc || !op.bias.is_plain() ||
       op.bias.strides()[0] != 1 || op.bias.offset0() != 0)) {
    return unimplemented("bias " + op.bias.to_string() + " is not a dense (OC) vector");
  }
  const std::int64_t m = s[0] * s[2] * s[3];
  auto ops = matmul_post_ops(attr.get_post_ops(), op.dst, m);
  if (!ops) return ops.why();

  matmul_op mm;
  mm.src = memory_desc({m, ic}, data_type::f32, format_tag::ab);
  const auto ws = op.weights.strides();
  mm.weights = memory_desc({ic, oc}, data_type::f32, {ws[1], ws[0]});
  if (!op.bias.is_zero()) mm.bias = memory_desc({1, oc}, data_type::f32, format_tag::ab);
  mm.dst = memory_desc({m, oc}, data_type::f32, format_tag::ab);
  primitive_attr mattr;
  mattr.set_post_ops(std::move(ops).value());
  mattr.set_constant_weights(attr.get_constant_weights());

  const engine cpu(engine_kind::cpu, eng.index());
  try {
    // Through the registry, as any matmul (never redirected by a tune
    // table: it is a nested creation).
    auto matmul = backend::create_primitive_desc(mm, mattr, cpu);
    if (!matmul->config()) {
      return unimplemented(std::string("the nested matmul is ") + matmul->name() +
                           ", which has no configurations");
    }
    auto pd = std::make_shared<conv_via_matmul_pd>(attr, op, matmul);
    const int nthr = get_num_threads();
    pd->finalize(eng, nthr);
    if (pd->nested_config()) return std::shared_ptr<const primitive_desc_impl>(std::move(pd));
    // A configuration the nested descriptor does not have (a tune table's
    // for this convolution): the nested matmul is made with it, so that it
    // is cached and serialized under its own key like any matmul.
    const backend::kernel_config cfg = *pd->config();
    auto forced = make_jit_matmul_pd_with_config(mm, mattr, backend::impl_of(cpu), cfg);
    if (!forced) return forced.why();
    auto remade = std::make_shared<conv_via_matmul_pd>(attr, op, std::move(forced).value());
    remade->finalize_with_config(eng, nthr, cfg);
    return std::shared_ptr<const primitive_desc_impl>(std::move(remade));
  } catch (const error& e) {
    return failure{e.code(), e.message()};
  }
}

}  // namespace

void register_conv_via_matmul_impls() {
  // Below "jit:conv" (100): chosen only where the direct convolution
  // declines, or where tuning recorded it the winner for the op.
  backend::register_implementation(
      {kName, engine_kind::cpu, primitive_kind::convolution, 50,
       [](const op_desc& op, const primitive_attr& attr, const backend::engine_impl& e) {
         return make_conv_via_matmul_pd(op, attr, e);
       }});
}

}  // namespace primcache::cpu_internal
