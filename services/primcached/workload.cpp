#include "workload.hpp"

#include <array>
#include <cstdio>
#include <utility>

#include <boost/json/serialize.hpp>

#include "input_file.hpp"
#include "json_field.hpp"
#include "primcache/base/error.hpp"
#include "primcache/graph/graph_json.hpp"
#include "primcache/transform/kernel_type.hpp"

namespace primcache::primcached {

namespace {

format_tag plain_tag(std::size_t ndims) {
  static constexpr std::array<format_tag, 7> tags = {
      format_tag::undef, format_tag::a,     format_tag::ab,    format_tag::abc,
      format_tag::abcd,  format_tag::abcde, format_tag::abcdef};
  return ndims < tags.size() ? tags[ndims] : format_tag::undef;
}

std::optional<algorithm> parse_eltwise(std::string_view name) {
  static constexpr std::pair<std::string_view, algorithm> table[] = {
      {"relu", algorithm::eltwise_relu},           {"gelu_erf", algorithm::eltwise_gelu_erf},
      {"gelu_tanh", algorithm::eltwise_gelu_tanh}, {"gelu", algorithm::eltwise_gelu_tanh},
      {"tanh", algorithm::eltwise_tanh},           {"logistic", algorithm::eltwise_logistic},
      {"sigmoid", algorithm::eltwise_logistic},    {"exp", algorithm::eltwise_exp},
      {"linear", algorithm::eltwise_linear},       {"clip", algorithm::eltwise_clip},
  };
  if (name.starts_with("eltwise_")) name.remove_prefix(8);
  for (const auto& [n, alg] : table) {
    if (n == name) return alg;
  }
  return std::nullopt;
}

constexpr std::string_view eltwise_names =
    "relu, gelu_erf, gelu_tanh, gelu, tanh, logistic, sigmoid, exp, linear, clip";

algorithm read_eltwise(const json_field& f) {
  const std::string name = f.string();
  std::optional<algorithm> alg = parse_eltwise(name);
  if (!alg)
    f.fail("unknown eltwise algorithm \"" + name + "\" (expected one of " +
           std::string(eltwise_names) + ")");
  return *alg;
}

data_type read_data_type(const json_field& f) {
  const std::string name = f.string();
  std::optional<data_type> dt = parse_data_type(name);
  if (!dt) f.fail("unknown data type \"" + name + "\" (expected f32, f16, bf16, s8, u8 or s32)");
  return *dt;
}

// A layout for a tensor of `ndims` dimensions.
format_tag read_layout(const json_field& f, std::size_t ndims, bool any_allowed) {
  const std::string name = f.string();
  std::optional<format_tag> tag = parse_format_tag(name);
  if (!tag) f.fail("unknown layout \"" + name + "\" (a format tag such as ab, nchw, nChw16c)");
  if (*tag == format_tag::any) {
    if (!any_allowed) f.fail("layout any is allowed for weights only");
    return *tag;
  }
  if (static_cast<std::size_t>(ndims_of(*tag)) != ndims) {
    f.fail("layout " + name + " lays out " + std::to_string(ndims_of(*tag)) +
           " dimensions, the tensor has " + std::to_string(ndims));
  }
  return *tag;
}

// "65536x65536 f32"
std::string tensor_text(const memory::dims& dims, data_type type) {
  std::string text;
  for (std::int64_t d : dims) text += (text.empty() ? "" : "x") + std::to_string(d);
  return text + " " + std::string(to_string(type));
}

// "16 GiB (17179869184 bytes)"; only sizes over the limit are described.
std::string bytes_text(std::uint64_t bytes) {
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f", static_cast<double>(bytes) / (1 << 30));
  std::string text = gib;
  if (text.ends_with(".0")) text.resize(text.size() - 2);
  return text + " GiB (" + std::to_string(bytes) + " bytes)";
}

std::string over_limit_text() {
  return "; a workload tensor may take at most " + std::to_string(max_tensor_bytes >> 30) + " GiB";
}

// Refuses a tensor larger than max_tensor_bytes, as written (dims times the
// element size, without overflow) and, in a blocked layout `layout_name`
// ("" for a plain one), with its padding: every workload thread allocates
// and zeroes each of its entries' tensors. `f` is the field the message
// names, `what` what it says first ("" or "dst (not given: ...) ").
void check_tensor_bytes(const json_field& f, const std::string& what, const tensor_spec& t,
                        const std::string& layout_name) {
  std::uint64_t bytes = size_of(t.type);
  for (std::int64_t d : t.dims) {
    if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes)) {
      f.fail(what + tensor_text(t.dims, t.type) + " takes more than 2^64 bytes" +
             over_limit_text());
    }
  }
  if (bytes > max_tensor_bytes) {
    f.fail(what + tensor_text(t.dims, t.type) + " takes " + bytes_text(bytes) + over_limit_text());
  }
  if (layout_name.empty() || t.layout == format_tag::any) return;
  std::uint64_t padded = 0;
  try {
    padded = t.desc().size_bytes();
  } catch (const error&) {
    return;  // the primitive descriptor refuses it, with the runtime's message
  }
  if (padded > max_tensor_bytes) {
    f.fail(what + tensor_text(t.dims, t.type) + " takes " + bytes_text(padded) + " in layout " +
           layout_name + " (padding included)" + over_limit_text());
  }
}

