// The built-in op kinds (shape functions) and their kernels over the
// runtime's primitives: one kernel class per kind, registered for the CPU
// and GPU engine kinds under library "jit" (the backends choose their
// implementation; the runtime's primitive cache keeps the code).
#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "primcache/base/error.hpp"
#include "primcache/graph/op_registry.hpp"
#include "primcache/runtime/args.h"
#include "primcache/runtime/attr.hpp"
#include "primcache/runtime/convolution.hpp"
#include "primcache/runtime/eltwise.hpp"
#include "primcache/runtime/matmul.hpp"
#include "primcache/runtime/reorder.hpp"

namespace primcache::graph_internal {

namespace {

[[noreturn]] void fail(const op_spec& op, const std::string& why) {
  throw error(status::invalid_arguments, "op '" + op.name + "' (" + op.kind + "): " + why);
}

// Shape arithmetic on values from the document (dims, padding and dilation
// may be any int64 it holds): an overflow refuses the op, never undefined
// behaviour.
std::int64_t checked_mul(const op_spec& op, const std::string& what, std::int64_t a,
                         std::int64_t b) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    fail(op, what + ": " + std::to_string(a) + " * " + std::to_string(b) + " overflows 64 bits");
  }
  return r;
}
std::int64_t checked_add(const op_spec& op, const std::string& what, std::int64_t a,
                         std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    fail(op, what + ": " + std::to_string(a) + " + " + std::to_string(b) + " overflows 64 bits");
  }
  return r;
}

std::optional<algorithm> eltwise_algorithm(std::string_view name) {
  static const std::pair<std::string_view, algorithm> table[] = {
      {"relu", algorithm::eltwise_relu},           {"gelu_erf", algorithm::eltwise_gelu_erf},
      {"gelu_tanh", algorithm::eltwise_gelu_tanh}, {"gelu", algorithm::eltwise_gelu_tanh},
      {"tanh", algorithm::eltwise_tanh},           {"sigmoid", algorithm::eltwise_logistic},
      {"logistic", algorithm::eltwise_logistic},   {"exp", algorithm::eltwise_exp},
      {"linear", algorithm::eltwise_linear},       {"clip", algorithm::eltwise_clip},
  };
  for (const auto& [n, a] : table) {
    if (n == name) return a;
  }
  return std::nullopt;
}

constexpr const char* eltwise_names =
    "relu, gelu_erf, gelu_tanh, gelu, tanh, sigmoid, logistic, exp, linear, clip";

// post_ops: eltwise names (alpha 0, beta 0) and "add" (one more input).
struct post_op_list {
  post_ops ops;                // add entries without their descriptors yet
  std::vector<int> add_index;  // index in ops of each "add"
  std::vector<algorithm> algs;
};

post_op_list parse_post_ops(const op_spec& op) {
  post_op_list out;
  int i = 0;
  for (const auto& name : op.strings_attribute("post_ops", {})) {
    if (name == "add") {
      out.add_index.push_back(i);
      out.algs.push_back(algorithm::binary_add);
    } else if (auto alg = eltwise_algorithm(name)) {
      out.algs.push_back(*alg);
    } else {
      fail(op, "unknown post-op '" + name + "' (known: add, " + eltwise_names + ")");
    }
    ++i;
  }
  return out;
}

// The number of bias inputs (0 or 1) of an op with `fixed` leading inputs,
// an optional bias and one input per "add" post-op.
std::size_t bias_count(const op_spec& op, std::size_t inputs, std::size_t fixed, std::size_t adds,
                       const char* names) {
  if (inputs < fixed + adds || inputs > fixed + adds + 1) {
    fail(op, std::string("takes ") + names +
                 ", an optional bias and one input per \"add\" post-op (" + std::to_string(adds) +
                 "): " + std::to_string(fixed + adds) + " or " + std::to_string(fixed + adds + 1) +
                 " inputs, not " + std::to_string(inputs));
  }
  return inputs - fixed - adds;
}

