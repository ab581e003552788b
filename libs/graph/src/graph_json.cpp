// Graphs as JSON: loading with precise errors (JSON pointers into the
// document), and filling tensors from their "init".
#include "primcache/graph/graph_json.hpp"

#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <utility>

#include "primcache/base/error.hpp"
#include "primcache/base/json_keys.hpp"
#include "primcache/base/regular_file.hpp"

namespace primcache {

namespace {

namespace json = boost::json;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw error(status::invalid_arguments,
              "graph JSON " + (where.empty() ? "/" : where) + ": " + what);
}

const char* kind_of(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::bool_: return "a boolean";
    case json::kind::int64:
    case json::kind::uint64: return "an integer";
    case json::kind::double_: return "a float";
    case json::kind::string: return "a string";
    case json::kind::array: return "an array";
    case json::kind::object: return "an object";
  }
  return "a value";
}

std::string at(const std::string& where, std::string_view key) {
  return where + "/" + std::string(key);
}
std::string at(const std::string& where, std::size_t i) {
  return where + "/" + std::to_string(i);
}

const json::object& as_object(const json::value& v, const std::string& where) {
  if (!v.is_object()) fail(where, std::string("expected an object, got ") + kind_of(v));
  return v.get_object();
}
const json::array& as_array(const json::value& v, const std::string& where) {
  if (!v.is_array()) fail(where, std::string("expected an array, got ") + kind_of(v));
  return v.get_array();
}
std::string as_string(const json::value& v, const std::string& where) {
  if (!v.is_string()) fail(where, std::string("expected a string, got ") + kind_of(v));
  return std::string(v.get_string());
}
std::int64_t as_int(const json::value& v, const std::string& where) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64()) fail(where, "integer " + std::to_string(v.get_uint64()) + " is too large");
  fail(where, std::string("expected an integer, got ") + kind_of(v));
}
double as_number(const json::value& v, const std::string& where) {
  if (v.is_double()) return v.get_double();
  if (v.is_int64()) return static_cast<double>(v.get_int64());
  if (v.is_uint64()) return static_cast<double>(v.get_uint64());
  fail(where, std::string("expected a number, got ") + kind_of(v));
}
std::vector<std::string> as_strings(const json::value& v, const std::string& where) {
  std::vector<std::string> out;
  const auto& a = as_array(v, where);
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(as_string(a[i], at(where, i)));
  return out;
}

// Every key of `o` must be one of `known`.
void check_keys(const json::object& o, const std::string& where,
                std::initializer_list<std::string_view> known) {
  for (const auto& kv : o) {
    bool ok = false;
    for (auto k : known) ok = ok || k == kv.key();
    if (!ok) {
      std::string list;
      for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(at(where, kv.key()),
           "unknown key \"" + std::string(kv.key()) + "\" (known: " + list + ")");
    }
  }
}

const json::value* find(const json::object& o, std::string_view key) {
  auto it = o.find(key);
  return it == o.end() ? nullptr : &it->value();
}
const json::value& require(const json::object& o, std::string_view key, const std::string& where) {
  if (const auto* v = find(o, key)) return *v;
  fail(where, "missing \"" + std::string(key) + "\"");
}

data_type parse_type(const json::value& v, const std::string& where) {
  const std::string s = as_string(v, where);
  auto dt = parse_data_type(s);
  if (!dt || *dt == data_type::undef)
    fail(where, "unknown data type \"" + s + "\" (f32, bf16, f16, s8, u8, s32)");
  return *dt;
}
layout parse_layout(const json::value& v, const std::string& where) {
  const std::string s = as_string(v, where);
  try {
    return layout::parse(s);
  } catch (const error& e) {
    fail(where, "bad layout \"" + s + "\": " + e.message());
  }
}
place parse_place(const json::value& v, const std::string& where) {
  const std::string s = as_string(v, where);
  try {
    return place::parse(s);
  } catch (const error& e) {
    fail(where, "bad place \"" + s + "\" (cpu or gpu:N): " + e.message());
  }
}
std::string parse_name(const json::value& v, const std::string& where) {
  std::string s = as_string(v, where);
  if (s.empty()) fail(where, "a name must not be empty");
  return s;
}

