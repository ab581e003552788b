#include "primcache/runtime/backend/registry.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "primcache/runtime/constant_cache.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primitive_cache_internal.hpp"
#include "tuning_internal.hpp"

namespace primcache {
namespace backend {
using namespace runtime_internal;
namespace {

struct engine_factory {
  engine_count_fn count = nullptr;
  engine_factory_fn create = nullptr;
};

// Implementation lists are immutable snapshots replaced on registration
// (copy-on-write), so factories run with no lock held: a factory may itself
// create primitive descriptors (implementations that compose nested
// primitives do).
using impl_list = std::vector<implementation_entry>;

class registry {
 public:
  void add(const implementation_entry& e) PRIMCACHE_EXCLUDES(mu_) {
    lock_guard g(mu_);
    auto& slot = impls_[{e.engine, e.kind}];
    auto list = slot ? std::make_shared<impl_list>(*slot) : std::make_shared<impl_list>();
    // Stable: equal priorities keep registration order.
    auto pos = std::find_if(list->begin(), list->end(), [&](const implementation_entry& other) {
      return other.priority < e.priority;
    });
    list->insert(pos, e);
    slot = std::move(list);
  }

  std::shared_ptr<const impl_list> list(engine_kind engine, primitive_kind kind)
      PRIMCACHE_EXCLUDES(mu_) {
    shared_lock_guard g(mu_);
    auto it = impls_.find({engine, kind});
    return it == impls_.end() ? nullptr : it->second;
  }

  void add_engine(engine_kind kind, engine_factory f) PRIMCACHE_EXCLUDES(mu_) {
    lock_guard g(mu_);
    engines_[kind] = f;
    std::erase_if(devices_, [&](const auto& d) { return d.first.first == kind; });
  }
  // The one engine_impl of device (kind, index): every engine handle made
  // for a device is the same engine, so memory, streams and primitives made
  // from separately constructed handles work together. The factory runs
  // without the lock (it may be slow: device discovery).
  std::shared_ptr<const engine_impl> device(engine_kind kind, std::size_t index,
                                            const engine_factory& f) PRIMCACHE_EXCLUDES(mu_) {
    {
      shared_lock_guard g(mu_);
      auto it = devices_.find({kind, index});
      if (it != devices_.end()) return it->second;
    }
    auto made = f.create(index);
    lock_guard g(mu_);
    return devices_.try_emplace({kind, index}, std::move(made)).first->second;
  }
  engine_factory find_engine(engine_kind kind) PRIMCACHE_EXCLUDES(mu_) {
    shared_lock_guard g(mu_);
    auto it = engines_.find(kind);
    return it == engines_.end() ? engine_factory{} : it->second;
  }

 private:
  shared_mutex mu_;
  std::map<std::pair<engine_kind, primitive_kind>, std::shared_ptr<const impl_list>> impls_
      PRIMCACHE_GUARDED_BY(mu_);
  std::map<engine_kind, engine_factory> engines_ PRIMCACHE_GUARDED_BY(mu_);
  std::map<std::pair<engine_kind, std::size_t>, std::shared_ptr<const engine_impl>> devices_
      PRIMCACHE_GUARDED_BY(mu_);
};

// Bumped by every registration and every change of the config source:
// cached primitive descriptors made before are never found again (a new
// implementation may now win, or the source give another configuration)
// and age out of the cache.
std::atomic<std::uint64_t> registry_generation{0};

// The config source: replaced whole, read as a snapshot (the source runs
// with no lock held; it may be slow, or create primitive descriptors).
class config_source_slot {
 public:
  void set(config_source fn) PRIMCACHE_EXCLUDES(mu_) {
    auto next = fn ? std::make_shared<const config_source>(std::move(fn)) : nullptr;
    lock_guard g(mu_);
    source_ = std::move(next);
  }
  std::shared_ptr<const config_source> get() PRIMCACHE_EXCLUDES(mu_) {
    shared_lock_guard g(mu_);
    return source_;
  }

