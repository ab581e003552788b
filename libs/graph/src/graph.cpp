// The graph description: tensors, ops, attributes, validation.
#include "primcache/graph/graph.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <utility>

#include "primcache/base/error.hpp"
#include "primcache/transform/transform_registry.hpp"

namespace primcache {

namespace {

[[noreturn]] void fail(std::string message) {
  throw error(status::invalid_arguments, std::move(message));
}

const char* type_name(const op_attribute& a) {
  switch (a.index()) {
    case 0: return "an integer";
    case 1: return "a float";
    case 2: return "a string";
    case 3: return "a list of integers";
    default: return "a list of strings";
  }
}

template <typename T>
const T& attribute_as(const op_spec& op, std::string_view key, const op_attribute& a,
                      const char* want) {
  if (const T* v = std::get_if<T>(&a)) return *v;
  fail("op '" + op.name + "' (" + op.kind + "): attribute '" + std::string(key) + "' must be " +
       want + ", not " + type_name(a));
}

// `value` as the JSON or a person would write it (1e+39, -0.5, inf).
std::string number_string(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// An init value must be a finite float: the data is made in f32, where a
// larger one is inf and every element made from it inf or NaN.
void check_init_value(const tensor_spec& tensor, const char* field, double value) {
  if (std::abs(value) <= std::numeric_limits<float>::max()) return;  // false for NaN
  fail("tensor '" + tensor.name + "': init " + field + " " + number_string(value) +
       " is not a finite float (at most " + number_string(std::numeric_limits<float>::max()) +
       " in magnitude)");
}

// splitmix64: a fixed generator, the same sequence on every platform.
std::uint64_t next_random(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::string_view to_string(tensor_role role) noexcept {
  switch (role) {
    case tensor_role::input: return "input";
    case tensor_role::constant: return "constant";
    case tensor_role::intermediate: return "intermediate";
    case tensor_role::output: return "output";
  }
  return "unknown";
}

std::optional<tensor_role> parse_tensor_role(std::string_view name) noexcept {
  for (auto r : {tensor_role::input, tensor_role::constant, tensor_role::intermediate,
                 tensor_role::output}) {
    if (to_string(r) == name) return r;
  }
  return std::nullopt;
}

std::int64_t op_spec::int_attribute(std::string_view key, std::int64_t fallback) const {
  auto it = attributes.find(std::string(key));
  if (it == attributes.end()) return fallback;
  return attribute_as<std::int64_t>(*this, key, it->second, "an integer");
}

double op_spec::float_attribute(std::string_view key, double fallback) const {
  auto it = attributes.find(std::string(key));
  if (it == attributes.end()) return fallback;
  if (const auto* i = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*i);
  return attribute_as<double>(*this, key, it->second, "a number");
}

std::string op_spec::string_attribute(std::string_view key, std::string fallback) const {
  auto it = attributes.find(std::string(key));
  if (it == attributes.end()) return fallback;
  return attribute_as<std::string>(*this, key, it->second, "a string");
}

std::vector<std::int64_t> op_spec::ints_attribute(std::string_view key,
                                                  std::vector<std::int64_t> fallback) const {
  auto it = attributes.find(std::string(key));
  if (it == attributes.end()) return fallback;
  // An empty list is either kind of list.
  if (const auto* v = std::get_if<std::vector<std::string>>(&it->second); v && v->empty())
    return {};
  return attribute_as<std::vector<std::int64_t>>(*this, key, it->second, "a list of integers");
}

std::vector<std::string> op_spec::strings_attribute(std::string_view key,
                                                    std::vector<std::string> fallback) const {
  auto it = attributes.find(std::string(key));
  if (it == attributes.end()) return fallback;
  if (const auto* v = std::get_if<std::vector<std::int64_t>>(&it->second); v && v->empty())
    return {};
  return attribute_as<std::vector<std::string>>(*this, key, it->second, "a list of strings");
}

bool op_spec::has_attribute(std::string_view key) const {
  return attributes.find(std::string(key)) != attributes.end();
}

graph::graph(std::string name) : name_(std::move(name)) {}

namespace {

// Appends `item` to `list` and its position under its name to `index`;
// when the index cannot take it, the list is left as it was.
template <typename T, typename Index>
void append_indexed(std::vector<T>& list, Index& index, T item) {
  list.push_back(std::move(item));
  try {
    index.emplace(list.back().name, list.size() - 1);
  } catch (...) {
    list.pop_back();
    throw;
  }
}

}  // namespace

void graph::add_tensor(tensor_spec tensor) {
  if (tensor.name.empty()) fail("graph '" + name_ + "': a tensor without a name");
  if (find_tensor(tensor.name)) {
    fail("graph '" + name_ + "': tensor '" + tensor.name + "' is declared twice");
  }
  append_indexed(tensors_, tensor_index_, std::move(tensor));
}

void graph::add_op(op_spec op) {
  if (op.name.empty()) fail("graph '" + name_ + "': an op without a name");
  if (op.kind.empty()) fail("op '" + op.name + "' has no kind");
  if (find_op(op.name)) fail("graph '" + name_ + "': op '" + op.name + "' is declared twice");
  for (const auto& out : op.outputs) {
    if (!find_tensor(out)) {
      tensor_spec t;
      t.name = out;
      t.role = tensor_role::intermediate;
      append_indexed(tensors_, tensor_index_, std::move(t));
    }
  }
  append_indexed(ops_, op_index_, std::move(op));
}

void graph::set_data(std::string_view tensor, memory data) {
  const tensor_spec* t = find_tensor(tensor);
  if (!t)
    fail("graph '" + name_ + "': set_data for an undeclared tensor '" + std::string(tensor) + "'");
  if (t->role != tensor_role::constant && t->role != tensor_role::input) {
    fail("tensor '" + t->name + "' is " + std::string(to_string(t->role)) +
         ": only constants and inputs carry data");
  }
  if (!data) fail("tensor '" + t->name + "': set_data with an empty memory");
  if (t->dims.empty() || t->type == data_type::undef) {
    fail("tensor '" + t->name + "' needs dims and a data type before its data");
  }
  const kernel_type want = declared_type(*t, library::jit());
  const memory_desc md = want.layout.desc_for(t->dims, t->type);
  if (!(data.get_desc() == md)) {
    fail("tensor '" + t->name + "': data is " + data.get_desc().to_string() + ", the tensor is " +
         md.to_string());
  }
  if (!(place::of(data.get_engine()) == want.place)) {
    fail("tensor '" + t->name + "': data is on " + place::of(data.get_engine()).to_string() +
         ", the tensor on " + want.place.to_string());
  }
  data_.insert_or_assign(std::string(tensor), std::move(data));
}

memory graph::data(std::string_view tensor) const {
  auto it = data_.find(tensor);
  return it == data_.end() ? memory() : it->second;
}

const tensor_spec* graph::find_tensor(std::string_view name) const noexcept {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const op_spec* graph::find_op(std::string_view name) const noexcept {
  auto it = op_index_.find(name);
  return it == op_index_.end() ? nullptr : &ops_[it->second];
}

std::vector<std::string> graph::names_of(tensor_role role) const {
  std::vector<std::string> names;
  for (const auto& t : tensors_) {
    if (t.role == role) names.push_back(t.name);
  }
  return names;
}

std::vector<std::size_t> graph::validate() const {
  std::unordered_map<std::string_view, std::size_t> producer;  // tensor -> op index
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const op_spec& op = ops_[i];
    if (op.outputs.empty()) fail("op '" + op.name + "' (" + op.kind + ") has no outputs");
    for (const auto& out : op.outputs) {
      const tensor_spec* t = find_tensor(out);
      if (t->role == tensor_role::input || t->role == tensor_role::constant) {
        fail("op '" + op.name + "' writes tensor '" + out + "', which is " +
             std::string(to_string(t->role)));
      }
      auto [it, fresh] = producer.emplace(t->name, i);
      if (!fresh) {
        fail("tensor '" + out + "' is written by two ops, '" + ops_[it->second].name + "' and '" +
             op.name + "'");
      }
    }
  }
  for (const auto& t : tensors_) {
    const bool produced = producer.count(t.name) != 0;
    if ((t.role == tensor_role::input || t.role == tensor_role::constant)) {
      if (t.dims.empty())
        fail("tensor '" + t.name + "' (" + std::string(to_string(t.role)) + ") has no shape");
      if (t.type == data_type::undef) {
        fail("tensor '" + t.name + "' (" + std::string(to_string(t.role)) + ") has no data type");
      }
      for (auto d : t.dims) {
        if (d <= 0)
          fail("tensor '" + t.name + "' has shape " + dims_to_string(t.dims) +
               ": dims must be positive");
      }
      // An input is allocated by every run that makes its data, a constant
      // once: either way the graph asks for its bytes, and its layout's
      // strides may ask for more than its elements take.
      const std::string what = "tensor '" + t.name + "' (" + std::string(to_string(t.role)) + ")";
      check_tensor_bytes(what, t.dims, t.type);
      if (t.layout.ndims() != 0 && t.layout.ndims() != static_cast<int>(t.dims.size())) {
        fail("tensor '" + t.name + "' has shape " + dims_to_string(t.dims) + " (" +
             std::to_string(t.dims.size()) + " dims) but layout " + t.layout.to_string() +
             " lays out " + std::to_string(t.layout.ndims()));
      }
      checked_tensor_desc(what, declared_type(t, library::jit()).layout, t.dims, t.type);
      if (t.role == tensor_role::constant && !data(t.name)) {
        fail("constant tensor '" + t.name + "' has no data (graph::set_data)");
      }
    } else if (!produced) {
      fail("tensor '" + t.name + "' (" + std::string(to_string(t.role)) + ") is written by no op");
    }
  }
  for (const auto& op : ops_) {
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      if (!find_tensor(op.inputs[k])) {
        fail("op '" + op.name + "' reads tensor '" + op.inputs[k] + "' (input " +
             std::to_string(k) + "), which the graph does not declare and no op writes");
      }
    }
  }
  // Depth-first topological sort; a grey op met again closes a cycle.
  enum class mark : unsigned char { white, grey, black };
  std::vector<mark> marks(ops_.size(), mark::white);
  std::vector<std::size_t> order, path;
  order.reserve(ops_.size());
  // Iterative DFS: (op, next input to look at).
  for (std::size_t root = 0; root < ops_.size(); ++root) {
    if (marks[root] != mark::white) continue;
    std::vector<std::pair<std::size_t, std::size_t>> st{{root, 0}};
    marks[root] = mark::grey;
    path = {root};
    while (!st.empty()) {
      auto& [op, next] = st.back();
      if (next < ops_[op].inputs.size()) {
        auto it = producer.find(ops_[op].inputs[next++]);
        if (it == producer.end()) continue;
        const std::size_t dep = it->second;
        if (marks[dep] == mark::grey) {
          auto from = std::find(path.begin(), path.end(), dep);
          std::string cycle;
          for (auto p = from; p != path.end(); ++p) cycle += "'" + ops_[*p].name + "' <- ";
          fail("graph '" + name_ + "' has a cycle: op " + cycle + "'" + ops_[dep].name +
               "' (each reads what the next writes)");
        }
        if (marks[dep] == mark::white) {
          marks[dep] = mark::grey;
          st.emplace_back(dep, 0);
          path.push_back(dep);
        }
      } else {
        marks[op] = mark::black;
        order.push_back(op);
        st.pop_back();
        path.pop_back();
      }
    }
  }
  return order;
}

void check_tensor_bytes(const std::string& what, const std::vector<std::int64_t>& dims,
                        data_type type) {
  std::uint64_t bytes = size_of(type);
  bool overflow = false;
  for (auto d : dims) {
    overflow =
        overflow || d < 0 || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes);
  }
  if (!overflow && bytes <= max_tensor_bytes) return;
  fail(what + " is " + dims_to_string(dims) + " " + std::string(to_string(type)) + ": " +
       (overflow ? "more than 2^64 bytes" : std::to_string(bytes) + " bytes") +
       ", more than the limit of " + std::to_string(max_tensor_bytes) + " bytes per graph tensor");
}

memory_desc checked_tensor_desc(const std::string& what, const primcache::layout& layout,
                                const std::vector<std::int64_t>& dims, data_type type) {
  check_tensor_bytes(what, dims, type);
  memory_desc md;
  try {
    md = layout.desc_for(dims, type);
  } catch (const error& e) {
    throw error(e.code(), what + " in layout " + layout.to_string() + ": " + e.message());
  }
  // The bytes its buffer spans (no overflow: the descriptor checked it).
  // Beyond its elements, a blocked layout adds the padding of its blocks,
  // which the limit allows; anything past that is the gaps plain strides
  // leave, which it does not.
  const auto spans = static_cast<std::uint64_t>(md.size_bytes());
  const auto padded = static_cast<std::uint64_t>(md.nelems(true)) * size_of(type);
  if (spans > max_tensor_bytes && spans > padded) {
    fail(what + " is " + dims_to_string(dims) + " " + std::string(to_string(type)) + " in layout " +
         layout.to_string() + ": its buffer spans " + std::to_string(spans) +
         " bytes, more than the limit of " + std::to_string(max_tensor_bytes) +
         " bytes per graph tensor");
  }
  return md;
}

layout plain_layout(int ndims) {
  static constexpr format_tag tags[] = {format_tag::a,    format_tag::ab,    format_tag::abc,
                                        format_tag::abcd, format_tag::abcde, format_tag::abcdef};
  if (ndims < 1 || ndims > 6) fail("no plain layout of " + std::to_string(ndims) + " dimensions");
  return layout(tags[ndims - 1]);
}

kernel_type declared_type(const tensor_spec& tensor, const library& lib) {
  kernel_type k;
  k.place = tensor.place.value_or(place::cpu());
  k.data_type = tensor.type;
  k.layout = tensor.layout.ndims() == 0 ? plain_layout(static_cast<int>(tensor.dims.size()))
                                        : tensor.layout;
  k.library = lib;
  return k;
}

memory make_tensor_data(const tensor_spec& tensor, const tensor_init& init) {
  if (tensor.dims.empty() || tensor.type == data_type::undef) {
    fail("tensor '" + tensor.name + "': data needs dims and a data type");
  }
  const kernel_type want = declared_type(tensor, library::jit());
  checked_tensor_desc("tensor '" + tensor.name + "' (" + std::string(to_string(tensor.role)) + ")",
                      want.layout, tensor.dims, tensor.type);
  if (init.kind == tensor_init::kind::fill) {
    check_init_value(tensor, "value", init.value);
  } else {
    check_init_value(tensor, "low", init.low);
    check_init_value(tensor, "high", init.high);
  }
  const kernel_type host{place::cpu(), data_type::f32,
                         plain_layout(static_cast<int>(tensor.dims.size())), library::jit()};
  memory m(host.layout.desc_for(tensor.dims, data_type::f32), engine(engine_kind::cpu, 0));
  auto* p = static_cast<float*>(m.get_data_handle());
  const auto n = m.get_desc().nelems();
  std::uint64_t state = init.seed;
  for (std::int64_t i = 0; i < n; ++i) {
    if (init.kind == tensor_init::kind::fill) {
      p[i] = static_cast<float>(init.value);
    } else {
      const double u = static_cast<double>(next_random(state) >> 11) * 0x1.0p-53;
      p[i] = static_cast<float>(init.low + (init.high - init.low) * u);
    }
  }
  if (host == want) return m;
  return transform(m, host, want);
}

}  // namespace primcache