struct tensor_fields {
  std::optional<json_field> shapes, data_types, layouts;
};

// Reads one named tensor from shapes/data_types/layouts; `dims` is used when
// shapes has no entry for it (nullopt: the shape is required).
tensor_spec read_tensor(const json_field& entry, const tensor_fields& t, std::string_view name,
                        std::optional<memory::dims> dims, bool any_allowed) {
  tensor_spec out;
  const std::optional<json_field> given = t.shapes->member(name);
  if (given) {
    out.dims = given->positive_dims();
  } else if (dims) {
    out.dims = std::move(*dims);
  } else {
    t.shapes->fail("missing field " + std::string(name));
  }
  if (out.dims.size() > 6) {
    t.shapes->required(name).fail("expected at most 6 dimensions");
  }
  if (t.data_types) {
    if (t.data_types->value().is_string()) {
      out.type = read_data_type(*t.data_types);
    } else if (std::optional<json_field> d = t.data_types->member(name)) {
      out.type = read_data_type(*d);
    }
  }
  out.layout = plain_tag(out.dims.size());
  std::string layout_name;
  if (t.layouts) {
    if (std::optional<json_field> l = t.layouts->member(name)) {
      out.layout = read_layout(*l, out.dims.size(), any_allowed);
      layout_name = l->string();
    }
  }
  if (given) {
    check_tensor_bytes(*given, "", out, layout_name);
  } else {
    check_tensor_bytes(*t.shapes, std::string(name) + " (not given: from the other shapes) ", out,
                       layout_name);
  }
  (void)entry;
  return out;
}

