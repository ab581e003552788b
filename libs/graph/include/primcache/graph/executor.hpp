// primcache/graph/executor.hpp — runs a graph: picks each op's kernel type
// and kernel, transforms inputs whose kernel type differs, keeps transformed
// constants in the constant tensor cache, and counts what it transformed.
//
//   primcache::executor exec(g, {.place = primcache::place::cpu()});
//   auto outputs = exec.run({{"x", x_memory}});     // name -> memory
//   primcache::memory y = outputs.at("y");
//   primcache::executor_stats s = exec.stats();     // transforms and bytes
//
// Kernel types. An op's expected kernel type is: its forced place, else the
// executor's place; its forced library, else the executor's library; its
// data type, else its first input's; its layout, else the plain one. The op
// registry's kernel for (kind, place kind, library) says in which kernel
// type each input must arrive (op_kernel::input_type). An input in another
// kernel type is transformed by the transform registry's plan (fewest bytes
// moved; transform_registry.hpp) into memory that lives for that run; a
// tensor read by several ops in one kernel type is transformed once per run.
// Constant inputs are transformed once: the result is written on the
// engine of the op that reads it and kept in the constant tensor cache of
// that engine's device (constant_tensor_cache_for), keyed by the constant's
// memory id as it is at each run (memory::get_id: set_data_handle gives the
// constant other data and a new id), that engine and the target kernel
// type, so later runs (of this executor or another over the same data) take
// it from there. The entry is removed when that data is released (the
// memory's last copy goes, or set_data_handle), as the backends' packed
// weights are. Matmul and convolution also get
// primitive_attr::set_constant_weights for them.
// A constant whose data is on another engine of the op's place (a user's
// OpenCL context) reaches the op's engine through its transform; one the op
// would read as given is refused (invalid_arguments).
// A produced tensor that declares a layout or place is delivered in it.
//
// Everything is decided when the executor is constructed: validation, shape
// inference, kernel types, transform plans and primitive creation (bind).
// A bad graph throws there, naming the op or tensor: an unknown op kind
// (listing the known ones), an attribute the kind does not accept (listing
// those it does), an op layout of another rank than its output, no kernel
// for a kernel type (listing those registered), shapes that do not agree,
// a tensor an op writes, delivers or reads transformed over
// max_tensor_bytes (its elements, or the buffer a strided layout spans:
// checked_tensor_desc), a kernel whose input_type or output_type throws
// (prefixed with the op and the tensor; the built-ins refuse a
// weights_layout that is no layout in their shape functions, naming the
// op), an op or tensor placed on a
// device the process does not have, a cycle, a missing constant's data, a
// constant on an engine its op cannot read, no transform path (naming both
// kernel types). run() throws for a missing or unknown input and for an
// input of the wrong descriptor or place.
//
// Metrics. Unless options.export_metrics is false, the executor registers in
// primcache::control() (at construction, so they read 0 before the first
// run) and adds to, as it runs:
//   primcache_graph_runs_total{graph}
//   primcache_graph_transform_executions_total{from,graph,steps,to}
//   primcache_graph_transform_bytes_total{from,graph,steps,to}
//   primcache_graph_constant_transforms_total{graph}
//   primcache_graph_constant_cache_hits_total{graph}
// where from/to are kernel_type::to_string() and steps the plan's step kinds
// joined by ','. Executors with the same label share the series (the sums).
// Label values are UTF-8 (control refuses others): in a label, a graph name
// or library name, each byte that is no part of a well-formed UTF-8
// sequence is written as the four characters \xNN (lowercase hex): an
// executor of graph "r\xe9sum\xe9" (Latin-1 bytes) constructs and counts
// under the label text r\xe9sum\xe9 (/metrics: graph="r\\xe9sum\\xe9").
// Text that is UTF-8 is exported as it is.
//
// Thread-safety: run() and stats() may be called from many threads at once
// on one executor; each run has its own intermediate memories and streams,
// and runs of the same inputs give bitwise the same outputs. Counters are
// relaxed atomics: a stats() taken during runs is a consistent-enough
// snapshot, exact once they return. Exceptions: error (invalid_arguments,
// unimplemented, or what a primitive throws).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/graph/graph.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/transform/kernel_type.hpp"
#include "primcache/transform/transform_plan.hpp"

namespace primcache {

class op_registry;
class transform_registry;

struct PRIMCACHE_API executor_options {
  primcache::place place = place::cpu();  // where ops that force none run
  std::string library = "jit";            // the library of ops that force none
  // Run every op at `place`, ignoring the places ops force (to compare a
  // mixed graph with an all-CPU run).
  bool ignore_op_places = false;
  op_registry* ops = nullptr;                // null: op_registry::global()
  transform_registry* transforms = nullptr;  // null: transform_registry::global()
  // Count runs and transforms in control()'s metrics too (primcache_graph_*,
  // docs/metrics.md): what stats() returns, for /metrics and the console.
  bool export_metrics = true;
  // Their `graph` label; empty: the graph's name ("unnamed" when it has none).
  // Any bytes: what is not UTF-8 is exported escaped (Metrics above).
  std::string metrics_label;
};

// One transform the executor plans: a tensor taken from one kernel type to
// another for the ops that read it there (or to deliver an output).
struct PRIMCACHE_API transform_record {
  std::string tensor;
  std::string op;  // the first op that reads it; "" for delivery
  kernel_type from;
  kernel_type to;
  std::vector<transform_kind> steps;
  // Bytes read + written by one execution: transform_plan::bytes, the
  // padding of blocked layouts (and gaps of strided ones) included.
  std::uint64_t bytes = 0;
  bool constant = false;  // kept in the constant tensor cache
  // Times it ran: once per run that reads the tensor in `to`; for a
  // constant whose plan moves data, once per transform into the constant
  // tensor cache (a miss) instead; a constant's library-only plan (nothing
  // moves, nothing is cached) counts per run like any other.
  std::uint64_t executions = 0;
};

struct PRIMCACHE_API executor_stats {
  std::uint64_t runs = 0;
  std::uint64_t transforms_executed = 0;  // transforms run, over all records
  std::uint64_t bytes_transformed = 0;    // their bytes read + written
  std::uint64_t constant_transforms = 0;  // constants transformed (cache misses)
  std::uint64_t constant_cache_hits = 0;  // constants taken from the cache
  std::vector<transform_record> transforms;
};

class PRIMCACHE_API executor {
 public:
  using tensor_map = std::map<std::string, memory, std::less<>>;

  // Compiles `g` (copied: the executor does not refer to it afterwards).
  explicit executor(const graph& g, executor_options options = {});
  ~executor();
  executor(executor&&) noexcept;
  executor& operator=(executor&&) noexcept;

  // Runs the graph on `inputs` (every input tensor, by name, in its
  // declared kernel type) and returns every output tensor by name.
  // Blocks until the outputs are written.
  tensor_map run(const tensor_map& inputs) const;

  executor_stats stats() const;
  // The kernel type op `op` runs as (throws not_found for an unknown op).
  kernel_type op_type(std::string_view op) const;
  // The kernel type a tensor is in after it is produced or given.
  kernel_type tensor_type(std::string_view tensor) const;
  // One line per op and per transform: what will run, in order.
  std::string describe() const;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace primcache
