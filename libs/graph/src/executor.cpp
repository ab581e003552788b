// The graph executor: compiles a graph into steps (kernel types, bound
// kernels, planned transforms) once, then runs them per call.
#include "primcache/graph/executor.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "primcache/base/error.hpp"
#include "primcache/base/utf8.hpp"
#include "primcache/const_cache/constant_buffer.hpp"
#include "primcache/const_cache/constant_key.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/graph/op_registry.hpp"
#include "primcache/runtime/constant_cache.hpp"
#include "primcache/runtime/stream.hpp"
#include "primcache/transform/transform_registry.hpp"

namespace primcache {

namespace {

// The constant tensor caches' backend id of the graph executor's tensors.
constexpr std::uint64_t graph_constant_backend_id = 0x6772617068ULL;  // "graph"

[[noreturn]] void fail(status code, std::string message) {
  throw error(code, std::move(message));
}

// `text` as a metric label value. control refuses a value that is not UTF-8
// (it would make the whole exposition unparseable), and a graph's name, its
// metrics label and a user's library name reach the labels unchecked
// through the C++ API: escaped (escape_invalid_utf8), "r\xe9sum\xe9"
// (Latin-1) is exported as the text r\xe9sum\xe9.
std::string metric_label_value(std::string_view text) {
  return escape_invalid_utf8(text);
}

// A transformed constant kept in a constant tensor cache: the memory itself
// (host or device), whose handle the buffer reports as its data.
class memory_buffer final : public constant_buffer {
 public:
  explicit memory_buffer(memory m)
      : constant_buffer(
            m.get_desc().size_bytes(), [h = m.get_data_handle()](std::size_t) { return h; },
            [](void*, std::size_t) {}),  // the memory member frees it
        memory_(std::move(m)) {}
  const memory& get() const noexcept { return memory_; }

 private:
  memory memory_;
};

struct site {
  std::size_t tensor = 0;
  std::string first_op;
  kernel_type from, to;
  std::shared_ptr<const transform_plan> plan;
  std::uint64_t bytes = 0;
  bool moves_data = false;
  bool constant = false;
  // Constants: the constant cache key's bytes but the data's identity, which
  // each run appends (constant_key_of).
  std::string key_bytes;
  // Constants: the engine the transformed tensor is written on and kept in
  // the cache of (the engine the ops reading it run on), and its descriptor.
  std::optional<engine> to_engine;
  memory_desc to_desc;
  std::size_t size_bytes = 0;
  mutable std::atomic<std::uint64_t> executions{0};
  // control()'s series (default handles record nothing: metrics off)
  metric_counter executions_metric, bytes_metric;

  void count() const noexcept {
    executions.fetch_add(1, std::memory_order_relaxed);
    executions_metric.add();
    bytes_metric.add(bytes);
  }
};

struct step {
  std::string name;
  std::string kind;
  kernel_type type;
  std::optional<engine> eng;
  std::unique_ptr<bound_kernel> kernel;
  std::vector<std::size_t> inputs;  // tensor indices
  std::vector<std::optional<std::size_t>> input_sites;
  std::vector<std::size_t> outputs;  // tensor indices
  std::vector<memory_desc> output_descs;
  std::vector<std::optional<std::size_t>> delivery_sites;
};

struct tensor_state {
  std::string name;
  tensor_role role = tensor_role::input;
  tensor_shape shape;
  kernel_type type;  // after it is given or delivered
  memory_desc desc;  // the same as a descriptor
  memory data;       // constants
};

}  // namespace

struct executor::state {
  std::string graph_name;
  executor_options options;
  std::vector<tensor_state> tensors;
  std::unordered_map<std::string, std::size_t> tensor_index;
  std::vector<step> steps;
  std::vector<std::unique_ptr<site>> sites;
  // tensor -> its sites (one per kernel type it is wanted in), so that
  // add_site finds one in constant time however many the graph has.
  std::unordered_map<std::size_t, std::vector<std::size_t>> sites_of_tensor;
  std::vector<std::size_t> inputs, outputs;  // tensor indices
  mutable std::atomic<std::uint64_t> runs{0};
  mutable std::atomic<std::uint64_t> constant_hits{0};
  metric_counter runs_metric, constant_transforms_metric, constant_hits_metric;