void read_attributes(const json_field& attrs, primitive_spec& spec) {
  attrs.allow_only({"post_ops", "output_scales", "output_scales_mask", "constant_weights"});
  if (std::optional<json_field> c = attrs.member("constant_weights")) {
    if (spec.kind != primitive_kind::matmul && spec.kind != primitive_kind::convolution) {
      c->fail("only matmul and convolution have weights");
    }
    spec.constant_weights = c->boolean();
  }
  if (std::optional<json_field> ops = attrs.member("post_ops")) {
    const std::size_t n = ops->array().size();
    for (std::size_t i = 0; i < n; ++i) {
      const json_field op = ops->element(i);
      op.allow_only(
          {"kind", "algorithm", "scale", "alpha", "beta", "shape", "data_type", "layout"});
      const json_field kind = op.required("kind");
      const std::string k = kind.string();
      post_op_spec p;
      if (k == "eltwise") {
        for (std::string_view f : {"shape", "data_type", "layout"}) {
          if (op.has(f)) op.required(f).fail("only binary_add post-ops have an operand");
        }
        p.alg = read_eltwise(op.required("algorithm"));
        if (auto f = op.member("scale")) p.scale = f->finite_float();
        if (auto f = op.member("alpha")) p.alpha = f->finite_float();
        if (auto f = op.member("beta")) p.beta = f->finite_float();
      } else if (k == "binary_add") {
        for (std::string_view f : {"algorithm", "scale", "alpha", "beta"}) {
          if (op.has(f)) op.required(f).fail("only eltwise post-ops have this field");
        }
        p.binary = true;
        p.alg = algorithm::binary_add;
        p.src1.dims = op.has("shape") ? op.required("shape").positive_dims() : spec.dst.dims;
        if (auto f = op.member("data_type")) p.src1.type = read_data_type(*f);
        p.src1.layout = plain_tag(p.src1.dims.size());
        std::string layout_name;
        if (auto f = op.member("layout")) {
          p.src1.layout = read_layout(*f, p.src1.dims.size(), false);
          layout_name = f->string();
        }
        if (op.has("shape")) {
          check_tensor_bytes(op.required("shape"), "", p.src1, layout_name);
        } else {
          check_tensor_bytes(op, "the operand (dst's shape) ", p.src1, layout_name);
        }
      } else {
        kind.fail("unknown post-op kind \"" + k + "\" (expected eltwise or binary_add)");
      }
      spec.post_ops.push_back(std::move(p));
    }
  }
  if (std::optional<json_field> s = attrs.member("output_scales")) {
    spec.output_scales = s->numbers();
  }
  if (std::optional<json_field> m = attrs.member("output_scales_mask")) {
    if (spec.output_scales.empty()) m->fail("given without output_scales");
    spec.output_scales_mask = static_cast<int>(m->integer(0, (1 << 6) - 1));
  }
}

primitive_kind read_kind(const json_field& f) {
  const std::string k = f.string();
  if (k == "matmul") return primitive_kind::matmul;
  if (k == "convolution") return primitive_kind::convolution;
  if (k == "eltwise") return primitive_kind::eltwise;
  if (k == "reorder") return primitive_kind::reorder;
  f.fail("unknown primitive kind \"" + k + "\" (expected matmul, convolution, eltwise or reorder)");
}

