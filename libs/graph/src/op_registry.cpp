// The op registry: kinds (shape functions) and kernels per (place kind,
// library).
#include "primcache/graph/op_registry.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"

namespace primcache {

namespace graph_internal {
void add_builtin_ops(op_registry& reg);  // builtin_ops.cpp
}  // namespace graph_internal

bound_kernel::~bound_kernel() = default;
op_kernel::~op_kernel() = default;

layout layout_for_rank(const layout& op_layout, int ndims) {
  if (op_layout.ndims() == ndims) return op_layout;
  return plain_layout(ndims);
}

kernel_type op_kernel::input_type(const op_spec&, std::size_t, const tensor_shape& shape,
                                  const kernel_type& op_type, const kernel_type&) const {
  kernel_type k = op_type;
  k.layout = layout_for_rank(op_type.layout, static_cast<int>(shape.dims.size()));
  return k;
}

kernel_type op_kernel::output_type(const op_spec&, std::size_t, const tensor_shape& shape,
                                   const kernel_type& op_type) const {
  kernel_type k = op_type;
  k.layout = layout_for_rank(op_type.layout, static_cast<int>(shape.dims.size()));
  k.data_type = shape.type;
  return k;
}

struct op_registry::state {
  using kernel_key = std::tuple<std::string, engine_kind, std::string>;
  mutable shared_mutex mu;
  struct kind_entry {
    shape_function shapes;
    std::optional<std::vector<std::string>> attributes;  // sorted; none: any
  };
  std::map<std::string, kind_entry, std::less<>> kinds PRIMCACHE_GUARDED_BY(mu);
  std::map<kernel_key, std::shared_ptr<const op_kernel>> kernels PRIMCACHE_GUARDED_BY(mu);
};

op_registry::op_registry() : state_(std::make_unique<state>()) {}
op_registry::~op_registry() = default;

op_registry& op_registry::global() {
  // Built on first use (not at library load): no static-initialization order
  // with the runtime's registries.
  static op_registry* reg = [] {
    auto* r = new op_registry();  // never destroyed: kernels may run at exit
    r->add_builtins();
    return r;
  }();
  return *reg;
}

void op_registry::add_builtins() {
  graph_internal::add_builtin_ops(*this);
}

void op_registry::add_kind_entry(std::string kind, shape_function shapes,
                                 std::optional<std::vector<std::string>> attributes) {
  if (kind.empty())
    throw error(status::invalid_arguments, "op_registry: an op kind without a name");
  if (!shapes) {
    throw error(status::invalid_arguments,
                "op_registry: op kind '" + kind + "' without a shape function");
  }
  if (attributes) std::sort(attributes->begin(), attributes->end());
  lock_guard<shared_mutex> lock(state_->mu);
  state_->kinds.insert_or_assign(std::move(kind),
                                 state::kind_entry{std::move(shapes), std::move(attributes)});
}

void op_registry::add_kind(std::string kind, shape_function shapes) {
  add_kind_entry(std::move(kind), std::move(shapes), std::nullopt);
}

void op_registry::add_kind(std::string kind, shape_function shapes,
                           std::vector<std::string> attributes) {
  add_kind_entry(std::move(kind), std::move(shapes), std::move(attributes));
}

void op_registry::add_kernel(std::string kind, engine_kind place_kind, std::string library,
                             std::shared_ptr<const op_kernel> kernel) {
  if (kind.empty() || library.empty()) {
    throw error(status::invalid_arguments, "op_registry: a kernel needs an op kind and a library");
  }
  if (!kernel) {
    throw error(status::invalid_arguments,
                "op_registry: null kernel for '" + kind + "' (" + library + ")");
  }
  lock_guard<shared_mutex> lock(state_->mu);
  state_->kernels.insert_or_assign({std::move(kind), place_kind, std::move(library)},
                                   std::move(kernel));
}

bool op_registry::remove_kernel(std::string_view kind, engine_kind place_kind,
                                std::string_view library) {
  lock_guard<shared_mutex> lock(state_->mu);
  return state_->kernels.erase({std::string(kind), place_kind, std::string(library)}) != 0;
}

shape_function op_registry::find_kind(std::string_view kind) const {
  shared_lock_guard lock(state_->mu);
  auto it = state_->kinds.find(kind);
  return it == state_->kinds.end() ? shape_function() : it->second.shapes;
}

std::optional<std::vector<std::string>> op_registry::accepted_attributes(
    std::string_view kind) const {
  shared_lock_guard lock(state_->mu);
  auto it = state_->kinds.find(kind);
  return it == state_->kinds.end() ? std::nullopt : it->second.attributes;
}

std::shared_ptr<const op_kernel> op_registry::find_kernel(std::string_view kind,
                                                          engine_kind place_kind,
                                                          std::string_view library) const {
  shared_lock_guard lock(state_->mu);
  auto it = state_->kernels.find({std::string(kind), place_kind, std::string(library)});
  return it == state_->kernels.end() ? nullptr : it->second;
}

std::vector<std::string> op_registry::kinds() const {
  shared_lock_guard lock(state_->mu);
  std::vector<std::string> out;
  for (const auto& [k, _] : state_->kinds) out.push_back(k);
  return out;
}

std::vector<std::string> op_registry::kernels_of(std::string_view kind) const {
  shared_lock_guard lock(state_->mu);
  std::vector<std::string> out;
  for (const auto& [key, _] : state_->kernels) {
    if (std::get<0>(key) == kind) {
      out.push_back(std::string(to_string(std::get<1>(key))) + "/" + std::get<2>(key));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace primcache