// `value` as written in messages (1e+39, -0.5).
std::string number_string(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// An init value, which must be a finite float: the data is made in f32,
// where a larger one is inf and the elements made from it inf or NaN.
double parse_init_value(const json::value& v, const std::string& where) {
  const double x = as_number(v, where);
  if (!(std::abs(x) <= std::numeric_limits<float>::max())) {
    fail(where, number_string(x) + " is not a finite float (at most " +
                    number_string(std::numeric_limits<float>::max()) + " in magnitude)");
  }
  return x;
}

tensor_init parse_init(const json::value& v, const std::string& where) {
  const auto& o = as_object(v, where);
  check_keys(o, where, {"kind", "low", "high", "seed", "value"});
  tensor_init init;
  const std::string kind = as_string(require(o, "kind", where), at(where, "kind"));
  if (kind == "uniform") {
    init.kind = tensor_init::kind::uniform;
    if (find(o, "value")) fail(at(where, "value"), "\"value\" belongs to kind \"fill\"");
    if (const auto* x = find(o, "low")) init.low = parse_init_value(*x, at(where, "low"));
    if (const auto* x = find(o, "high")) init.high = parse_init_value(*x, at(where, "high"));
    if (const auto* x = find(o, "seed")) {
      const auto seed = as_int(*x, at(where, "seed"));
      if (seed < 0) fail(at(where, "seed"), "a seed must not be negative");
      init.seed = static_cast<std::uint64_t>(seed);
    }
    if (!(init.low < init.high)) fail(where, "uniform needs low < high");
  } else if (kind == "fill") {
    init.kind = tensor_init::kind::fill;
    for (auto k : {"low", "high", "seed"}) {
      if (find(o, k)) fail(at(where, k), "\"" + std::string(k) + "\" belongs to kind \"uniform\"");
    }
    init.value = parse_init_value(require(o, "value", where), at(where, "value"));
  } else {
    fail(at(where, "kind"), "unknown init kind \"" + kind + "\" (uniform, fill)");
  }
  return init;
}

tensor_spec parse_tensor(const json::value& v, const std::string& where) {
  const auto& o = as_object(v, where);
  check_keys(o, where, {"name", "shape", "type", "layout", "place", "role", "init"});
  tensor_spec t;
  t.name = parse_name(require(o, "name", where), at(where, "name"));
  const std::string role = as_string(require(o, "role", where), at(where, "role"));
  auto r = parse_tensor_role(role);
  if (!r)
    fail(at(where, "role"),
         "unknown role \"" + role + "\" (input, constant, intermediate, output)");
  t.role = *r;
  if (const auto* x = find(o, "shape")) {
    const auto& a = as_array(*x, at(where, "shape"));
    if (a.empty() || a.size() > 6)
      fail(at(where, "shape"), "a shape has 1 to 6 dims, not " + std::to_string(a.size()));
    for (std::size_t i = 0; i < a.size(); ++i) {
      const auto d = as_int(a[i], at(at(where, "shape"), i));
      if (d <= 0)
        fail(at(at(where, "shape"), i), "dims must be positive, not " + std::to_string(d));
      t.dims.push_back(d);
    }
  }
  if (const auto* x = find(o, "type")) t.type = parse_type(*x, at(where, "type"));
  if (const auto* x = find(o, "layout")) t.layout = parse_layout(*x, at(where, "layout"));
  if (const auto* x = find(o, "place")) t.place = parse_place(*x, at(where, "place"));
  if (const auto* x = find(o, "init")) {
    if (t.role != tensor_role::constant && t.role != tensor_role::input) {
      fail(at(where, "init"), "only inputs and constants have an init");
    }
    t.init = parse_init(*x, at(where, "init"));
  }
  if (t.role == tensor_role::input || t.role == tensor_role::constant) {
    if (t.dims.empty()) fail(where, "tensor \"" + t.name + "\" (" + role + ") needs a \"shape\"");
    if (t.type == data_type::undef)
      fail(where, "tensor \"" + t.name + "\" (" + role + ") needs a \"type\"");
  }
  // Checked here for the JSON pointer; a constant's data is made right after
  // loading it, an input's by every run.
  if (!t.dims.empty() && t.type != data_type::undef) {
    try {
      check_tensor_bytes("tensor \"" + t.name + "\" (" + role + ")", t.dims, t.type);
    } catch (const error& e) {
      fail(at(where, "shape"), e.message());
    }
  }
  if (!t.dims.empty() && t.layout.ndims() != 0 &&
      t.layout.ndims() != static_cast<int>(t.dims.size())) {
    fail(at(where, "layout"), "layout " + t.layout.to_string() + " lays out " +
                                  std::to_string(t.layout.ndims()) + " dims, the shape has " +
                                  std::to_string(t.dims.size()));
  }
  // A layout's strides may span more than the elements take (every run
  // allocates an input's buffer, the loader a constant's).
  if (!t.dims.empty() && t.type != data_type::undef && t.layout.ndims() != 0) {
    try {
      checked_tensor_desc("tensor \"" + t.name + "\" (" + role + ")", t.layout, t.dims, t.type);
    } catch (const error& e) {
      fail(at(where, "layout"), e.message());
    }
  }
  return t;
}

op_attribute parse_attribute(const json::value& v, const std::string& where) {
  if (v.is_int64() || v.is_uint64()) return as_int(v, where);
  if (v.is_double()) return v.get_double();
  if (v.is_string()) return std::string(v.get_string());
  if (v.is_array()) {
    const auto& a = v.get_array();
    if (a.empty() || a[0].is_string()) return as_strings(v, where);
    std::vector<std::int64_t> ints;
    for (std::size_t i = 0; i < a.size(); ++i) ints.push_back(as_int(a[i], at(where, i)));
    return ints;
  }
  fail(where,
       std::string("an attribute is a number, a string or a list of integers or of strings, not ") +
           kind_of(v));
}

op_spec parse_op(const json::value& v, const std::string& where) {
  const auto& o = as_object(v, where);
  check_keys(
      o, where,
      {"name", "kind", "inputs", "outputs", "attributes", "place", "library", "type", "layout"});
  op_spec op;
  op.name = parse_name(require(o, "name", where), at(where, "name"));
  op.kind = parse_name(require(o, "kind", where), at(where, "kind"));
  op.inputs = as_strings(require(o, "inputs", where), at(where, "inputs"));
  op.outputs = as_strings(require(o, "outputs", where), at(where, "outputs"));
  if (op.inputs.empty()) fail(at(where, "inputs"), "an op needs at least one input");
  if (op.outputs.empty()) fail(at(where, "outputs"), "an op needs at least one output");
  if (const auto* x = find(o, "attributes")) {
    const std::string aw = at(where, "attributes");
    for (const auto& kv : as_object(*x, aw)) {
      op.attributes.emplace(std::string(kv.key()), parse_attribute(kv.value(), at(aw, kv.key())));
    }
  }
  if (const auto* x = find(o, "place")) op.place = parse_place(*x, at(where, "place"));
  if (const auto* x = find(o, "library")) {
    op.library = parse_name(*x, at(where, "library"));
    if (op.library->find('/') != std::string::npos)
      fail(at(where, "library"), "a library name has no '/'");
  }
  if (const auto* x = find(o, "type")) op.type = parse_type(*x, at(where, "type"));
  if (const auto* x = find(o, "layout")) op.layout = parse_layout(*x, at(where, "layout"));
  return op;
}

// A failure of the machine rather than of the document: no memory, a
// device or system call that failed, data that fails a check, a refusal
// for safety.
bool machine_failure(status code) {
  switch (code) {
    case status::out_of_memory:
    case status::runtime_error:
    case status::corrupt_data:
    case status::permission_denied: return true;
    default: return false;
  }
}

// "line L, column C" of byte offset `pos` in `text`.
std::string position(std::string_view text, std::size_t pos) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

}  // namespace