primitive_spec read_primitive(const json_field& entry, std::size_t index) {
  entry.object();
  primitive_spec spec;
  spec.kind = read_kind(entry.required("kind"));
  switch (spec.kind) {
    case primitive_kind::matmul:
      entry.allow_only({"name", "kind", "engine", "shapes", "data_types", "layouts", "attributes",
                        "weight", "recreate"});
      break;
    case primitive_kind::convolution:
      entry.allow_only({"name", "kind", "engine", "shapes", "data_types", "layouts", "attributes",
                        "weight", "recreate", "algorithm", "strides", "padding", "padding_l",
                        "padding_r", "dilation"});
      break;
    case primitive_kind::eltwise:
      entry.allow_only({"name", "kind", "engine", "shapes", "data_types", "layouts", "attributes",
                        "weight", "recreate", "algorithm", "alpha", "beta"});
      break;
    case primitive_kind::reorder:
      entry.allow_only({"name", "kind", "engine", "shapes", "data_types", "layouts", "attributes",
                        "weight", "recreate"});
      break;
  }
  spec.name = entry.has("name") ? entry.required("name").string()
                                : std::string(to_string(spec.kind)) + "#" + std::to_string(index);
  if (std::optional<json_field> e = entry.member("engine")) {
    const std::string k = e->string();
    if (k == "cpu") {
      spec.engine = engine_kind::cpu;
    } else if (k == "gpu") {
      spec.engine = engine_kind::gpu;
    } else {
      e->fail("unknown engine \"" + k + "\" (expected cpu or gpu)");
    }
  }
  tensor_fields t;
  t.shapes = entry.required("shapes");
  t.shapes->object();
  t.data_types = entry.member("data_types");
  if (t.data_types && !t.data_types->value().is_string()) t.data_types->object();
  t.layouts = entry.member("layouts");
  if (t.layouts) t.layouts->object();

  auto allow_tensors = [&](std::initializer_list<std::string_view> names) {
    t.shapes->allow_only(names);
    if (t.data_types && t.data_types->value().is_object()) t.data_types->allow_only(names);
    if (t.layouts) t.layouts->allow_only(names);
  };

  switch (spec.kind) {
    case primitive_kind::matmul: {
      allow_tensors({"src", "weights", "bias", "dst"});
      spec.src = read_tensor(entry, t, "src", std::nullopt, false);
      spec.weights = read_tensor(entry, t, "weights", std::nullopt, true);
      memory::dims dst = spec.src.dims;
      dst.back() = spec.weights->dims.back();
      spec.dst = read_tensor(entry, t, "dst", dst, false);
      if (t.shapes->has("bias")) spec.bias = read_tensor(entry, t, "bias", std::nullopt, false);
      break;
    }
    case primitive_kind::convolution: {
      allow_tensors({"src", "weights", "bias", "dst"});
      spec.src = read_tensor(entry, t, "src", std::nullopt, false);
      spec.weights = read_tensor(entry, t, "weights", std::nullopt, true);
      if (spec.src.dims.size() != 4)
        t.shapes->required("src").fail("expected 4 dimensions (N, C, H, W)");
      const std::size_t wn = spec.weights->dims.size();
      if (wn != 4 && wn != 5) {
        t.shapes->required("weights").fail(
            "expected 4 dimensions (O, I, KH, KW), or 5 when grouped");
      }
      spec.strides =
          entry.has("strides") ? entry.required("strides").positive_dims() : memory::dims{1, 1};
      if (spec.strides.size() != 2) entry.required("strides").fail("expected 2 strides");
      spec.dilation = entry.has("dilation") ? entry.required("dilation").non_negative_dims(2)
                                            : memory::dims{0, 0};
      if (entry.has("padding") && (entry.has("padding_l") || entry.has("padding_r"))) {
        entry.required("padding").fail("give padding, or padding_l and padding_r, not both");
      }
      spec.padding_l = spec.padding_r = entry.has("padding")
                                            ? entry.required("padding").non_negative_dims(2)
                                            : memory::dims{0, 0};
      if (entry.has("padding_l")) spec.padding_l = entry.required("padding_l").non_negative_dims(2);
      if (entry.has("padding_r")) spec.padding_r = entry.required("padding_r").non_negative_dims(2);
      if (std::optional<json_field> a = entry.member("algorithm")) {
        const std::string name = a->string();
        if (name == "direct") {
          spec.conv_alg = algorithm::convolution_direct;
        } else if (name == "auto") {
          spec.conv_alg = algorithm::convolution_auto;
        } else {
          a->fail("unknown convolution algorithm \"" + name + "\" (expected direct or auto)");
        }
      }
      const memory::dims& w = spec.weights->dims;
      const std::int64_t oc = wn == 5 ? w[0] * w[1] : w[0];
      memory::dims dst = {spec.src.dims[0], oc, 1, 1};
      for (int d = 0; d < 2; ++d) {
        const std::int64_t k = (w[wn - 2 + d] - 1) * (spec.dilation[d] + 1) + 1;
        const std::int64_t span = spec.src.dims[2 + d] + spec.padding_l[d] + spec.padding_r[d] - k;
        dst[2 + d] = span < 0 ? 1 : span / spec.strides[d] + 1;
      }
      spec.dst = read_tensor(entry, t, "dst", dst, false);
      if (t.shapes->has("bias")) spec.bias = read_tensor(entry, t, "bias", std::nullopt, false);
      break;
    }
    case primitive_kind::eltwise:
      allow_tensors({"src", "dst"});
      spec.src = read_tensor(entry, t, "src", std::nullopt, false);
      spec.dst = read_tensor(entry, t, "dst", spec.src.dims, false);
      spec.eltwise_alg = read_eltwise(entry.required("algorithm"));
      if (auto f = entry.member("alpha")) spec.alpha = f->finite_float();
      if (auto f = entry.member("beta")) spec.beta = f->finite_float();
      break;
    case primitive_kind::reorder:
      allow_tensors({"src", "dst"});
      spec.src = read_tensor(entry, t, "src", std::nullopt, false);
      spec.dst = read_tensor(entry, t, "dst", spec.src.dims, false);
      break;
  }
  if (std::optional<json_field> a = entry.member("attributes")) read_attributes(*a, spec);
  if (std::optional<json_field> w = entry.member("weight")) {
    spec.weight = w->number();
    if (!(spec.weight > 0) || spec.weight > 1e9) w->fail("expected a number > 0");
  }
  if (std::optional<json_field> r = entry.member("recreate")) {
    spec.recreate = r->number();
    if (!(spec.recreate >= 0 && spec.recreate <= 1)) r->fail("expected a number in [0, 1]");
  }
  return spec;
}