 private:
  shared_mutex mu_;
  std::shared_ptr<const config_source> source_ PRIMCACHE_GUARDED_BY(mu_);
};

config_source_slot& the_config_source() {
  static config_source_slot* s = new config_source_slot;  // never destroyed, as the registry
  return *s;
}

registry& the_registry() {
  static registry* r = new registry;  // never destroyed: backends register from static init
  return *r;
}

}  // namespace

void register_implementation(const implementation_entry& entry) {
  the_registry().add(entry);
  registry_generation.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace backend

namespace runtime_internal {
void invalidate_primitive_descs() noexcept {
  backend::registry_generation.fetch_add(1, std::memory_order_acq_rel);
}
}  // namespace runtime_internal

namespace backend {

void set_config_source(config_source source) {
  the_config_source().set(std::move(source));
  registry_generation.fetch_add(1, std::memory_order_acq_rel);
}

std::optional<kernel_config> config_from_source(const primitive_desc_impl& pd) {
  const auto source = the_config_source().get();
  if (!source) return std::nullopt;
  auto ignore = [&](const std::string& why) -> std::optional<kernel_config> {
    if (verbose_level() >= 1) {
      verbose_print("primcache_verbose,config:ignored," + std::string(to_string(pd.kind())) + "," +
                    pd.name() + "," + why + "; using the heuristic's configuration");
    }
    return std::nullopt;
  };
  std::optional<kernel_config> cfg;
  try {
    cfg = (*source)(pd);
  } catch (const std::exception& e) {
    return ignore(std::string("the config source threw: ") + e.what());
  } catch (...) {
    return ignore("the config source threw");
  }
  if (!cfg) return std::nullopt;
  auto ok = pd.validate_config(*cfg);
  if (!ok) return ignore("the config source gave " + cfg->to_json() + ": " + ok.why().message);
  return cfg;
}

void register_engine_factory(engine_kind kind, engine_count_fn count, engine_factory_fn create) {
  the_registry().add_engine(kind, {count, create});
}

std::shared_ptr<const engine_impl> make_engine_impl(engine_kind kind, std::size_t index) {
  engine_factory f = the_registry().find_engine(kind);
  if (!f.create) {
    throw error(status::unimplemented,
                "no backend provides " + std::string(to_string(kind)) +
                    " engines (link primcache::" + std::string(to_string(kind)) + ")");
  }
  const std::size_t n = f.count();
  if (index >= n) {
    // A backend that lists no device may know why (OpenCL discovery whose
    // queries failed): its factory is asked and throws that reason.
    if (n == 0) (void)f.create(index);
    throw error(status::invalid_arguments, std::string(to_string(kind)) + " engine index " +
                                               std::to_string(index) + " is out of range (" +
                                               std::to_string(n) + " available)");
  }
  return the_registry().device(kind, index, f);
}

std::size_t engine_count(engine_kind kind) {
  engine_factory f = the_registry().find_engine(kind);
  return f.count ? f.count() : 0;
}

namespace {

// The op each accepted descriptor of a tuned kind was made from, so the
// tuner can ask the other implementations for the same op (tuning.cpp).
// Keyed by address, checked through the weak reference (an address may be
// reused); entries of dead descriptors are swept when the map has doubled.
class op_memo {
 public:
  void remember(const std::shared_ptr<const primitive_desc_impl>& pd, const op_desc& op)
      PRIMCACHE_EXCLUDES(mu_) {
    lock_guard g(mu_);
    map_.insert_or_assign(pd.get(), entry{pd, op});
    if (map_.size() >= 2 * swept_size_) {
      std::erase_if(map_, [](const auto& kv) { return kv.second.pd.expired(); });
      swept_size_ = std::max<std::size_t>(map_.size(), 64);
    }
  }
  std::optional<op_desc> find(const primitive_desc_impl& pd) PRIMCACHE_EXCLUDES(mu_) {
    lock_guard g(mu_);
    auto it = map_.find(&pd);
    if (it == map_.end() || it->second.pd.lock().get() != &pd) return std::nullopt;
    return it->second.op;
  }

 private:
  struct entry {
    std::weak_ptr<const primitive_desc_impl> pd;
    op_desc op;
  };
  mutex mu_;
  std::unordered_map<const primitive_desc_impl*, entry> map_ PRIMCACHE_GUARDED_BY(mu_);
  std::size_t swept_size_ PRIMCACHE_GUARDED_BY(mu_) = 64;
};

op_memo& the_op_memo() {
  static op_memo* m = new op_memo;  // never destroyed, as the registry
  return *m;
}
// Made at load, not on first use (fork safety: docs/runtime.md).
[[maybe_unused]] const op_memo& op_memo_at_load = the_op_memo();
[[maybe_unused]] const config_source_slot& config_source_at_load = the_config_source();

bool tuned_kind(primitive_kind kind) {
  return kind == primitive_kind::matmul || kind == primitive_kind::convolution;
}

// Whether two descriptors take the same arguments: an implementation stands
// in for another only if the user's memory fits it unchanged.
bool same_arguments(const primitive_desc_impl& a, const primitive_desc_impl& b) {
  const auto& x = a.required_args();
  const auto& y = b.required_args();
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i].index != y[i].index || !(x[i].md == y[i].md) || x[i].engine != y[i].engine ||
        x[i].post_op != y[i].post_op) {
      return false;
    }
  }
  return true;
}

// Whether `alt` is an implementation a tuning of `pd` measures, and so one
// the tune table may name for pd's problem: it has configurations (the
// ref: implementations have none and are never candidates) and takes the
// same arguments. alternative_descs lists the candidates by this rule and
// accept follows the table only to one that passes it, so an entry no
// tuning could have written (a hand-edited or foreign file naming
// ref:matmul) never puts slow code in.
bool tuning_candidate(const primitive_desc_impl& alt, const primitive_desc_impl& pd) {
  return alt.default_config() && same_arguments(alt, pd);
}

// Factories running on this thread: a descriptor a composing implementation
// creates for its nested primitive is never redirected to another
// implementation by the tune table (the composing one chose it, and the
// redirect could lead back to the composing implementation).
thread_local int tl_accept_depth = 0;

// Asks each implementation in turn (no caching). At the outermost level, a
// tune-table entry for the first accepting descriptor that names another
// implementation (a cross-implementation winner, tuning.cpp) chooses that
// implementation instead, if it accepts the op and is a tuning candidate
// (tuning_candidate); else the entry is ignored, said in verbose output.
std::shared_ptr<const primitive_desc_impl> accept(const op_desc& op, const primitive_attr& attr,
                                                  const engine& eng) {
  struct depth_scope {
    depth_scope() { ++tl_accept_depth; }
    ~depth_scope() { --tl_accept_depth; }
  } depth;
  std::shared_ptr<const primitive_desc_impl> chosen;
  std::string declined;
  failure rejected;
  bool was_rejected = false;
  const primitive_kind kind = kind_of(op);
  auto list = the_registry().list(eng.get_kind(), kind);
  for (const implementation_entry& e : list ? *list : impl_list{}) {
    auto r = e.create(op, attr, backend::impl_of(eng));
    if (r) {
      chosen = std::move(r).value();
      break;
    }
    if (r.why().code != status::unimplemented) {
      rejected = r.why();
      was_rejected = true;
      break;
    }
    declined.append(declined.empty() ? "" : "; ").append(e.name).append(": ");
    declined.append(r.why().message);
  }
  if (chosen && tuned_kind(kind)) {
    if (tl_accept_depth == 1) {
      const std::optional<std::string> other = tuned_implementation(*chosen, backend::impl_of(eng));
      std::string ignored = other ? "is not registered" : "";
      for (const implementation_entry& e : list&& other ? *list : impl_list{}) {
        if (*other != e.name || *other == chosen->name()) continue;
        auto r = e.create(op, attr, backend::impl_of(eng));
        if (!r) {
          ignored = "declines the op (" + r.why().message + ")";
        } else if (!tuning_candidate(*r.value(), *chosen)) {
          ignored = r.value()->default_config() ? "takes other arguments"
                                                : "has no configurations, so no tuning chose it";
        } else {
          chosen = std::move(r).value();
          ignored.clear();
        }
        break;
      }
      if (!ignored.empty() && verbose_level() >= 1) {
        verbose_print("primcache_verbose,impl:ignored," + std::string(to_string(kind)) + "," +
                      chosen->name() + ",the tune table's entry names " + *other + ", which " +
                      ignored + "; keeping " + chosen->name());
      }
    }
    the_op_memo().remember(chosen, op);
  }
  if (chosen) return chosen;
  if (was_rejected) throw error(rejected.code, rejected.message);
  throw error(status::unimplemented,
              "no " + std::string(to_string(kind)) + " implementation on " +
                  std::string(to_string(eng.get_kind())) + " accepts this descriptor" +
                  (declined.empty() ? std::string(" (none registered)") : " (" + declined + ")"));
}

// The op exactly as the user described it (layouts may still be `any`).
void write_op(key_writer& w, const op_desc& op) {
  w.u8(static_cast<std::uint8_t>(op.index()));
  if (const auto* m = std::get_if<matmul_op>(&op)) {
    m->src.write_key(w);
    m->weights.write_key(w);
    m->bias.write_key(w);
    m->dst.write_key(w);
  } else if (const auto* c = std::get_if<convolution_op>(&op)) {
    w.enumeration(c->prop).enumeration(c->alg);
    c->src.write_key(w);
    c->weights.write_key(w);
    c->bias.write_key(w);
    c->dst.write_key(w);
    for (int i = 0; i < 2; ++i) {
      w.i64(c->strides[i]).i64(c->dilates[i]).i64(c->padding_l[i]).i64(c->padding_r[i]);
    }
  } else if (const auto* e = std::get_if<eltwise_fwd_op>(&op)) {
    w.enumeration(e->prop).enumeration(e->alg).f32(e->alpha).f32(e->beta);
    e->src.write_key(w);
    e->dst.write_key(w);
  } else if (const auto* r = std::get_if<reorder_op>(&op)) {
    r->src.write_key(w);
    r->dst.write_key(w);
    w.enumeration(r->src_engine).enumeration(r->dst_engine);
  }
}

}  // namespace

namespace {

// The settings a factory reads besides the op: the engine's identity (for
// CPU the ISA cap) and the thread count.
std::vector<std::byte> settings_snapshot(const engine& eng, const primitive_attr& attr) {
  key_writer w;
  backend::impl_of(eng).write_identity(w);
  w.i32(get_num_threads());
  // With constant weights, a backend may accept differently when its
  // constant tensor cache keeps nothing (the CPU matmul then reads the
  // weights as they are instead of prepacked).
  if (attr.get_constant_weights()) w.u32(constant_tensor_cache_for(eng).capacity() != 0 ? 1 : 0);
  const key k = w.finish();
  return {k.bytes().begin(), k.bytes().end()};
}

// Thrown inside the cache's creator when a setting changed while the
// factories ran: the descriptor is not cached (failures never are) and the
// creation starts over under the new settings' key.
struct settings_changed {};

}  // namespace

}  // namespace backend

