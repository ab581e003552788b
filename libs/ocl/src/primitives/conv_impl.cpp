#include "primitives/conv_impl.hpp"

#include "kernel_primitive.hpp"
#include "kernels/config_space.hpp"
#include "kernels/conv_source.hpp"
#include "ocl_engine.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primitives/post_op_translation.hpp"
#include "primitives/registration.hpp"

namespace primcache::ocl_internal {
namespace {

using backend::convolution_op;
using backend::primitive_kind;

// Activations `any`: the layout the device's default kernel runs faster
// for this shape (conv_preferred_activation; docs/ocl.md).
memory_desc resolve_activation(const memory_desc& md, const device_entry& dev,
                               const convolution_op& op) {
  if (!md.is_any()) return md;
  const std::int64_t g = op.weights.ndims() == 5 ? op.weights.dims()[0] : 1;
  const std::int64_t icg = op.src.dims()[1] / g, ocg = op.dst.dims()[1] / g;
  return memory_desc(md.dims(), md.data_type(), conv_preferred_activation(dev, icg, ocg));
}

// Weights `any`: output channels innermost, then input channels, then the
// kernel's columns and rows (hwio; per group for grouped weights), so the
// kernel loads a run of output channels as one vector.
memory_desc preferred_weights(const memory_desc& md) {
  const auto d = md.dims();
  if (md.ndims() == 4) return memory_desc(d, md.data_type(), format_tag::hwio);
  const std::int64_t o = d[1], i = d[2], kh = d[3], kw = d[4];
  const std::vector<std::int64_t> strides = {kh * kw * i * o, 1, o, kw * i * o, i * o};
  return memory_desc(d, md.data_type(), strides);
}

memory_desc resolve_weights(const memory_desc& md) {
  return md.is_any() ? preferred_weights(md) : md;
}

// The kernel splits offsets into a channel part and spatial parts only
// through the addressing helpers, which handle any blocking; it refuses
// what it was not written for: blocks over the minibatch or spatial dims.
result<bool> check_activation(const memory_desc& md, const char* what) {
  if (md.data_type() != data_type::f32) {
    return unimplemented(std::string("OpenCL convolution ") + what + " " + md.to_string() +
                         " is not f32");
  }
  if (!md.is_blocked()) {
    return unimplemented(std::string("OpenCL convolution ") + what + " has no resolved layout");
  }
  for (int k = 0; k < md.inner_nblks(); ++k) {
    if (md.inner_idxs()[k] != 1) {
      return unimplemented(std::string("OpenCL convolution ") + what + " " + md.to_string() +
                           " blocks a dimension other than channels");
    }
  }
  return true;
}

}  // namespace

result<std::shared_ptr<const backend::primitive_desc_impl>> make_conv_pd(
    const backend::op_desc& desc, const primitive_attr& attr, const backend::engine_impl& eng,
    const conv_config* forced_config) {
  const convolution_op& op = std::get<convolution_op>(desc);
  if (attr.has_output_scales()) return unimplemented("output scales on OpenCL convolution");
  const ocl_engine& ocl = ocl_engine_of(eng);
  conv_problem p;
  p.src = resolve_activation(op.src, ocl.device_info(), op);
  p.dst = resolve_activation(op.dst, ocl.device_info(), op);
  p.weights = resolve_weights(op.weights);
  p.bias = op.bias.is_zero()
               ? memory_desc()
               : (op.bias.is_any() ? memory_desc(op.bias.dims(), op.bias.data_type(), format_tag::a)
                                   : op.bias);
  if (auto ok = check_activation(p.src, "src"); !ok) return ok.why();
  if (auto ok = check_activation(p.dst, "dst"); !ok) return ok.why();
  for (auto [md, what] : {std::pair{&p.weights, "weights"}, std::pair{&p.bias, "bias"}}) {
    if (md->is_zero()) continue;
    if (md->data_type() != data_type::f32) {
      return unimplemented(std::string("OpenCL convolution ") + what + " " + md->to_string() +
                           " is not f32");
    }
    if (!md->is_blocked()) {
      return unimplemented(std::string("OpenCL convolution ") + what + " has no resolved layout");
    }
  }
  p.stride_h = op.strides[0];
  p.stride_w = op.strides[1];
  p.dilate_h = op.dilates[0];
  p.dilate_w = op.dilates[1];
  p.pad_t = op.padding_l[0];
  p.pad_l = op.padding_l[1];
  p.pad_b = op.padding_r[0];
  p.pad_r = op.padding_r[1];
  auto chain = translate_post_ops(attr, p.dst);
  if (!chain) return chain.why();
  p.post_ops = std::move(chain).value();
  // Constant weights in another layout: the kernel reads them packed into
  // its preferred one (constant_weights.hpp); the argument keeps the user's.
  const memory_desc user_weights = p.weights;
  if (attr.get_constant_weights() && p.weights.data_type() == data_type::f32) {
    const memory_desc preferred = preferred_weights(p.weights);
    if (!(preferred == p.weights)) {
      p.user_weights = p.weights;
      p.weights = preferred;
    }
  }

  const conv_config c = forced_config ? *forced_config : default_conv_config(ocl.device_info(), p);
  if (auto ok = check_conv_config(c, ocl.device_info(), p); !ok) return ok.why();

  std::map<int, memory_desc> mds = {{PRIMCACHE_ARG_SRC, p.src},
                                    {PRIMCACHE_ARG_WEIGHTS, user_weights},
                                    {PRIMCACHE_ARG_DST, p.dst}};
  if (!p.bias.is_zero()) mds[PRIMCACHE_ARG_BIAS] = p.bias;
  for (const auto& po : p.post_ops) {
    if (po.binary) mds[po.arg] = po.src1;
  }
  key_writer w;
  p.src.write_key(w);
  user_weights.write_key(w);
  w.boolean(!p.bias.is_zero());
  if (!p.bias.is_zero()) p.bias.write_key(w);
  p.dst.write_key(w);
  w.i64(p.stride_h).i64(p.stride_w).i64(p.dilate_h).i64(p.dilate_w);
  w.i64(p.pad_t).i64(p.pad_l).i64(p.pad_b).i64(p.pad_r);
  // A forced configuration is part of the op; otherwise finalize() chooses
  // one (tune table, else this default) and appends it to the key.
  if (forced_config) c.write_key(w);
  w.boolean(!p.user_weights.is_zero());  // other code: the kernel reads packed weights
  std::shared_ptr<const kernel_tuning> tuning;
  if (!forced_config) {
    auto t = std::make_shared<kernel_tuning>();
    t->default_config = to_fields(c);
    const device_entry dev = ocl.device_info();
    t->candidates = [dev, p] {
      return backend::config_space::of([&] {
        std::vector<backend::kernel_config> out;
        for (const conv_config& m : conv_config_candidates(dev, p)) out.push_back(to_fields(m));
        return out;
      }());
    };
    t->validate = [dev, p](const backend::kernel_config& f) -> result<bool> {
      auto typed = conv_config_from_fields(f);
      if (!typed) return typed.why();
      return check_conv_config(typed.value(), dev, p);
    };
    t->plan = [p](const backend::kernel_config& f) {
      return conv_plan(p, conv_config_from_fields(f).value());
    };
    tuning = std::move(t);
  }
  return make_kernel_pd(primitive_kind::convolution, "ocl:conv", attr, eng, std::move(mds),
                        conv_plan(p, c), std::move(w), std::move(tuning));
}

void register_conv_impls() {
  backend::register_implementation(
      {"ocl:conv", engine_kind::gpu, primitive_kind::convolution, 100,
       [](const backend::op_desc& op, const primitive_attr& attr, const backend::engine_impl& eng) {
         return make_conv_pd(op, attr, eng, nullptr);
       }});
}

}  // namespace primcache::ocl_internal