primitive_attr make_attr(const primitive_spec& spec) {
  primitive_attr attr;
  if (!spec.post_ops.empty()) {
    post_ops ops;
    for (const post_op_spec& p : spec.post_ops) {
      if (p.binary) {
        ops.append_binary(p.alg, p.src1.desc());
      } else {
        ops.append_eltwise(p.scale, p.alg, p.alpha, p.beta);
      }
    }
    attr.set_post_ops(std::move(ops));
  }
  if (!spec.output_scales.empty()) {
    attr.set_output_scales(spec.output_scales_mask, spec.output_scales);
  }
  if (spec.kind == primitive_kind::matmul || spec.kind == primitive_kind::convolution) {
    attr.set_constant_weights(spec.constant_weights);
  }
  return attr;
}

// The code of a refusal found while loading (docs/primcached.md, exit
// status): what the workload asks for — malformed, or a kernel, transform,
// engine or device this process does not have (the runtime says
// unimplemented, not_found or invalid_arguments) — is invalid_arguments
// (exit 2); a failure of the machine keeps its code (exit 1).
status load_refusal_code(status code) {
  switch (code) {
    case status::out_of_memory:
    case status::runtime_error:
    case status::permission_denied:
    case status::corrupt_data: return code;
    default: return status::invalid_arguments;
  }
}

// Builds the entry's executor; its refusal names the file and the entry.
void build_executor(graph_entry& g, const std::string& where) {
  try {
    g.exec = std::make_shared<const executor>(*g.graph, g.options);
  } catch (const error& e) {
    throw error(load_refusal_code(e.code()), where + ": " + e.message());
  }
}

// The graph of `text` (load_graph_json), its errors prefixed with `where`.
std::shared_ptr<const graph> load_graph_at(const std::string& where, std::string_view text) {
  try {
    return std::make_shared<const graph>(load_graph_json(text));
  } catch (const error& e) {
    throw error(load_refusal_code(e.code()), where + ": " + e.message());
  }
}

// A graph file's graph. Read here, not by load_graph_file (libs/graph), so
// that it is read as the workload is (input_file.hpp: a regular file of at
// most 16 MiB); its errors are worded as load_graph_file's ("graph file
// PATH: cannot be read", "PATH: graph JSON ...", a key given twice
// included), prefixed with `where`.
std::shared_ptr<const graph> load_graph_file_at(const std::string& where, const std::string& path) {
  std::string text;
  try {
    text = read_input_file(path, "graph file " + path + ": cannot be read");
  } catch (const error& e) {
    throw error(e.code(), where + ": " + e.message());
  }
  return load_graph_at(where + ": " + path, text);
}