namespace runtime_internal {

std::vector<std::shared_ptr<const backend::primitive_desc_impl>> alternative_descs(
    const backend::primitive_desc_impl& pd, const engine& eng) {
  using namespace backend;
  std::vector<std::shared_ptr<const primitive_desc_impl>> out;
  const std::optional<op_desc> op = the_op_memo().find(pd);
  if (!op) return out;
  auto list = the_registry().list(eng.get_kind(), pd.kind());
  for (const implementation_entry& e : list ? *list : impl_list{}) {
    if (pd.name() == std::string_view(e.name)) continue;
    struct depth_scope {  // its nested descriptors are never redirected
      depth_scope() { ++backend::tl_accept_depth; }
      ~depth_scope() { --backend::tl_accept_depth; }
    } depth;
    auto r = e.create(*op, pd.attr(), backend::impl_of(eng));
    if (!r) continue;
    std::shared_ptr<const primitive_desc_impl> alt = std::move(r).value();
    if (!tuning_candidate(*alt, pd)) continue;
    out.push_back(std::move(alt));
  }
  return out;
}

}  // namespace runtime_internal

namespace backend {

std::shared_ptr<const primitive_desc_impl> create_primitive_desc(const op_desc& op,
                                                                 const primitive_attr& attr,
                                                                 const engine& eng) {
  // Accepting an op (validation, layout resolution, the resolved key) costs
  // more than the primitive-cache lookup that follows it; repeated
  // creations of the same primitive get the descriptor from a cache keyed by
  // everything acceptance depends on. Factories read the ISA cap and the
  // thread count themselves: a descriptor is filed under the lookup key only
  // if those settings were the same before and after the factories ran, so
  // a concurrent set_max_cpu_isa or set_num_threads never files code for
  // one setting under the other's key.
  for (;;) {
    const std::vector<std::byte> settings = settings_snapshot(eng, attr);
    key_writer w;
    write_op(w, op);
    attr.write_key(w);
    attr.write_run_time_values(w);
    w.enumeration(eng.get_kind()).u64(eng.get_index());
    w.raw(settings);
    w.u64(registry_generation.load(std::memory_order_acquire));
    try {
      return primitive_desc_cache()
          .get_or_add(w.finish(),
                      [&] {
                        auto pd = accept(op, attr, eng);
                        if (settings_snapshot(eng, attr) != settings) throw settings_changed{};
                        return pd;
                      })
          .value;
    } catch (const settings_changed&) {
      // A concurrent waiter on the same key sees this too and retries.
    }
  }
}

}  // namespace backend

namespace backend {
engine wrap_engine(std::shared_ptr<const engine_impl> impl) {
  if (!impl) throw error(status::invalid_arguments, "wrap_engine: the device object is null");
  return engine(std::move(impl));
}
}  // namespace backend

engine::engine(engine_kind kind, std::size_t index)
    : impl_(backend::make_engine_impl(kind, index)) {}

engine_kind engine::get_kind() const noexcept {
  return impl_->kind();
}
std::size_t engine::get_index() const noexcept {
  return impl_->index();
}
std::size_t engine::get_count(engine_kind kind) {
  return backend::engine_count(kind);
}

std::string_view to_string(engine_kind kind) noexcept {
  switch (kind) {
    case engine_kind::cpu: return "cpu";
    case engine_kind::gpu: return "gpu";
  }
  return "unknown";
}

namespace backend {
engine_impl::~engine_impl() = default;
}  // namespace backend

}  // namespace primcache