void check_add_operands(const op_spec& op, std::span<const tensor_shape> in, std::size_t first,
                        const std::vector<std::int64_t>& dst) {
  for (std::size_t i = first; i < in.size(); ++i) {
    const auto& d = in[i].dims;
    bool ok = d.size() == dst.size();
    for (std::size_t k = 0; ok && k < d.size(); ++k) ok = d[k] == dst[k] || d[k] == 1;
    if (!ok) {
      fail(op, "the \"add\" operand '" + op.inputs[i] + "' is " + dims_to_string(d) +
                   ", the output " + dims_to_string(dst) + " (each dim equal or 1)");
    }
  }
}

data_type result_type(const op_spec& op, std::span<const tensor_shape> in) {
  return op.type != data_type::undef ? op.type : in[0].type;
}

// The attribute for a primitive: post-ops with their operands' descriptors.
primitive_attr make_attr(const post_op_list& p, std::span<const memory_desc> inputs,
                         std::size_t first_add, bool constant_weights) {
  primitive_attr attr;
  post_ops ops;
  std::size_t next_add = first_add;
  for (algorithm alg : p.algs) {
    if (alg == algorithm::binary_add) {
      ops.append_binary(alg, inputs[next_add++]);
    } else {
      ops.append_eltwise(1.f, alg, 0.f, 0.f);
    }
  }
  attr.set_post_ops(std::move(ops));
  attr.set_constant_weights(constant_weights);
  return attr;
}

// A bound op: one primitive and the argument ids of its inputs and outputs.
class primitive_kernel final : public bound_kernel {
 public:
  primitive_kernel(primitive prim, std::vector<int> input_args, std::vector<int> output_args)
      : prim_(std::move(prim)), inputs_(std::move(input_args)), outputs_(std::move(output_args)) {}
  void execute(const stream& strm, std::span<const memory> inputs,
               std::span<const memory> outputs) const override {
    primitive::args args;
    for (std::size_t i = 0; i < inputs_.size(); ++i) args.emplace(inputs_[i], inputs[i]);
    for (std::size_t i = 0; i < outputs_.size(); ++i) args.emplace(outputs_[i], outputs[i]);
    prim_.execute(strm, args);
  }

 private:
  primitive prim_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
};

std::vector<int> weighted_args(std::size_t bias, const post_op_list& p) {
  std::vector<int> args{PRIMCACHE_ARG_SRC, PRIMCACHE_ARG_WEIGHTS};
  if (bias) args.push_back(PRIMCACHE_ARG_BIAS);
  for (int idx : p.add_index)
    args.push_back(PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(idx) | PRIMCACHE_ARG_SRC_1);
  return args;
}

// The layout the attribute weights_layout names (for input 1, the
// weights), parsed here so that text that is no layout is refused naming
// the op (the shape functions call it first); none when the op gives none.
// A layout of another rank than the weights is left to the transform plan,
// which names the op, the input and both kernel types.
std::optional<layout> weights_layout_of(const op_spec& op) {
  if (!op.has_attribute("weights_layout")) return std::nullopt;
  const std::string text = op.string_attribute("weights_layout", "");
  try {
    return layout::parse(text);
  } catch (const error& e) {
    fail(op, "weights_layout \"" + text + "\": " + e.message());
  }
}

// --- matmul ---------------------------------------------------------------

std::vector<tensor_shape> matmul_shapes(const op_spec& op, std::span<const tensor_shape> in) {
  const post_op_list p = parse_post_ops(op);
  const std::size_t bias = bias_count(op, in.size(), 2, p.add_index.size(), "src, weights");
  const auto& s = in[0].dims;
  const auto& w = in[1].dims;
  if (s.size() < 2 || s.size() > 3)
    fail(op, "src '" + op.inputs[0] + "' is " + dims_to_string(s) + ": it must have 2 or 3 dims");
  if (w.size() != s.size()) {
    fail(op, "src '" + op.inputs[0] + "' is " + dims_to_string(s) + " and weights '" +
                 op.inputs[1] + "' " + dims_to_string(w) +
                 ": they must have the same number of dims");
  }
  const std::size_t r = s.size();
  if (s[r - 1] != w[r - 2]) {
    fail(op, "src '" + op.inputs[0] + "' is " + dims_to_string(s) + " and weights '" +
                 op.inputs[1] + "' " + dims_to_string(w) + ": inner dimensions " +
                 std::to_string(s[r - 1]) + " and " + std::to_string(w[r - 2]) + " differ");
  }
  if (r == 3 && w[0] != 1 && w[0] != s[0]) {
    fail(op, "weights batch " + std::to_string(w[0]) + " is neither 1 nor src's batch " +
                 std::to_string(s[0]));
  }
  weights_layout_of(op);
  std::vector<std::int64_t> dst = s;
  dst[r - 1] = w[r - 1];
  if (bias) {
    std::vector<std::int64_t> want(r, 1);
    want[r - 1] = w[r - 1];
    if (in[2].dims != want) {
      fail(op, "bias '" + op.inputs[2] + "' is " + dims_to_string(in[2].dims) + ", it must be " +
                   dims_to_string(want));
    }
  }
  check_add_operands(op, in, 2 + bias, dst);
  return {{dst, result_type(op, in)}};
}

