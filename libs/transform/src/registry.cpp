#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/cache/concurrent_cache.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/transform/transform_registry.hpp"

namespace primcache {
namespace transform_internal {
namespace {

struct pair_key {
  kernel_type from;
  kernel_type to;
  friend bool operator==(const pair_key&, const pair_key&) = default;
};
struct pair_hash {
  std::size_t operator()(const pair_key& k) const noexcept {
    return k.from.hash() * 31 + k.to.hash();
  }
};

struct user_entry {
  std::string name;
  std::shared_ptr<const transform_function> function;
};
using user_map = std::unordered_map<pair_key, user_entry, pair_hash>;

// A plan is valid for one generation of the user transforms.
struct plan_key {
  pair_key pair;
  std::uint64_t generation = 0;
  std::vector<std::int64_t> dims;  // empty: per logical element
  friend bool operator==(const plan_key&, const plan_key&) = default;
};
struct plan_key_hash {
  std::size_t operator()(const plan_key& k) const noexcept {
    std::size_t h = pair_hash()(k.pair) ^ (k.generation * 0x9e3779b97f4a7c15ULL);
    for (std::int64_t d : k.dims) h = h * 1099511628211ULL + static_cast<std::size_t>(d);
    return h;
  }
};

std::size_t element_bytes(const kernel_type& t) {
  return size_of(t.data_type);
}

// The built-in step from `x` to `y`, if one exists (see the header's list).
std::optional<transform_step> builtin_step(const kernel_type& x, const kernel_type& y) {
  if (x.layout.ndims() != y.layout.ndims()) return std::nullopt;
  transform_step s;
  s.from = x;
  s.to = y;
  const bool same_place = x.place == y.place;
  // A change of scale alone (requantization) is a data-type step.
  const bool same_type = x.data_type == y.data_type && x.scale == y.scale;
  const bool same_layout = x.layout == y.layout;
  if (same_place && same_type && same_layout) {
    s.kind = transform_kind::library;
    s.bytes_per_element = 0;
    return s;
  }
  s.bytes_per_element = element_bytes(x) + element_bytes(y);
  if (same_place) {
    if (x.place.is_cpu()) {
      s.kind = same_type     ? transform_kind::layout
               : same_layout ? transform_kind::data_type
                             : transform_kind::layout_and_data_type;
      return s;
    }
    // The OpenCL reorder moves f32 data between layouts, nothing else.
    if (same_type && x.data_type == data_type::f32) {
      s.kind = transform_kind::layout;
      return s;
    }
    return std::nullopt;
  }
  // Host <-> device: one layout, one data type (and scale), one side on the
  // CPU.
  if (same_type && same_layout && (x.place.is_cpu() != y.place.is_cpu())) {
    s.kind = transform_kind::place;
    return s;
  }
  return std::nullopt;
}

// Rank of a step kind in the fixed order layout -> data type -> place.
int rank_of(transform_kind k) {
  switch (k) {
    case transform_kind::user: return 0;
    case transform_kind::layout: return 1;
    case transform_kind::layout_and_data_type: return 2;
    case transform_kind::data_type: return 3;
    case transform_kind::place: return 4;
    case transform_kind::library: return 5;
  }
  return 6;
}

struct path_cost {
  std::size_t bytes = std::numeric_limits<std::size_t>::max();
  std::vector<int> ranks;  // one per step
  bool operator<(const path_cost& o) const {
    if (bytes != o.bytes) return bytes < o.bytes;
    if (ranks.size() != o.ranks.size()) return ranks.size() < o.ranks.size();
    return ranks < o.ranks;
  }
};

template <typename T>
void add_unique(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// Why `t` cannot be an end of a user transform or a plan, worded to follow
// "kernel type <t>"; empty when it can. An end must be a node plan() can
// reach and execute_plan can allocate (a known data type and a concrete
// layout: `any` would fail only when a plan through it runs), and print
// text that parses back (kernel_type::scale_problem, library::problem).
std::string end_problem(const kernel_type& t) {
  if (!is_known(t.data_type)) return " is incomplete (no known data type)";
  if (t.layout.is_tag() &&
      (t.layout.tag() == format_tag::undef || t.layout.tag() == format_tag::any)) {
    return " has no concrete layout (" + t.layout.to_string() + ")";
  }
  if (auto why = t.scale_problem(); !why.empty()) return ": " + why;
  if (auto why = t.library.problem(); !why.empty()) return ": " + why;
  return {};
}

[[noreturn]] void no_path(const kernel_type& a, const kernel_type& e, const std::string& why) {
  throw error(status::unimplemented,
              "no transform from " + a.to_string() + " to " + e.to_string() + ": " + why);
}

// Why no chain joins `a` and `e` whatever is registered, worded to follow
// "no transform from a to e: "; empty when their layouts have the same rank.
// Every step writes a memory of the source's dims, so a plan keeps the rank.
std::string rank_problem(const kernel_type& a, const kernel_type& e) {
  if (a.layout.ndims() == e.layout.ndims()) return {};
  return "layouts " + a.layout.to_string() + " and " + e.layout.to_string() + " lay out " +
         std::to_string(a.layout.ndims()) + " and " + std::to_string(e.layout.ndims()) +
         " dimensions";
}

// The bytes a tensor of `dims` takes in kernel type `t`, padding included;
// nullopt when t's layout cannot describe dims.
std::optional<std::size_t> padded_bytes(const kernel_type& t, dims_view dims) {
  if (t.layout.ndims() != static_cast<int>(dims.size())) return std::nullopt;
  try {
    return t.layout.desc_for(dims, t.data_type).size_bytes();
  } catch (const error&) {
    return std::nullopt;
  }
}

transform_plan make_plan(const kernel_type& actual, const kernel_type& expected,
                         const user_map& users, dims_view dims) {
  transform_plan plan;
  plan.from = actual;
  plan.to = expected;
  // The checks add() makes of a transform's ends.
  for (const auto& [end, t] : {std::pair{"actual", &actual}, std::pair{"expected", &expected}}) {
    if (auto why = end_problem(*t); !why.empty()) {
      throw error(status::invalid_arguments,
                  std::string("the ") + end + " kernel type " + t->to_string() + why);
    }
  }
  if (auto why = rank_problem(actual, expected); !why.empty()) no_path(actual, expected, why);
  plan.dims.assign(dims.begin(), dims.end());
  if (!dims.empty()) {
    // The descriptor's own reason: a rank other than the layout's, but also
    // a dimension that is not positive or a tensor too large to address.
    for (const auto& [end, t] : {std::pair{"actual", &actual}, std::pair{"expected", &expected}}) {
      try {
        (void)t->layout.desc_for(dims, t->data_type);
      } catch (const error& e) {
        throw error(status::invalid_arguments,
                    "no plan from " + actual.to_string() + " to " + expected.to_string() +
                        " for dims " + dims_to_string(dims) + ": the " + end + " kernel type " +
                        t->to_string() + " cannot lay them out (" + e.message() + ")");
      }
    }
  }
  if (actual == expected) return plan;
  // A step's weight: bytes per logical element, or with dims the bytes it
  // reads and writes, padding included.
  const auto weigh = [&](transform_step& s) -> bool {
    if (dims.empty() || s.kind == transform_kind::library) return true;
    const auto in = padded_bytes(s.from, dims), out = padded_bytes(s.to, dims);
    if (!in || !out) return false;
    s.bytes = *in + *out;
    return true;
  };
  const auto weight = [&](const transform_step& s) {
    return dims.empty() ? s.bytes_per_element : s.bytes;
  };
  auto make_user_step = [](const pair_key& k, const user_entry& u) {
    transform_step s;
    s.kind = transform_kind::user;
    s.from = k.from;
    s.to = k.to;
    s.bytes_per_element = element_bytes(k.from) + element_bytes(k.to);
    s.user_name = u.name;
    s.function = u.function;
    return s;
  };
  // A user transform for exactly this pair is the whole plan.
  if (auto it = users.find({actual, expected}); it != users.end()) {
    plan.steps.push_back(make_user_step(it->first, it->second));
    weigh(plan.steps.back());
    return plan;
  }
  // The kernel types a chain may pass through: the two ends' places, types,
  // layouts and libraries combined, the CPU and f32 as stopovers, and the
  // ends of user transforms.
  // A data type travels with its scale.
  struct scaled_type {
    data_type type;
    float scale;
    bool operator==(const scaled_type&) const = default;
  };
  std::vector<place> places;
  std::vector<scaled_type> types;
  std::vector<layout> layouts;
  std::vector<library> libraries;
  for (const kernel_type* t : {&actual, &expected}) {
    add_unique(places, t->place);
    add_unique(types, scaled_type{t->data_type, t->scale});
    add_unique(layouts, t->layout);
    add_unique(libraries, t->library);
  }
  add_unique(places, place::cpu());
  add_unique(types, scaled_type{data_type::f32, 1.f});
  std::vector<kernel_type> nodes;
  for (const auto& p : places)
    for (const auto& st : types)
      for (const auto& l : layouts)
        for (const auto& lib : libraries)
          add_unique(nodes, kernel_type{p, st.type, l, lib, st.scale});
  for (const auto& [k, u] : users) {
    add_unique(nodes, k.from);
    add_unique(nodes, k.to);
  }
  const std::size_t n = nodes.size();
  const auto index_of = [&](const kernel_type& t) {
    return static_cast<std::size_t>(std::find(nodes.begin(), nodes.end(), t) - nodes.begin());
  };
  // Dijkstra over (bytes, steps, ranks): extending two paths by the same
  // step keeps their order, so the first settled cost is the least.
  std::vector<path_cost> cost(n);
  std::vector<std::optional<transform_step>> via(n);
  std::vector<std::size_t> prev(n, n);
  std::vector<bool> done(n, false);
  const std::size_t start = index_of(actual);
  const std::size_t goal = index_of(expected);
  cost[start].bytes = 0;
  for (;;) {
    std::size_t u = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (!done[i] && cost[i].bytes != std::numeric_limits<std::size_t>::max() &&
          (u == n || cost[i] < cost[u])) {
        u = i;
      }
    }
    if (u == n || u == goal) break;
    done[u] = true;
    for (std::size_t v = 0; v < n; ++v) {
      if (v == u || done[v]) continue;
      std::optional<transform_step> step;
      if (auto it = users.find({nodes[u], nodes[v]}); it != users.end()) {
        step = make_user_step(it->first, it->second);
      } else {
        step = builtin_step(nodes[u], nodes[v]);
      }
      if (!step || !weigh(*step)) continue;
      path_cost c = cost[u];
      c.bytes += weight(*step);
      c.ranks.push_back(rank_of(step->kind));
      if (c < cost[v]) {
        cost[v] = std::move(c);
        via[v] = std::move(step);
        prev[v] = u;
      }
    }
  }
  if (cost[goal].bytes == std::numeric_limits<std::size_t>::max()) {
    std::string why = "no chain of built-in or registered transforms joins them";
    if (!actual.place.is_cpu() || !expected.place.is_cpu()) {
      why += " (on a GPU only f32 changes layout, and nothing changes data type)";
    }
    no_path(actual, expected, why);
  }
  for (std::size_t v = goal; v != start; v = prev[v]) plan.steps.push_back(*via[v]);
  std::reverse(plan.steps.begin(), plan.steps.end());
  return plan;
}

}  // namespace
}  // namespace transform_internal

using namespace transform_internal;

struct transform_registry::state {
  explicit state(std::size_t capacity) : plans(capacity) {}
  shared_mutex mu;
  // Copy-on-write: add and remove publish a new map, plan keeps the one it read.
  std::shared_ptr<const user_map> users PRIMCACHE_GUARDED_BY(mu) = std::make_shared<user_map>();
  std::uint64_t generation PRIMCACHE_GUARDED_BY(mu) = 0;
  concurrent_cache<plan_key, std::shared_ptr<const transform_plan>, plan_key_hash> plans;
  // The global registry's plan cache is listed in control (after `plans`,
  // so that it is unregistered before the cache goes).
  cache_registration registration;
};

transform_registry::transform_registry(std::size_t plan_cache_capacity)
    : state_(std::make_unique<state>(plan_cache_capacity)) {}

transform_registry::~transform_registry() = default;

transform_registry& transform_registry::global() {
  static transform_registry registry;
  [[maybe_unused]] static const bool registered = [] {
    registry.state_->registration =
        register_cache("transform_plan", registry.state_->plans, capacity_unit::entries);
    return true;
  }();
  return registry;
}

void transform_registry::add(const kernel_type& from, const kernel_type& to, std::string name,
                             transform_function function) {
  if (!function) {
    throw error(status::invalid_arguments, "transform '" + name + "' from " + from.to_string() +
                                               " to " + to.to_string() + " has no function");
  }
  if (from == to) {
    throw error(status::invalid_arguments,
                "transform '" + name + "' goes from " + from.to_string() + " to itself");
  }
  for (const kernel_type* t : {&from, &to}) {
    if (auto why = end_problem(*t); !why.empty()) {
      throw error(status::invalid_arguments,
                  "transform '" + name + "': kernel type " + t->to_string() + why);
    }
  }
  // plan() refuses such a pair before it looks at user transforms, and no
  // step can change a tensor's rank: registered, it would never run.
  if (auto why = rank_problem(from, to); !why.empty()) {
    throw error(status::invalid_arguments, "transform '" + name + "' from " + from.to_string() +
                                               " to " + to.to_string() + ": " + why +
                                               " (a plan keeps a tensor's dims)");
  }
  user_entry entry{std::move(name),
                   std::make_shared<const transform_function>(std::move(function))};
  lock_guard<shared_mutex> guard(state_->mu);
  auto next = std::make_shared<user_map>(*state_->users);
  (*next)[{from, to}] = std::move(entry);
  state_->users = std::move(next);
  ++state_->generation;
}

bool transform_registry::remove(const kernel_type& from, const kernel_type& to) {
  lock_guard<shared_mutex> guard(state_->mu);
  if (state_->users->count({from, to}) == 0) return false;
  auto next = std::make_shared<user_map>(*state_->users);
  next->erase({from, to});
  state_->users = std::move(next);
  ++state_->generation;
  return true;
}

std::shared_ptr<const transform_plan> transform_registry::plan(const kernel_type& actual,
                                                               const kernel_type& expected) {
  return plan(actual, expected, dims_view());
}

std::shared_ptr<const transform_plan> transform_registry::plan(const kernel_type& actual,
                                                               const kernel_type& expected,
                                                               dims_view dims) {
  // The generation and its map are read together, so a plan is made from
  // exactly the user transforms its key's generation names.
  std::shared_ptr<const user_map> users;
  std::uint64_t generation;
  {
    shared_lock_guard guard(state_->mu);
    users = state_->users;
    generation = state_->generation;
  }
  plan_key key{{actual, expected}, generation, {dims.begin(), dims.end()}};
  return state_->plans
      .get_or_add(key,
                  [&] {
                    return std::make_shared<const transform_plan>(
                        make_plan(actual, expected, *users, dims));
                  })
      .value;
}

cache_stats transform_registry::plan_cache_stats() const noexcept {
  return state_->plans.stats();
}

void transform_registry::clear_plan_cache() {
  state_->plans.clear();
}

std::shared_ptr<const transform_plan> plan_transform(const kernel_type& actual,
                                                     const kernel_type& expected) {
  return transform_registry::global().plan(actual, expected);
}

memory transform(const memory& src, const kernel_type& actual, const kernel_type& expected) {
  return execute_plan(*plan_transform(actual, expected), src);
}

}  // namespace primcache
