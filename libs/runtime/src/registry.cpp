#include "primcache/runtime/backend/registry.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/runtime/thread_pool.hpp"

namespace primcache {
namespace runtime_internal {
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
};

registry& the_registry() {
  static registry* r = new registry;  // never destroyed: backends register from static init
  return *r;
}

}  // namespace

void register_implementation(const implementation_entry& entry) {
  the_registry().add(entry);
}

std::vector<implementation_entry> implementations(engine_kind engine, primitive_kind kind) {
  auto list = the_registry().list(engine, kind);
  return list ? *list : std::vector<implementation_entry>{};
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
    throw error(status::invalid_arguments, std::string(to_string(kind)) + " engine index " +
                                               std::to_string(index) + " is out of range (" +
                                               std::to_string(n) + " available)");
  }
  return f.create(index);
}

std::size_t engine_count(engine_kind kind) {
  engine_factory f = the_registry().find_engine(kind);
  return f.count ? f.count() : 0;
}

std::shared_ptr<const primitive_desc_impl> create_primitive_desc(const op_desc& op,
                                                                 const primitive_attr& attr,
                                                                 const engine& eng) {
  std::shared_ptr<const primitive_desc_impl> chosen;
  std::string declined;
  failure rejected;
  bool was_rejected = false;
  const primitive_kind kind = kind_of(op);
  auto list = the_registry().list(eng.get_kind(), kind);
  for (const implementation_entry& e : list ? *list : impl_list{}) {
    auto r = e.create(op, attr, eng.impl());
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
  if (chosen) return chosen;
  if (was_rejected) throw error(rejected.code, rejected.message);
  throw error(status::unimplemented,
              "no " + std::string(to_string(kind)) + " implementation on " +
                  std::string(to_string(eng.get_kind())) + " accepts this descriptor" +
                  (declined.empty() ? std::string(" (none registered)") : " (" + declined + ")"));
}

}  // namespace runtime_internal

engine::engine(engine_kind kind, std::size_t index)
    : impl_(runtime_internal::make_engine_impl(kind, index)) {}

engine_kind engine::get_kind() const noexcept {
  return impl_->kind();
}
std::size_t engine::get_index() const noexcept {
  return impl_->index();
}
std::size_t engine::get_count(engine_kind kind) {
  return runtime_internal::engine_count(kind);
}

std::string_view to_string(engine_kind kind) noexcept {
  switch (kind) {
    case engine_kind::cpu: return "cpu";
    case engine_kind::gpu: return "gpu";
  }
  return "unknown";
}

namespace runtime_internal {
engine_impl::~engine_impl() = default;
}  // namespace runtime_internal

}  // namespace primcache