class matmul_kernel final : public op_kernel {
 public:
  kernel_type input_type(const op_spec& op, std::size_t index, const tensor_shape& shape,
                         const kernel_type& op_type, const kernel_type& actual) const override {
    kernel_type k = op_kernel::input_type(op, index, shape, op_type, actual);
    if (index == 1) {
      k.layout = weights_layout_of(op).value_or(plain_layout(static_cast<int>(shape.dims.size())));
    } else if (index == 2 && bias_of(op) == 1) {
      k.layout = plain_layout(static_cast<int>(shape.dims.size()));
    }
    return k;
  }
  std::unique_ptr<bound_kernel> bind(const kernel_binding& b) const override {
    const op_spec& op = *b.op;
    const post_op_list p = parse_post_ops(op);
    const std::size_t bias = bias_of(op);
    const primitive_attr attr = make_attr(p, b.inputs, 2 + bias, b.constant_inputs[1]);
    const matmul::desc d = bias ? matmul::desc(b.inputs[0], b.inputs[1], b.inputs[2], b.outputs[0])
                                : matmul::desc(b.inputs[0], b.inputs[1], b.outputs[0]);
    matmul prim(matmul::primitive_desc(d, attr, b.eng));
    return std::make_unique<primitive_kernel>(std::move(prim), weighted_args(bias, p),
                                              std::vector<int>{PRIMCACHE_ARG_DST});
  }

 private:
  static std::size_t bias_of(const op_spec& op) {
    return op.inputs.size() - 2 - parse_post_ops(op).add_index.size();
  }
};

// --- convolution ----------------------------------------------------------

struct conv_geometry {
  std::vector<std::int64_t> strides, dilation, padding_l, padding_r;
};

conv_geometry conv_attributes(const op_spec& op) {
  conv_geometry g;
  g.strides = op.ints_attribute("strides", {1, 1});
  g.dilation = op.ints_attribute("dilation", {0, 0});
  if (op.has_attribute("padding")) {
    if (op.has_attribute("padding_l") || op.has_attribute("padding_r")) {
      fail(op, "give either padding or padding_l and padding_r, not both");
    }
    g.padding_l = g.padding_r = op.ints_attribute("padding", {});
  } else {
    g.padding_l = op.ints_attribute("padding_l", {0, 0});
    g.padding_r = op.ints_attribute("padding_r", g.padding_l);
  }
  const std::pair<const char*, const std::vector<std::int64_t>*> all[] = {
      {"strides", &g.strides},
      {"dilation", &g.dilation},
      {"padding", &g.padding_l},
      {"padding_r", &g.padding_r}};
  for (const auto& [name, v] : all) {
    if (v->size() != 2)
      fail(op, std::string(name) + " must have 2 values (height, width), not " +
                   std::to_string(v->size()));
  }
  for (auto s : g.strides) {
    if (s < 1) fail(op, "strides must be at least 1");
  }
  for (auto d : g.dilation) {
    if (d < 0) fail(op, "dilation must not be negative (0 is a dense kernel)");
  }
  for (auto pl : g.padding_l) {
    if (pl < 0) fail(op, "padding must not be negative");
  }
  return g;
}