std::string join_path(const std::string& base_dir, const std::string& path) {
  if (path.front() == '/' || base_dir.empty() || base_dir == ".") return path;
  return base_dir + "/" + path;
}

graph_entry read_graph_entry(const json_field& entry, std::size_t index, const std::string& file,
                             const std::string& base_dir) {
  entry.object();
  entry.allow_only({"name", "file", "graph", "weight", "place", "library", "ignore_op_places"});
  graph_entry g;
  const std::string where = file + ": " + entry.path();
  if (entry.has("file") == entry.has("graph")) {
    entry.fail("expected either file (a graph file) or graph (the graph inline), not " +
               std::string(entry.has("file") ? "both" : "neither"));
  }
  if (std::optional<json_field> f = entry.member("file")) {
    const std::string path = f->string();
    if (path.empty()) f->fail("expected a path");
    g.source = join_path(base_dir, path);
    g.graph = load_graph_file_at(file + ": " + f->path(), g.source);
  } else {
    const json_field inline_graph = entry.required("graph");
    inline_graph.object();
    g.source = file + " " + inline_graph.path();
    const std::string text = boost::json::serialize(inline_graph.value());
    g.graph = load_graph_at(file + ": " + inline_graph.path(), text);
  }
  if (std::optional<json_field> n = entry.member("name")) {
    g.name = n->string();
    if (g.name.empty()) n->fail("expected a non-empty name");
  } else {
    g.name = g.graph->name().empty() ? "graph#" + std::to_string(index) : g.graph->name();
  }
  if (std::optional<json_field> w = entry.member("weight")) {
    g.weight = w->number();
    if (!(g.weight > 0) || g.weight > 1e9) w->fail("expected a number > 0");
  }
  if (std::optional<json_field> p = entry.member("place")) {
    const std::string text = p->string();
    try {
      g.options.place = place::parse(text);
    } catch (const error& e) {
      p->fail("expected a place (cpu, gpu:N): " + e.message());
    }
  }
  if (std::optional<json_field> l = entry.member("library")) {
    g.options.library = l->string();
    if (g.options.library.empty() || g.options.library.find('/') != std::string::npos) {
      l->fail("expected a library name (jit, generic, reference, ...) without '/'");
    }
  }
  if (std::optional<json_field> i = entry.member("ignore_op_places")) {
    g.options.ignore_op_places = i->boolean();
  }
  g.options.metrics_label = g.name;
  build_executor(g, where + " (" + g.name + ")");
  return g;
}

// A workload that is a graph document itself: one graph entry.
graph_entry read_graph_document(std::string_view text, const std::string& file) {
  graph_entry g;
  g.source = file;
  g.graph = load_graph_at(file, text);
  g.name = g.graph->name().empty() ? "graph#0" : g.graph->name();
  g.options.metrics_label = g.name;
  build_executor(g, file + " (" + g.name + ")");
  return g;
}

}  // namespace

std::string_view to_string(primitive_kind kind) noexcept {
  switch (kind) {
    case primitive_kind::matmul: return "matmul";
    case primitive_kind::convolution: return "convolution";
    case primitive_kind::eltwise: return "eltwise";
    case primitive_kind::reorder: return "reorder";
  }
  return "unknown";
}

