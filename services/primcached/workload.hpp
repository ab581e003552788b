// services/primcached/workload.hpp — the workload file primcached runs: a
// list of primitives, each created through the primitive cache and executed
// in a loop, and/or graphs (libs/graph's JSON format, docs/graph.md), each
// run whole by one executor the workload threads share
// (docs/primcached.md describes every field).
//
//   primcache::primcached::workload w = primcache::primcached::load_workload(
//       text, "configs/workloads/default.json", "configs/workloads");
//   primcache::primitive_desc pd = make_primitive_desc(w.primitives[0], eng);
//   w.graphs[0].exec->run(primcache::make_inputs(*w.graphs[0].graph));
//
// A workload document is either {"primitives": [...], "graphs": [...]} (at
// least one entry in all; a graph entry names a graph file, relative to
// `base_dir`, or holds the graph inline) or a graph document itself
// ({"tensors": [...], "ops": [...]}): one graph entry.
//
// Thread-safety: values (a graph entry shares its immutable graph and its
// executor, whose run() is thread-safe); make_primitive_desc may be called
// from any thread. Exceptions: load_workload throws primcache::error whose
// message names the file and the field ("default.json: primitives[3].shapes.src:
// expected an array of positive integers"; a graph's errors add its JSON
// pointer: "w.json: graphs[0].file: mlp.json: graph JSON /ops/0/kind: ...");
// every entry's primitive descriptor is built once while loading, and every
// graph's executor is built there (validation, plans, primitives), so an
// inconsistent op (shapes that do not agree, no engine of that kind, a graph
// op placed on a GPU that is not there, no kernel for the library it names)
// is refused there too. Codes: invalid_arguments for everything the
// document asks for, the runtime's and the executor's refusals included;
// for a graph file that cannot be read, read_input_file's (input_file.hpp:
// not_found, permission_denied over 16 MiB); out_of_memory, runtime_error,
// permission_denied and corrupt_data from the runtime or the executor as
// they are (the machine failed, not the document).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/graph/executor.hpp"
#include "primcache/graph/graph.hpp"
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

// A graph entry: every pick runs the whole graph once on the picking
// thread's inputs (made from the graph's "init"s, once per thread).
struct graph_entry {
  std::string name;    // the entry's "name", else the graph's, else "graph#<index>"
  std::string source;  // the graph file, or "<workload file> graphs[i].graph"
  double weight = 1.0;
  executor_options options;  // place, library, ignore_op_places; metrics_label = name
  std::shared_ptr<const primcache::graph> graph;
  std::shared_ptr<const executor> exec;  // built while loading, shared by the threads
};

// The most bytes one tensor of a primitive entry may take, its layout's
// padding included (docs/primcached.md): every workload thread allocates and
// zeroes each entry's tensors, so a 65536x65536 matmul (16 GiB a tensor)
// would run the machine out of memory. A larger one is refused at load.
inline constexpr std::uint64_t max_tensor_bytes = std::uint64_t{4} << 30;

struct workload {
  std::string name;
  std::vector<primitive_spec> primitives;
  std::vector<graph_entry> graphs;
};

// Parses and validates a workload document; `file` names it in messages and
// graph files are relative to `base_dir` ("" or "." : the current directory).
workload load_workload(std::string_view text, const std::string& file,
                       const std::string& base_dir = "");

// The primitive descriptor of an entry on `eng` (an engine of spec.engine's
// kind). Throws primcache::error as the runtime does.
primitive_desc make_primitive_desc(const primitive_spec& spec, const engine& eng);
// The primitive for a descriptor of make_primitive_desc: through the
// primitive cache.
primitive make_primitive(const primitive_desc& pd);

}  // namespace primcache::primcached