std::vector<tensor_shape> conv_shapes(const op_spec& op, std::span<const tensor_shape> in) {
  const post_op_list p = parse_post_ops(op);
  const std::size_t bias = bias_count(op, in.size(), 2, p.add_index.size(), "src, weights");
  const conv_geometry g = conv_attributes(op);
  const auto& s = in[0].dims;
  const auto& w = in[1].dims;
  if (s.size() != 4)
    fail(op, "src '" + op.inputs[0] + "' is " + dims_to_string(s) + ": it must be N x C x H x W");
  // Weights are O x C x KH x KW, or grouped G x O/G x C/G x KH x KW (a
  // depthwise convolution is G = C with O/G = C/G = 1).
  if (w.size() != 4 && w.size() != 5) {
    fail(op, "weights '" + op.inputs[1] + "' are " + dims_to_string(w) +
                 ": they must be O x C x KH x KW, or G x O/G x C/G x KH x KW for a grouped "
                 "convolution");
  }
  weights_layout_of(op);
  const bool grouped = w.size() == 5;
  const std::int64_t groups = grouped ? w[0] : 1;
  const std::string weights = "weights '" + op.inputs[1] + "' are " + dims_to_string(w);
  const std::int64_t out_channels =
      grouped ? checked_mul(op, weights + ": groups * output channels per group", w[0], w[1])
              : w[0];
  const std::int64_t in_channels =
      grouped ? checked_mul(op, weights + ": groups * input channels per group", w[0], w[2]) : w[1];
  const std::size_t k0 = grouped ? 3 : 2;  // index of KH in w
  if (s[1] != in_channels) {
    fail(op,
         "src '" + op.inputs[0] + "' has " + std::to_string(s[1]) + " channels, weights '" +
             op.inputs[1] + "' take " + std::to_string(in_channels) +
             (grouped ? " (" + std::to_string(groups) + " groups of " + std::to_string(w[2]) + ")"
                      : std::string()));
  }
  std::vector<std::int64_t> dst{s[0], out_channels, 0, 0};
  for (int d = 0; d < 2; ++d) {
    const std::string dim = d ? "width" : "height";
    const std::string kernel = "the dilated kernel " + dim;
    const std::int64_t ext = checked_add(
        op, kernel,
        checked_mul(op, kernel, w[k0 + d] - 1, checked_add(op, kernel, g.dilation[d], 1)), 1);
    const std::string input = "the padded input " + dim;
    const std::int64_t padded =
        checked_add(op, input, checked_add(op, input, s[2 + d], g.padding_l[d]), g.padding_r[d]);
    // padding_r may be negative (a stride that leaves the last rows unread),
    // so `padded` may be too: compared first, the difference cannot overflow.
    if (padded < ext) {
      fail(op, "the kernel (" + std::to_string(ext) +
                   " with dilation) is larger than the padded input (" + std::to_string(padded) +
                   ") in " + dim);
    }
    const std::int64_t span = padded - ext;
    dst[2 + d] = span / g.strides[d] + 1;
  }
  if (bias && in[2].dims != std::vector<std::int64_t>{out_channels}) {
    fail(op, "bias '" + op.inputs[2] + "' is " + dims_to_string(in[2].dims) + ", it must be " +
                 std::to_string(out_channels));
  }
  check_add_operands(op, in, 2 + bias, dst);
  return {{dst, result_type(op, in)}};
}

class conv_kernel final : public op_kernel {
 public:
  kernel_type input_type(const op_spec& op, std::size_t index, const tensor_shape& shape,
                         const kernel_type& op_type, const kernel_type& actual) const override {
    kernel_type k = op_kernel::input_type(op, index, shape, op_type, actual);
    if (index == 1) {
      k.layout = weights_layout_of(op).value_or(plain_layout(static_cast<int>(shape.dims.size())));
    }
    return k;
  }
  std::unique_ptr<bound_kernel> bind(const kernel_binding& b) const override {
    const op_spec& op = *b.op;
    const post_op_list p = parse_post_ops(op);
    const std::size_t bias = op.inputs.size() - 2 - p.add_index.size();
    const conv_geometry g = conv_attributes(op);
    const primitive_attr attr = make_attr(p, b.inputs, 2 + bias, b.constant_inputs[1]);
    const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                      b.inputs[0], b.inputs[1], bias ? b.inputs[2] : memory_desc(),
                                      b.outputs[0], g.strides, g.dilation, g.padding_l,
                                      g.padding_r);
    convolution_forward prim(convolution_forward::primitive_desc(d, attr, b.eng));
    return std::make_unique<primitive_kernel>(std::move(prim), weighted_args(bias, p),
                                              std::vector<int>{PRIMCACHE_ARG_DST});
  }
};