graph load_graph_json(std::string_view text) {
  json::parser p;
  boost::system::error_code ec;
  const std::size_t used = p.write(text.data(), text.size(), ec);
  if (ec) {
    throw error(status::invalid_arguments,
                "graph JSON " + position(text, used) + ": " + ec.message());
  }
  // Boost.JSON keeps the last of a key given twice; the format has no
  // object where that could be meant.
  if (const auto d = find_duplicate_json_key(text)) {
    fail(d->object_pointer, "duplicate key \"" + d->key + "\" at " + position(text, d->offset) +
                                " (a key may appear once in an object)");
  }
  const json::value doc = p.release();
  const auto& root = as_object(doc, "");
  check_keys(root, "", {"name", "description", "tensors", "ops"});
  graph g(find(root, "name") ? parse_name(*find(root, "name"), "/name") : "graph");
  if (const auto* d = find(root, "description")) as_string(*d, "/description");
  const auto& tensors = as_array(require(root, "tensors", ""), "/tensors");
  const auto& ops = as_array(require(root, "ops", ""), "/ops");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string where = at("/tensors", i);
    tensor_spec t = parse_tensor(tensors[i], where);
    if (g.find_tensor(t.name))
      fail(at(where, "name"), "tensor \"" + t.name + "\" is declared twice");
    std::optional<tensor_init> init = t.init;
    const tensor_role role = t.role;
    tensor_spec copy = t;
    g.add_tensor(std::move(t));
    if (role == tensor_role::constant) {
      try {
        g.set_data(copy.name, make_tensor_data(copy, init.value_or(tensor_init{})));
      } catch (const error& e) {
        // What the document asks for (a bad init, a place this process has
        // no device for) is invalid_arguments; a failure of the machine
        // making the data keeps its status, so that a caller (primcached's
        // exit code) does not take it for a malformed document.
        throw error(machine_failure(e.code()) ? e.code() : status::invalid_arguments,
                    "graph JSON " + where + ": tensor \"" + copy.name + "\": " + e.message());
      }
    }
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::string where = at("/ops", i);
    op_spec op = parse_op(ops[i], where);
    if (g.find_op(op.name)) fail(at(where, "name"), "op \"" + op.name + "\" is declared twice");
    g.add_op(std::move(op));
  }
  g.validate();
  return g;
}

