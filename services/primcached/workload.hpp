// services/primcached/workload.hpp — the workload file primcached runs: a
// list of primitives, each created through the primitive cache and executed
// in a loop (docs/primcached.md describes every field).
//
//   primcache::primcached::workload w =
//       primcache::primcached::load_workload(text, "configs/workloads/default.json");
//   primcache::primitive_desc pd = make_primitive_desc(w.primitives[0], eng);
//
// Thread-safety: values; make_primitive_desc may be called from any thread.
// Exceptions: load_workload throws primcache::error(invalid_arguments) whose
// message names the file and the field ("default.json: primitives[3].shapes.src:
// expected an array of positive integers"); every entry's primitive
// descriptor is built once while loading, so an inconsistent op (shapes that
// do not agree, no engine of that kind) is refused there too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/runtime/runtime.hpp"

namespace primcache::primcached {

enum class primitive_kind { matmul, convolution, eltwise, reorder };
std::string_view to_string(primitive_kind kind) noexcept;

struct tensor_spec {
  memory::dims dims;
  data_type type = data_type::f32;
  format_tag layout = format_tag::undef;  // resolved: a plain tag when not given

  memory::desc desc() const { return memory::desc(dims, type, layout); }
};

struct post_op_spec {
  bool binary = false;  // false: eltwise
  algorithm alg = algorithm::undef;
  float scale = 1.f, alpha = 0.f, beta = 0.f;
  tensor_spec src1;  // binary_add only
};

struct primitive_spec {
  std::string name;  // given, or "<kind>#<index>"
  primitive_kind kind = primitive_kind::matmul;
  engine_kind engine = engine_kind::cpu;
  tensor_spec src, dst;
  std::optional<tensor_spec> weights, bias;  // matmul, convolution
  // convolution
  algorithm conv_alg = algorithm::convolution_direct;
  memory::dims strides, dilation, padding_l, padding_r;
  // eltwise
  algorithm eltwise_alg = algorithm::undef;
  float alpha = 0.f, beta = 0.f;
  // attributes
  std::vector<post_op_spec> post_ops;
  std::vector<float> output_scales;
  int output_scales_mask = 0;
  // matmul, convolution: the weights are constant (primitive_attr::
  // set_constant_weights): packed once into the constant tensor cache. On by
  // default — a workload's weights are filled once and never change.
  bool constant_weights = true;
  // how often it is picked (relative to the others) and the probability that
  // a pick creates it again (through the caches) before executing it
  double weight = 1.0;
  double recreate = 0.0;
};

struct workload {
  std::string name;
  std::vector<primitive_spec> primitives;
};

// Parses and validates a workload document; `file` names it in messages.
workload load_workload(std::string_view text, const std::string& file);

// The primitive descriptor of an entry on `eng` (an engine of spec.engine's
// kind). Throws primcache::error as the runtime does.
primitive_desc make_primitive_desc(const primitive_spec& spec, const engine& eng);
// The primitive for a descriptor of make_primitive_desc: through the
// primitive cache.
primitive make_primitive(const primitive_desc& pd);

}  // namespace primcache::primcached