// --- eltwise --------------------------------------------------------------

algorithm eltwise_of(const op_spec& op) {
  if (!op.has_attribute("algorithm"))
    fail(op, "needs the attribute 'algorithm' (" + std::string(eltwise_names) + ")");
  const std::string name = op.string_attribute("algorithm", "");
  auto alg = eltwise_algorithm(name);
  if (!alg) fail(op, "unknown algorithm '" + name + "' (known: " + eltwise_names + ")");
  return *alg;
}

std::vector<tensor_shape> eltwise_shapes(const op_spec& op, std::span<const tensor_shape> in) {
  if (in.size() != 1) fail(op, "takes 1 input, not " + std::to_string(in.size()));
  eltwise_of(op);
  op.float_attribute("alpha", 0);
  op.float_attribute("beta", 0);
  return {{in[0].dims, result_type(op, in)}};
}

class eltwise_kernel final : public op_kernel {
 public:
  std::unique_ptr<bound_kernel> bind(const kernel_binding& b) const override {
    const op_spec& op = *b.op;
    const eltwise_forward::desc d(prop_kind::forward_inference, eltwise_of(op), b.inputs[0],
                                  b.outputs[0], static_cast<float>(op.float_attribute("alpha", 0)),
                                  static_cast<float>(op.float_attribute("beta", 0)));
    eltwise_forward prim(eltwise_forward::primitive_desc(d, b.eng));
    return std::make_unique<primitive_kernel>(std::move(prim), std::vector<int>{PRIMCACHE_ARG_SRC},
                                              std::vector<int>{PRIMCACHE_ARG_DST});
  }
};

// --- reorder / identity ---------------------------------------------------

std::vector<tensor_shape> reorder_shapes(const op_spec& op, std::span<const tensor_shape> in) {
  if (in.size() != 1) fail(op, "takes 1 input, not " + std::to_string(in.size()));
  return {{in[0].dims, result_type(op, in)}};
}

// Reads its input where it is (brought to the op's place only) and writes
// it in the op's layout and data type with one reorder primitive.
class reorder_kernel final : public op_kernel {
 public:
  kernel_type input_type(const op_spec&, std::size_t, const tensor_shape&,
                         const kernel_type& op_type, const kernel_type& actual) const override {
    kernel_type k = actual;
    k.place = op_type.place;
    k.library = op_type.library;
    return k;
  }
  std::unique_ptr<bound_kernel> bind(const kernel_binding& b) const override {
    reorder prim(reorder::primitive_desc(b.eng, b.inputs[0], b.eng, b.outputs[0]));
    return std::make_unique<primitive_kernel>(std::move(prim), std::vector<int>{PRIMCACHE_ARG_FROM},
                                              std::vector<int>{PRIMCACHE_ARG_TO});
  }
};

}  // namespace

void add_builtin_ops(op_registry& reg) {
  // The attributes each kind reads; any other is refused by the executor.
  reg.add_kind("matmul", matmul_shapes, {"post_ops", "weights_layout"});
  reg.add_kind(
      "convolution", conv_shapes,
      {"strides", "padding", "padding_l", "padding_r", "dilation", "post_ops", "weights_layout"});
  reg.add_kind("eltwise", eltwise_shapes, {"algorithm", "alpha", "beta"});
  reg.add_kind("reorder", reorder_shapes, {});
  reg.add_kind("identity", reorder_shapes, {});
  const std::pair<const char*, std::shared_ptr<const op_kernel>> kernels[] = {
      {"matmul", std::make_shared<matmul_kernel>()},
      {"convolution", std::make_shared<conv_kernel>()},
      {"eltwise", std::make_shared<eltwise_kernel>()},
      {"reorder", std::make_shared<reorder_kernel>()},
      {"identity", std::make_shared<reorder_kernel>()},
  };
  for (const auto& [kind, k] : kernels) {
    reg.add_kernel(kind, engine_kind::cpu, "jit", k);
    reg.add_kernel(kind, engine_kind::gpu, "jit", k);
  }
}

}  // namespace primcache::graph_internal