graph load_graph_file(const std::string& path) {
  // A regular file (regular_file.hpp): a directory would read as empty
  // text, a FIFO wait for a writer, /dev/zero never end.
  regular_file_text f = read_regular_file(path, max_graph_file_bytes);
  switch (f.refusal) {
    case file_refusal::none: break;
    case file_refusal::cannot_open:
    case file_refusal::cannot_read:
      throw error(status::not_found, "graph file " + path + ": cannot be read: " + f.reason);
    case file_refusal::not_regular:
      throw error(status::not_found, "graph file " + path + ": " + f.reason);
    case file_refusal::too_large:
      throw error(status::invalid_arguments,
                  "graph file " + path + ": " + std::to_string(f.bytes) + " bytes, over the " +
                      std::to_string(max_graph_file_bytes >> 20) + " MiB a graph file may have");
  }
  try {
    return load_graph_json(f.text);
  } catch (const error& e) {
    throw error(e.code(), path + ": " + e.message());
  }
}

executor::tensor_map make_inputs(const graph& g) {
  executor::tensor_map out;
  for (const auto& t : g.tensors()) {
    if (t.role != tensor_role::input) continue;
    out.emplace(t.name, make_tensor_data(t, t.init.value_or(tensor_init{})));
  }
  return out;
}

}  // namespace primcache
