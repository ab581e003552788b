// eltwise forward on an OpenCL device ("ocl:eltwise"): f32, any resolved
// layouts for src and dst (each addressed through its own strides and
// blocks), every eltwise algorithm of the runtime, and post-ops (an eltwise
// chain with scales, binary add with broadcast) applied before the store.
// A blocked dst's padding is written as zero.
#include "kernel_primitive.hpp"
#include "kernels/eltwise_source.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primitives/post_op_translation.hpp"
#include "primitives/registration.hpp"

namespace primcache::ocl_internal {
namespace {

using backend::eltwise_fwd_op;
using backend::primitive_kind;

result<std::shared_ptr<const backend::primitive_desc_impl>> make_eltwise_pd(
    const backend::op_desc& desc, const primitive_attr& attr, const backend::engine_impl& eng) {
  const eltwise_fwd_op& op = std::get<eltwise_fwd_op>(desc);
  if (attr.has_output_scales()) return unimplemented("output scales on OpenCL eltwise");
  if (op.src.is_any()) return failure{status::invalid_arguments, "eltwise src cannot be any"};
  if (!eltwise_supported(op.alg)) {
    return unimplemented("OpenCL eltwise algorithm " + std::string(to_string(op.alg)));
  }
  eltwise_problem p;
  p.src = op.src;
  p.dst = op.dst.is_any() ? op.src.with_data_type(op.dst.data_type()) : op.dst;
  if (p.src.data_type() != data_type::f32 || p.dst.data_type() != data_type::f32) {
    return unimplemented("OpenCL eltwise supports f32 only");
  }
  p.alg = op.alg;
  p.alpha = op.alpha;
  p.beta = op.beta;
  auto chain = translate_post_ops(attr, p.dst);
  if (!chain) return chain.why();
  p.post_ops = std::move(chain).value();
  std::map<int, memory_desc> mds = {{PRIMCACHE_ARG_SRC, p.src}, {PRIMCACHE_ARG_DST, p.dst}};
  for (const auto& po : p.post_ops) {
    if (po.binary) mds[po.arg] = po.src1;
  }
  key_writer w;
  p.src.write_key(w);
  p.dst.write_key(w);
  w.enumeration(p.alg).f32(p.alpha).f32(p.beta);
  return make_kernel_pd(primitive_kind::eltwise, "ocl:eltwise", attr, eng, std::move(mds),
                        eltwise_plan(p), std::move(w));
}

}  // namespace

void register_eltwise_impls() {
  backend::register_implementation(
      {"ocl:eltwise", engine_kind::gpu, primitive_kind::eltwise, 100, &make_eltwise_pd});
}

}  // namespace primcache::ocl_internal
