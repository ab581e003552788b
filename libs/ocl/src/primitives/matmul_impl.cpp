#include "primitives/matmul_impl.hpp"

#include "kernel_primitive.hpp"
#include "kernels/config_space.hpp"
#include "kernels/matmul_source.hpp"
#include "ocl_engine.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primitives/post_op_translation.hpp"
#include "primitives/registration.hpp"

namespace primcache::ocl_internal {
namespace {

using backend::matmul_op;
using backend::primitive_kind;

memory_desc row_major(const memory_desc& like) {
  std::vector<std::int64_t> dims(like.dims().begin(), like.dims().end());
  std::vector<std::int64_t> strides(dims.size());
  std::int64_t s = 1;
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    strides[static_cast<std::size_t>(d)] = s;
    s *= dims[static_cast<std::size_t>(d)];
  }
  return memory_desc(dims, like.data_type(), strides);
}

result<bool> plain_f32(const memory_desc& md, const char* what) {
  if (md.data_type() != data_type::f32) {
    return unimplemented(std::string("OpenCL matmul ") + what + " is not f32");
  }
  if (!md.is_plain()) return unimplemented(std::string("OpenCL matmul ") + what + " is blocked");
  return true;
}

}  // namespace

result<std::shared_ptr<const backend::primitive_desc_impl>> make_matmul_pd(
    const backend::op_desc& desc, const primitive_attr& attr, const backend::engine_impl& eng,
    const matmul_config* forced_config) {
  const matmul_op& op = std::get<matmul_op>(desc);
  if (attr.has_output_scales()) return unimplemented("output scales on OpenCL matmul");
  if (op.src.is_any()) return failure{status::invalid_arguments, "matmul src cannot be any"};
  matmul_problem p;
  p.src = op.src;
  p.weights = op.weights.is_any() ? row_major(op.weights) : op.weights;
  p.dst = op.dst.is_any() ? row_major(op.dst) : op.dst;
  p.bias = op.bias.is_zero() ? memory_desc() : (op.bias.is_any() ? row_major(op.bias) : op.bias);
  for (auto [md, what] :
       {std::pair{&p.src, "src"}, std::pair{&p.weights, "weights"}, std::pair{&p.dst, "dst"}}) {
    if (auto ok = plain_f32(*md, what); !ok) return ok.why();
  }
  if (!p.bias.is_zero()) {
    if (auto ok = plain_f32(p.bias, "bias"); !ok) return ok.why();
  }
  auto chain = translate_post_ops(attr, p.dst);
  if (!chain) return chain.why();
  p.post_ops = std::move(chain).value();
  // Constant weights are packed once into the constant cache
  // (constant_weights.hpp); the kernel reads the packed layout.
  p.packed_weights = attr.get_constant_weights();

  const ocl_engine& ocl = ocl_engine_of(eng);
  const matmul_config c =
      forced_config ? *forced_config : default_matmul_config(ocl.device_info(), p);
  if (auto ok = check_matmul_config(c, ocl.device_info()); !ok) return ok.why();

  std::map<int, memory_desc> mds = {
      {PRIMCACHE_ARG_SRC, p.src}, {PRIMCACHE_ARG_WEIGHTS, p.weights}, {PRIMCACHE_ARG_DST, p.dst}};
  if (!p.bias.is_zero()) mds[PRIMCACHE_ARG_BIAS] = p.bias;
  for (const auto& po : p.post_ops) {
    if (po.binary) mds[po.arg] = po.src1;
  }
  key_writer w;
  p.src.write_key(w);
  p.weights.write_key(w);
  w.boolean(!p.bias.is_zero());
  if (!p.bias.is_zero()) p.bias.write_key(w);
  p.dst.write_key(w);
  // A forced configuration is part of the op; otherwise finalize() chooses
  // one (tune table, else this default) and appends it to the key.
  if (forced_config) c.write_key(w);
  w.boolean(p.packed_weights);  // other code: the kernel reads the packed layout
  std::shared_ptr<const kernel_tuning> tuning;
  if (!forced_config) {
    auto t = std::make_shared<kernel_tuning>();
    t->default_config = to_fields(c);
    const device_entry dev = ocl.device_info();
    t->candidates = [dev, p] {
      return backend::config_space::of([&] {
        std::vector<backend::kernel_config> out;
        for (const matmul_config& m : matmul_config_candidates(dev, p)) out.push_back(to_fields(m));
        return out;
      }());
    };
    t->validate = [dev](const backend::kernel_config& f) -> result<bool> {
      auto typed = matmul_config_from_fields(f);
      if (!typed) return typed.why();
      return check_matmul_config(typed.value(), dev);
    };
    t->plan = [p](const backend::kernel_config& f) {
      return matmul_plan(p, matmul_config_from_fields(f).value());
    };
    tuning = std::move(t);
  }
  return make_kernel_pd(primitive_kind::matmul, "ocl:matmul", attr, eng, std::move(mds),
                        matmul_plan(p, c), std::move(w), std::move(tuning));
}

void register_matmul_impls() {
  backend::register_implementation(
      {"ocl:matmul", engine_kind::gpu, primitive_kind::matmul, 100,
       [](const backend::op_desc& op, const primitive_attr& attr, const backend::engine_impl& eng) {
         return make_matmul_pd(op, attr, eng, nullptr);
       }});
}

}  // namespace primcache::ocl_internal