primitive_desc make_primitive_desc(const primitive_spec& spec, const engine& eng) {
  const primitive_attr attr = make_attr(spec);
  switch (spec.kind) {
    case primitive_kind::matmul: {
      const matmul::desc d =
          spec.bias ? matmul::desc(spec.src.desc(), spec.weights->desc(), spec.bias->desc(),
                                   spec.dst.desc())
                    : matmul::desc(spec.src.desc(), spec.weights->desc(), spec.dst.desc());
      return matmul::primitive_desc(d, attr, eng);
    }
    case primitive_kind::convolution: {
      const convolution_forward::desc d(
          prop_kind::forward_inference, spec.conv_alg, spec.src.desc(), spec.weights->desc(),
          spec.bias ? spec.bias->desc() : memory::desc(), spec.dst.desc(), spec.strides,
          spec.dilation, spec.padding_l, spec.padding_r);
      return convolution_forward::primitive_desc(d, attr, eng);
    }
    case primitive_kind::eltwise: {
      const eltwise_forward::desc d(prop_kind::forward_inference, spec.eltwise_alg, spec.src.desc(),
                                    spec.dst.desc(), spec.alpha, spec.beta);
      return eltwise_forward::primitive_desc(d, attr, eng);
    }
    case primitive_kind::reorder:
      return reorder::primitive_desc(eng, spec.src.desc(), eng, spec.dst.desc(), attr);
  }
  throw error(status::invalid_arguments, "unknown primitive kind");
}

primitive make_primitive(const primitive_desc& pd) {
  // Every kind's primitive is the base primitive made from its descriptor.
  return primitive(pd);
}

workload load_workload(std::string_view text, const std::string& file,
                       const std::string& base_dir) {
  const boost::json::value doc = parse_json_text(text, file);
  const json_field root(doc, file);
  root.object();
  workload w;
  if (root.has("tensors") || root.has("ops")) {
    w.graphs.push_back(read_graph_document(text, file));
    w.name = w.graphs.back().name;
    return w;
  }
  root.allow_only({"name", "description", "primitives", "graphs"});
  if (std::optional<json_field> n = root.member("name")) w.name = n->string();
  if (std::optional<json_field> d = root.member("description")) d->string();
  if (!root.has("primitives") && !root.has("graphs")) {
    root.fail("missing field primitives (or graphs; or a graph document's tensors and ops)");
  }
  const std::optional<json_field> primitives = root.member("primitives");
  const std::size_t count = primitives ? primitives->array().size() : 0;
  if (primitives && count == 0) primitives->fail("expected at least one primitive");
  for (std::size_t i = 0; i < count; ++i) {
    const json_field& list = *primitives;
    const json_field entry = list.element(i);
    w.primitives.push_back(read_primitive(entry, i));
    const primitive_spec& spec = w.primitives.back();
    std::optional<primitive_desc> pd;
    try {
      pd.emplace(make_primitive_desc(spec, engine(spec.engine, 0)));
    } catch (const error& e) {
      if (load_refusal_code(e.code()) != status::invalid_arguments) {
        throw error(e.code(), file + ": " + entry.path() + ": " + e.what());
      }
      entry.fail(e.what());
    }
    // As the primitive lays them out: weights of layout any may be padded.
    static constexpr std::pair<int, std::string_view> args[] = {{PRIMCACHE_ARG_SRC, "src"},
                                                                {PRIMCACHE_ARG_WEIGHTS, "weights"},
                                                                {PRIMCACHE_ARG_BIAS, "bias"},
                                                                {PRIMCACHE_ARG_DST, "dst"}};
    for (const auto& [arg, name] : args) {
      const std::uint64_t bytes = pd->query_md(arg).size_bytes();
      if (bytes > max_tensor_bytes) {
        entry.fail(std::string(name) + " takes " + bytes_text(bytes) +
                   " as the primitive lays it out (padding included)" + over_limit_text());
      }
    }
  }
  // After the primitives: building an executor creates its primitives.
  if (std::optional<json_field> graphs = root.member("graphs")) {
    const std::size_t n = graphs->array().size();
    if (n == 0) graphs->fail("expected at least one graph");
    for (std::size_t i = 0; i < n; ++i) {
      w.graphs.push_back(read_graph_entry(graphs->element(i), i, file, base_dir));
    }
  }
  return w;
}

}  // namespace primcache::primcached
