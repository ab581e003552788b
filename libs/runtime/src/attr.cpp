#include "primcache/runtime/attr.hpp"

#include <string>

#include "primcache/base/error.hpp"
#include "primcache/runtime/backend/op_desc.hpp"

namespace primcache {

std::string_view to_string(algorithm alg) noexcept {
  switch (alg) {
    case algorithm::undef: return "undef";
    case algorithm::eltwise_relu: return "eltwise_relu";
    case algorithm::eltwise_gelu_erf: return "eltwise_gelu_erf";
    case algorithm::eltwise_gelu_tanh: return "eltwise_gelu_tanh";
    case algorithm::eltwise_tanh: return "eltwise_tanh";
    case algorithm::eltwise_logistic: return "eltwise_logistic";
    case algorithm::eltwise_exp: return "eltwise_exp";
    case algorithm::eltwise_linear: return "eltwise_linear";
    case algorithm::eltwise_clip: return "eltwise_clip";
    case algorithm::binary_add: return "binary_add";
    case algorithm::convolution_direct: return "convolution_direct";
    case algorithm::convolution_auto: return "convolution_auto";
  }
  return "unknown";
}

bool is_eltwise(algorithm alg) noexcept {
  return alg >= algorithm::eltwise_relu && alg <= algorithm::eltwise_clip;
}

void post_ops::append_eltwise(float scale, algorithm alg, float alpha, float beta) {
  if (!is_eltwise(alg)) {
    throw error(status::invalid_arguments,
                "post_ops::append_eltwise: " + std::string(to_string(alg)) +
                    " is not an eltwise algorithm");
  }
  entries_.push_back({kind::eltwise, alg, scale, alpha, beta, {}});
}

void post_ops::append_binary(algorithm alg, const memory_desc& src1) {
  if (alg != algorithm::binary_add) {
    throw error(status::invalid_arguments,
                "post_ops::append_binary: " + std::string(to_string(alg)) +
                    " is not supported (binary_add is)");
  }
  if (src1.is_zero() || src1.is_any()) {
    throw error(status::invalid_arguments,
                "post_ops::append_binary: the operand needs a concrete memory descriptor");
  }
  if (src1.data_type() != data_type::f32) {
    throw error(status::unimplemented,
                "post_ops::append_binary: operand " + src1.to_string() + " is not f32");
  }
  entries_.push_back({kind::binary, alg, 1.f, 0.f, 0.f, src1});
}

const post_ops::entry& post_ops::at(int index) const {
  if (index < 0 || index >= len()) {
    throw error(status::invalid_arguments, "post-op index " + std::to_string(index) +
                                               " is out of range (" + std::to_string(len()) +
                                               " post-ops)");
  }
  return entries_[static_cast<std::size_t>(index)];
}

void primitive_attr::set_output_scales(int mask, std::vector<float> scales) {
  if (mask < 0 || (mask != 0 && (mask & (mask - 1)) != 0) || mask >= (1 << max_ndims)) {
    throw error(status::invalid_arguments,
                "output scales mask " + std::to_string(mask) +
                    " is not supported (0, or one bit for the dimension the scales run along)");
  }
  if (scales.empty()) {
    throw error(status::invalid_arguments, "output scales are empty");
  }
  if (mask == 0 && scales.size() != 1) {
    throw error(
        status::invalid_arguments,
        "output scales with mask 0 need exactly one value, got " + std::to_string(scales.size()));
  }
  scales_mask_ = mask;
  scales_ = std::move(scales);
}

void primitive_attr::write_key(key_writer& w) const {
  w.u32(static_cast<std::uint32_t>(post_ops_.len()));
  for (const auto& e : post_ops_.entries()) {
    w.enumeration(e.kind).enumeration(e.alg).f32(e.scale).f32(e.alpha).f32(e.beta);
    if (e.kind == post_ops::kind::binary) e.src1.write_key(w);
  }
  // Kernels take scale values at run time (from the executing primitive's
  // attributes): only their shape is part of the key, so a new scale value
  // reuses the compiled code.
  w.i32(scales_mask_).u32(static_cast<std::uint32_t>(scales_.size()));
}

void primitive_attr::write_run_time_values(key_writer& w) const {
  for (float s : scales_) w.f32(s);
  // After the scales, whose count write_key recorded: no ambiguity.
  w.boolean(constant_weights_);
  w.u8(!tunable_ ? 0 : *tunable_ ? 2 : 1);
}

namespace backend {

std::string_view to_string(primitive_kind kind) noexcept {
  switch (kind) {
    case primitive_kind::matmul: return "matmul";
    case primitive_kind::convolution: return "convolution";
    case primitive_kind::eltwise: return "eltwise";
    case primitive_kind::reorder: return "reorder";
  }
  return "unknown";
}

primitive_kind kind_of(const op_desc& op) noexcept {
  switch (op.index()) {
    case 0: return primitive_kind::matmul;
    case 1: return primitive_kind::convolution;
    case 2: return primitive_kind::eltwise;
    default: return primitive_kind::reorder;
  }
}

}  // namespace backend
}  // namespace primcache