  void register_metrics();
  memory run_site(const site& s, const memory& src) const;
  std::size_t add_site(std::size_t tensor, const std::string& op, const kernel_type& from,
                       const kernel_type& to, const engine& reader, transform_registry& transforms);
};

namespace {

void append_u64(std::string& bytes, std::uint64_t v) {
  bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// The constant cache key bytes of a constant transformed to `to` (for
// `dims`) and kept on `eng`, but for the data (constant_key_of). The engine
// is named by its device object (kind, index and address), as the OpenCL
// backend names the cl_context of its packed weights: two engines of one
// device (the default one and a user's interop context) never share an
// entry, whose buffer only its own engine's kernels read. The cached memory
// holds its engine, so while the entry lives the address cannot name
// another engine.
std::string constant_key_bytes(const kernel_type& to, const engine& eng,
                               const std::vector<std::int64_t>& dims) {
  std::string bytes = "graph/engine/";
  append_u64(bytes, static_cast<std::uint64_t>(eng.get_kind()));
  append_u64(bytes, eng.get_index());
  append_u64(bytes, reinterpret_cast<std::uintptr_t>(&backend::impl_of(eng)));
  bytes += "/" + to.to_string() + "/" + dims_to_string(dims) + "/data/";
  return bytes;
}

// The key of constant site `s` for its data `data` as it is now: the memory
// id names the data, never an address (a freed buffer's address comes back
// from the next allocation), and it changes with set_data_handle, which
// gives the constant other data.
constant_key constant_key_of(const site& s, const memory& data) {
  std::string bytes = s.key_bytes;
  append_u64(bytes, data.get_id());
  return constant_key(graph_constant_backend_id, bytes);
}

// What an op kernel's input_type or output_type (`f`) says about the
// op's `tensor`; a failure (a user kernel's, or an attribute it reads) is
// prefixed with the op (`where`) and the tensor unless it names the op
// already.
template <typename F>
kernel_type kernel_call(const std::string& where, const std::string& tensor, F&& f) {
  try {
    return f();
  } catch (const error& e) {
    if (e.message().rfind(where, 0) == 0) throw;
    fail(e.code(), where + " " + tensor + ": " + e.message());
  }
}

}  // namespace

// `reader`: the engine of the op that reads the tensor in `to` (constants
// are written there; a delivered output, never a constant, passes its
// writer's).
std::size_t executor::state::add_site(std::size_t tensor, const std::string& op,
                                      const kernel_type& from, const kernel_type& to,
                                      const engine& reader, transform_registry& transforms) {
  std::vector<std::size_t>& of_tensor = sites_of_tensor[tensor];
  for (std::size_t i : of_tensor) {
    if (sites[i]->to == to) return i;  // one per run
  }
  const tensor_state& t = tensors[tensor];
  auto s = std::make_unique<site>();
  s->tensor = tensor;
  s->first_op = op;
  s->from = from;
  s->to = to;
  try {
    s->plan = transforms.plan(from, to, t.shape.dims);
  } catch (const error& e) {
    fail(e.code(),
         (op.empty() ? "output '" + t.name + "'" : "op '" + op + "' input '" + t.name + "'") +
             ": " + e.message());
  }
  s->bytes = s->plan->bytes();  // padding of blocked layouts included
  for (const auto& st : s->plan->steps) {
    if (st.kind != transform_kind::library) s->moves_data = true;
  }
  s->constant = t.role == tensor_role::constant;
  if (s->constant && s->moves_data) {
    // Written on the reader's engine, not where the plan would leave it: a
    // plan within one place stays on the engine of the memory it reads,
    // which for data on a user's OpenCL context (an interop engine) is not
    // the engine the op runs on (its place's default one), and a kernel
    // reads only memory of its own engine. execute_plan into memory of the
    // reader's engine goes through the host between two contexts.
    const engine eng = place::of(reader) == to.place ? reader : to.place.get_engine();
    s->to_desc = to.layout.desc_for(t.shape.dims, to.data_type);
    s->key_bytes = constant_key_bytes(to, eng, t.shape.dims);
    s->to_engine.emplace(eng);
    s->size_bytes = s->to_desc.size_bytes();
  }
  of_tensor.reserve(of_tensor.size() + 1);
  sites.push_back(std::move(s));
  of_tensor.push_back(sites.size() - 1);
  return sites.size() - 1;
}

memory executor::state::run_site(const site& s, const memory& src) const {
  if (!s.moves_data) {
    s.count();
    return src;  // another library reads the same bytes
  }
  if (!s.constant) {
    s.count();
    return execute_plan(*s.plan, src);
  }
  // Transformed once per engine and data: the cache de-duplicates concurrent
  // first runs (one creator, the others wait for its buffer). `src` is the
  // constant's memory (the graph's handle), keyed by its data now, not as
  // it was when the executor was built.
  constant_tensor_cache& cache = constant_tensor_cache_for(*s.to_engine);
  const constant_key key = constant_key_of(s, src);
  auto r = cache.get_or_add(key, s.size_bytes, [&]() -> std::shared_ptr<const constant_buffer> {
    s.count();
    constant_transforms_metric.add();
    memory out(s.to_desc, *s.to_engine);
    execute_plan(*s.plan, src, out);
    return std::make_shared<memory_buffer>(std::move(out));
  });
  if (r.outcome == lookup_outcome::miss) {
    // No one can look this entry up once the id is gone (the memory's last
    // copy, or set_data_handle): drop it then, as the backends drop their
    // packed weights, instead of holding its host or device memory until an
    // eviction. Once per entry and memory id (the token is the key). The
    // cache is never destroyed (constant_caches()).
    backend::on_data_release(src, key.bytes(), [key, &cache]() noexcept {
      try {
        cache.remove_if_exist(key);
      } catch (...) {
        // Out of memory while removing: the entry stays until an eviction.
      }
    });
  } else {
    constant_hits.fetch_add(1, std::memory_order_relaxed);
    constant_hits_metric.add();
  }
  return static_cast<const memory_buffer&>(*r.value).get();
}

executor::executor(const graph& g, executor_options options) : state_(std::make_unique<state>()) {
  state& st = *state_;
  st.graph_name = g.name();
  st.options = std::move(options);
  op_registry& ops = st.options.ops ? *st.options.ops : op_registry::global();
  transform_registry& transforms =
      st.options.transforms ? *st.options.transforms : transform_registry::global();
  const library lib{st.options.library};
  const std::vector<std::size_t> order = g.validate();

  // Declared tensors; produced ones get their shapes and types below.
  for (const auto& t : g.tensors()) {
    tensor_state ts;
    ts.name = t.name;
    ts.role = t.role;
    // The transform plans below do not create engines: a place without a
    // device would otherwise load and fail every run.
    if (t.place) {
      try {
        t.place->get_engine();
      } catch (const error& e) {
        fail(e.code(), "tensor '" + t.name + "' (" + std::string(to_string(t.role)) + ") is on " +
                           t.place->to_string() + ": " + e.message());
      }
    }
    if (t.role == tensor_role::input || t.role == tensor_role::constant) {
      ts.shape = {t.dims, t.type};
      ts.type = declared_type(t, lib);
      ts.desc = ts.type.layout.desc_for(t.dims, t.type);
      if (t.role == tensor_role::constant) ts.data = g.data(t.name);
      if (t.role == tensor_role::input) st.inputs.push_back(st.tensors.size());
    } else if (t.role == tensor_role::output) {
      st.outputs.push_back(st.tensors.size());
    }
    st.tensor_index.emplace(t.name, st.tensors.size());
    st.tensors.push_back(std::move(ts));
  }

  for (std::size_t oi : order) {
    const op_spec& op = g.ops()[oi];
    step s;
    s.name = op.name;
    s.kind = op.kind;
    const std::string where = "op '" + op.name + "' (" + op.kind + ")";
    shape_function shapes = ops.find_kind(op.kind);
    if (!shapes) {
      std::string known;
      for (const auto& k : ops.kinds()) known += (known.empty() ? "" : ", ") + k;
      fail(status::invalid_arguments,
           "op '" + op.name + "': unknown op kind '" + op.kind + "' (known: " + known + ")");
    }
    if (const auto accepted = ops.accepted_attributes(op.kind)) {
      for (const auto& [key, value] : op.attributes) {
        if (std::binary_search(accepted->begin(), accepted->end(), key)) continue;
        std::string names;
        for (const auto& a : *accepted) names += (names.empty() ? "" : ", ") + a;
        fail(status::invalid_arguments, where + ": unknown attribute '" + key + "' (accepted: " +
                                            (names.empty() ? "none" : names) + ")");
      }
    }
    std::vector<tensor_shape> in_shapes;
    for (const auto& name : op.inputs) {
      const std::size_t ti = st.tensor_index.at(name);
      s.inputs.push_back(ti);
      in_shapes.push_back(st.tensors[ti].shape);
    }
    if (in_shapes.empty()) fail(status::invalid_arguments, where + " has no inputs");
    const std::vector<tensor_shape> out_shapes = shapes(op, in_shapes);
    if (out_shapes.size() != op.outputs.size()) {
      fail(status::invalid_arguments, where + " writes " + std::to_string(out_shapes.size()) +
                                          " tensors, the graph gives it " +
                                          std::to_string(op.outputs.size()));
    }
    // Every run allocates what the op writes.
    for (std::size_t k = 0; k < out_shapes.size(); ++k) {
      const tensor_spec& spec = *g.find_tensor(op.outputs[k]);
      check_tensor_bytes("tensor '" + spec.name + "' (" + std::string(to_string(spec.role)) +
                             ", written by op '" + op.name + "')",
                         out_shapes[k].dims, out_shapes[k].type);
    }
    // The op's layout lays out its activations, of its first output's rank
    // (layout_for_rank gives inputs of other ranks, such as a bias, the
    // plain layout); another rank is a mistake, not a request for plain.
    const auto out_rank = static_cast<int>(out_shapes[0].dims.size());
    if (op.layout.ndims() != 0 && op.layout.ndims() != out_rank) {
      fail(status::invalid_arguments, where + ": layout " + op.layout.to_string() + " lays out " +
                                          std::to_string(op.layout.ndims()) +
                                          " dims, its output '" + op.outputs[0] + "' has " +
                                          std::to_string(out_rank));
    }
    // The op's kernel type: its own choices, else the executor's.
    kernel_type& type = s.type;
    type.place = (op.place && !st.options.ignore_op_places) ? *op.place : st.options.place;
    type.library = op.library ? library{*op.library} : lib;
    type.data_type = op.type != data_type::undef ? op.type : in_shapes[0].type;
    // Plain when the op names none (of its first output's rank).
    type.layout = op.layout.ndims() != 0 ? op.layout : plain_layout(out_rank);
    auto kernel = ops.find_kernel(op.kind, type.place.kind, type.library.name);
    if (!kernel) {
      std::string have;
      for (const auto& k : ops.kernels_of(op.kind)) have += (have.empty() ? "" : ", ") + k;
      fail(status::unimplemented,
           where + ": no kernel for " + std::string(to_string(type.place.kind)) + "/" +
               type.library.name + " (registered: " + (have.empty() ? "none" : have) + ")");
    }
    try {
      s.eng.emplace(type.place.get_engine());
    } catch (const error& e) {
      fail(e.code(), where + " runs on " + type.place.to_string() + ": " + e.message());
    }

    std::vector<memory_desc> in_descs;
    std::vector<bool> constant_inputs;
    for (std::size_t k = 0; k < s.inputs.size(); ++k) {
      const std::size_t ti = s.inputs[k];
      const tensor_state& t = st.tensors[ti];
      const kernel_type want = kernel_call(where, "input '" + t.name + "'", [&] {
        return kernel->input_type(op, k, t.shape, type, t.type);
      });
      if (want == t.type) {
        // Read as given: a constant on another engine of the op's place (a
        // user's OpenCL context) is memory the op's kernel cannot read.
        if (t.role == tensor_role::constant && want.place == type.place &&
            !(t.data.get_engine() == *s.eng)) {
          fail(status::invalid_arguments,
               where + " runs on " + type.place.to_string() +
                   "'s default engine and reads constant '" + t.name + "' as " + want.to_string() +
                   " as given, but its data is on another engine of " + type.place.to_string() +
                   " (another OpenCL context): give the data on engine(" +
                   std::string(to_string(type.place.kind)) + ", " +
                   std::to_string(type.place.index) + ") or on the CPU");
        }
        s.input_sites.emplace_back();
        in_descs.push_back(t.desc);
      } else {
        // The plan first (it names both kernel types when there is none);
        // then every run (a constant once) allocates the transformed tensor.
        s.input_sites.emplace_back(st.add_site(ti, op.name, t.type, want, *s.eng, transforms));
        in_descs.push_back(
            checked_tensor_desc("tensor '" + t.name + "' (" + std::string(to_string(t.role)) +
                                    ", read by op '" + op.name + "' as " + want.to_string() + ")",
                                want.layout, t.shape.dims, want.data_type));
      }
      constant_inputs.push_back(t.role == tensor_role::constant);
    }
    std::vector<kernel_type> out_types;
    for (std::size_t k = 0; k < op.outputs.size(); ++k) {
      const std::size_t ti = st.tensor_index.at(op.outputs[k]);
      const tensor_spec& spec = *g.find_tensor(op.outputs[k]);
      const tensor_shape& shape = out_shapes[k];
      if (!spec.dims.empty() && spec.dims != shape.dims) {
        fail(status::invalid_arguments, where + " writes tensor '" + spec.name + "' as " +
                                            dims_to_string(shape.dims) + ", the tensor declares " +
                                            dims_to_string(spec.dims));
      }
      if (spec.type != data_type::undef && spec.type != shape.type) {
        fail(status::invalid_arguments,
             where + " writes tensor '" + spec.name + "' as " + std::string(to_string(shape.type)) +
                 ", the tensor declares " + std::string(to_string(spec.type)));
      }
      if (spec.layout.ndims() != 0 && spec.layout.ndims() != static_cast<int>(shape.dims.size())) {
        fail(status::invalid_arguments, "tensor '" + spec.name + "' declares layout " +
                                            spec.layout.to_string() + " for " +
                                            std::to_string(shape.dims.size()) + " dims");
      }
      const kernel_type written = kernel_call(where, "output '" + spec.name + "'", [&] {
        return kernel->output_type(op, k, shape, type);
      });
      s.outputs.push_back(ti);
      const std::string role = std::string(to_string(spec.role));
      s.output_descs.push_back(checked_tensor_desc(
          "tensor '" + spec.name + "' (" + role + ", written by op '" + op.name + "')",
          written.layout, shape.dims, written.data_type));
      out_types.push_back(written);
      tensor_state& t = st.tensors[ti];
      t.shape = shape;
      t.type = written;
      t.desc = s.output_descs.back();
      kernel_type delivered = written;
      if (spec.layout.ndims() != 0) delivered.layout = spec.layout;
      if (spec.place) delivered.place = *spec.place;
      if (delivered == written) {
        s.delivery_sites.emplace_back();
      } else {
        t.type = delivered;
        t.desc = checked_tensor_desc(
            "tensor '" + spec.name + "' (" + role + ", delivered from op '" + op.name + "')",
            delivered.layout, shape.dims, delivered.data_type);
        s.delivery_sites.emplace_back(st.add_site(ti, "", written, delivered, *s.eng, transforms));
      }
    }
    try {
      s.kernel = kernel->bind(
          kernel_binding{&op, *s.eng, type, in_descs, s.output_descs, constant_inputs});
    } catch (const error& e) {
      fail(e.code(), where + " as " + type.to_string() + ": " + e.message());
    }
    st.steps.push_back(std::move(s));
  }
  if (st.options.export_metrics) st.register_metrics();
}

void executor::state::register_metrics() {
  const std::string label = metric_label_value(!options.metrics_label.empty()
                                                   ? options.metrics_label
                                                   : (graph_name.empty() ? "unnamed" : graph_name));
  control_registry& c = control();
  const metric_labels graph_labels = {{"graph", label}};
  runs_metric = c.counter("primcache_graph_runs_total", "Graph executor runs", graph_labels);
  constant_transforms_metric = c.counter(
      "primcache_graph_constant_transforms_total",
      "Constant tensors transformed by graph executors (constant cache misses)", graph_labels);
  constant_hits_metric = c.counter("primcache_graph_constant_cache_hits_total",
                                   "Transformed constants a graph executor took from the "
                                   "constant tensor cache",
                                   graph_labels);
  for (const auto& p : sites) {
    std::string kinds;
    for (const auto& st : p->plan->steps) {
      kinds += (kinds.empty() ? "" : ",") + std::string(to_string(st.kind));
    }
    const metric_labels labels = {{"from", metric_label_value(p->from.to_string())},
                                  {"graph", label},
                                  {"steps", kinds},
                                  {"to", metric_label_value(p->to.to_string())}};
    p->executions_metric =
        c.counter("primcache_graph_transform_executions_total",
                  "Transforms a graph executor ran, by source and target kernel type", labels);
    p->bytes_metric = c.counter("primcache_graph_transform_bytes_total",
                                "Bytes read plus written by a graph executor's transforms, by "
                                "source and target kernel type",
                                labels);
  }
}

executor::~executor() = default;
executor::executor(executor&&) noexcept = default;
executor& executor::operator=(executor&&) noexcept = default;

executor::tensor_map executor::run(const tensor_map& inputs) const {
  const state& st = *state_;
  std::vector<memory> values(st.tensors.size());
  for (const auto& [name, mem] : inputs) {
    auto it = st.tensor_index.find(name);
    if (it == st.tensor_index.end() || st.tensors[it->second].role != tensor_role::input) {
      std::string names;
      for (std::size_t i : st.inputs) names += (names.empty() ? "" : ", ") + st.tensors[i].name;
      fail(status::invalid_arguments, "run: '" + name + "' is not an input of graph '" +
                                          st.graph_name + "' (inputs: " + names + ")");
    }
    const tensor_state& t = st.tensors[it->second];
    if (!mem) fail(status::invalid_arguments, "run: input '" + name + "' is an empty memory");
    if (!(mem.get_desc() == t.desc)) {
      fail(status::invalid_arguments, "run: input '" + name + "' is " + mem.get_desc().to_string() +
                                          ", the graph declares " + t.desc.to_string());
    }
    if (!(place::of(mem.get_engine()) == t.type.place)) {
      fail(status::invalid_arguments, "run: input '" + name + "' is on " +
                                          place::of(mem.get_engine()).to_string() +
                                          ", the graph declares " + t.type.place.to_string());
    }
    values[it->second] = mem;
  }
  for (std::size_t i : st.inputs) {
    if (!values[i])
      fail(status::invalid_arguments, "run: input '" + st.tensors[i].name + "' is missing");
  }
  for (std::size_t i = 0; i < st.tensors.size(); ++i) {
    if (st.tensors[i].role == tensor_role::constant) values[i] = st.tensors[i].data;
  }

  std::vector<memory> transformed(st.sites.size());  // live for this run
  std::vector<std::pair<engine, stream>> streams;
  auto stream_for = [&](const engine& eng) -> stream& {
    for (auto& [e, s] : streams) {
      if (e == eng) return s;
    }
    streams.emplace_back(eng, stream(eng));
    return streams.back().second;
  };
  std::vector<memory> ins, outs;
  for (const step& s : st.steps) {
    ins.clear();
    outs.clear();
    for (std::size_t k = 0; k < s.inputs.size(); ++k) {
      const memory& v = values[s.inputs[k]];
      if (const auto& si = s.input_sites[k]) {
        if (!transformed[*si]) transformed[*si] = st.run_site(*st.sites[*si], v);
        ins.push_back(transformed[*si]);
      } else {
        ins.push_back(v);
      }
    }
    for (const auto& md : s.output_descs) outs.emplace_back(md, *s.eng);
    stream& strm = stream_for(*s.eng);
    s.kernel->execute(strm, ins, outs);
    // Device streams return at submission: the outputs are read next by
    // transforms on other streams (or by the caller).
    strm.wait();
    for (std::size_t k = 0; k < s.outputs.size(); ++k) {
      if (const auto& d = s.delivery_sites[k]) {
        values[s.outputs[k]] = st.run_site(*st.sites[*d], outs[k]);
      } else {
        values[s.outputs[k]] = outs[k];
      }
    }
  }
  tensor_map out;
  for (std::size_t i : st.outputs) out.emplace(st.tensors[i].name, values[i]);
  st.runs.fetch_add(1, std::memory_order_relaxed);
  st.runs_metric.add();
  return out;
}

executor_stats executor::stats() const {
  const state& st = *state_;
  executor_stats s;
  s.runs = st.runs.load(std::memory_order_relaxed);
  s.constant_cache_hits = st.constant_hits.load(std::memory_order_relaxed);
  for (const auto& p : st.sites) {
    transform_record r;
    r.tensor = st.tensors[p->tensor].name;
    r.op = p->first_op;
    r.from = p->from;
    r.to = p->to;
    for (const auto& step : p->plan->steps) r.steps.push_back(step.kind);
    r.bytes = p->bytes;
    r.constant = p->constant;
    r.executions = p->executions.load(std::memory_order_relaxed);
    s.transforms_executed += r.executions;
    s.bytes_transformed += r.executions * r.bytes;
    if (r.constant && p->moves_data) s.constant_transforms += r.executions;
    s.transforms.push_back(std::move(r));
  }
  return s;
}

kernel_type executor::op_type(std::string_view op) const {
  for (const auto& s : state_->steps) {
    if (s.name == op) return s.type;
  }
  fail(status::not_found, "graph '" + state_->graph_name + "' has no op '" + std::string(op) + "'");
}

kernel_type executor::tensor_type(std::string_view tensor) const {
  auto it = state_->tensor_index.find(std::string(tensor));
  if (it == state_->tensor_index.end()) {
    fail(status::not_found,
         "graph '" + state_->graph_name + "' has no tensor '" + std::string(tensor) + "'");
  }
  return state_->tensors[it->second].type;
}

std::string executor::describe() const {
  const state& st = *state_;
  std::string out;
  auto site_line = [&](std::size_t i) {
    const site& p = *st.sites[i];
    std::string kinds;
    for (const auto& step : p.plan->steps) {
      kinds += (kinds.empty() ? "" : ", ") + std::string(to_string(step.kind));
    }
    out += "  transform " + st.tensors[p.tensor].name + ": " + p.from.to_string() + " -> " +
           p.to.to_string() + " [" + kinds + "] " + std::to_string(p.bytes) + " B" +
           (p.constant ? " (constant, once)" : "") + "\n";
  };
  for (const auto& s : st.steps) {
    for (const auto& si : s.input_sites) {
      if (si && st.sites[*si]->first_op == s.name) site_line(*si);
    }
    out += "op " + s.name + " (" + s.kind + ") as " + s.type.to_string() + ":";
    for (std::size_t k = 0; k < s.inputs.size(); ++k)
      out += (k ? ", " : " ") + st.tensors[s.inputs[k]].name;
    out += " ->";
    for (std::size_t k = 0; k < s.outputs.size(); ++k)
      out += (k ? ", " : " ") + st.tensors[s.outputs[k]].name;
    out += "\n";
    for (const auto& d : s.delivery_sites) {
      if (d) site_line(*d);
    }
  }
  return out;
}

}  // namespace primcache
