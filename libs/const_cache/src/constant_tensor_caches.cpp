#include "primcache/const_cache/constant_tensor_caches.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fork_handlers.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/names.hpp"

namespace primcache {

// What control sees of one constant tensor cache: capacity and size in MB,
// the bytes as weight, the flush rules behind set_capacity, and a preview of
// what a capacity would drop. A device named by its kind alone ("cpu") is
// its kind's cache: a capacity set on it through control sets the kind (the
// same flush rules, and the runtime's get_constant_tensor_cache_capacity
// then reads what the operator set), keeping this cache's policy; an indexed
// device ("gpu.1") is set alone.
class constant_tensor_caches::control_view {
 public:
  control_view(constant_tensor_cache& cache, constant_tensor_caches& owner) noexcept
      : cache_(cache), owner_(owner) {}

  std::uint64_t capacity() const noexcept { return cache_.capacity(); }
  void set_capacity(std::uint64_t megabytes) {
    if (is_kind()) {
      // The policy is read where kind settings are serialized, not here.
      owner_.set_kind(cache_.device(), megabytes, std::nullopt, &cache_);
    } else {
      cache_.set_capacity(megabytes);
    }
  }
  capacity_preview preview_capacity(std::uint64_t megabytes) const {
    const capacity_change_effect e =
        is_kind() ? owner_.preview_capacity(cache_.device(), megabytes, cache_.policy())
                  : cache_.preview_capacity(megabytes);
    return {.flushes = e.flushes, .entries = e.tensors, .bytes = e.bytes};
  }
  // Rounded up: a cache holding a few bytes does not read as empty.
  std::uint64_t size() const noexcept {
    return (cache_.get_size() + (std::uint64_t{1} << 20) - 1) >> 20;
  }
  std::uint64_t weight() const noexcept { return cache_.get_size(); }
  cache_stats stats() const noexcept { return cache_.stats(); }
  void clear() { cache_.flush(); }
  extra_stat_list extra_stats() const {
    return {{"tensors", cache_.tensor_count()},
            {"capacity_set", cache_.capacity_set() ? 1 : 0},
            {"policy", static_cast<std::uint64_t>(cache_.policy())}};
  }

 private:
  bool is_kind() const noexcept {
    return constant_tensor_caches::kind_of(cache_.device()) == cache_.device();
  }

  constant_tensor_cache& cache_;
  constant_tensor_caches& owner_;
};

namespace {

constexpr std::string_view name_prefix = "constant.";

std::string control_name(std::string_view device) {
  if (device.empty()) {
    throw error(status::invalid_arguments, "constant tensor cache device name is empty");
  }
  std::string name(name_prefix);
  name.append(device);
  check_control_name("cache", name);
  return name;
}

}  // namespace

// Declared in this order so that the registration goes first, then the view
// and the cache it borrows.
struct constant_tensor_caches::slot {
  slot(std::string device, constant_tensor_caches& owner)
      : cache(std::move(device)), view(cache, owner) {}
  constant_tensor_cache cache;
  control_view view;
  cache_registration registration;
};

constant_tensor_caches::constant_tensor_caches(control_registry& registry) : registry_(registry) {
  const_cache_internal::fork_handlers::add(*this);
}

constant_tensor_caches::~constant_tensor_caches() {
  const_cache_internal::fork_handlers::remove(*this);
  // Unregistered before any cache goes, and outside mutex_: an unregistration
  // waits for control's calls in flight, which never take mutex_ anyway.
  std::map<std::string, std::unique_ptr<slot>, std::less<>> slots;
  {
    lock_guard<mutex> guard(mutex_);
    slots.swap(slots_);
  }
  for (auto& [name, s] : slots) s->registration.reset();
}

std::string_view constant_tensor_caches::kind_of(std::string_view device) noexcept {
  return device.substr(0, device.find('.'));
}

constant_tensor_cache& constant_tensor_caches::device(std::string_view name) {
  {
    lock_guard<mutex> guard(mutex_);
    if (auto it = slots_.find(name); it != slots_.end()) return it->second->cache;
  }
  const std::string registered = control_name(name);
  lock_guard<mutex> guard(mutex_);
  if (auto it = slots_.find(name); it != slots_.end()) return it->second->cache;
  auto s = std::make_unique<slot>(std::string(name), *this);
  // The kind's setting, if any: on an empty cache it flushes nothing.
  if (auto k = kinds_.find(kind_of(name)); k != kinds_.end()) {
    s->cache.set_capacity(k->second.megabytes, k->second.policy);
  }
  // Registering takes control's map lock under mutex_; control never calls
  // back into the set, and its calls into the cache take no lock of ours.
  s->registration = registry_.register_cache(registered, s->view, capacity_unit::megabytes);
  constant_tensor_cache& cache = s->cache;
  slots_.emplace(std::string(name), std::move(s));
  return cache;
}

constant_tensor_cache* constant_tensor_caches::find(std::string_view name) const {
  lock_guard<mutex> guard(mutex_);
  auto it = slots_.find(name);
  return it == slots_.end() ? nullptr : &it->second->cache;
}

std::vector<std::string> constant_tensor_caches::devices() const {
  lock_guard<mutex> guard(mutex_);
  std::vector<std::string> out;
  out.reserve(slots_.size());
  for (const auto& [name, s] : slots_) out.push_back(name);
  return out;
}

void constant_tensor_caches::set_capacity(std::string_view kind, std::uint64_t megabytes) {
  set_kind(kind, megabytes, std::nullopt, nullptr);
}

void constant_tensor_caches::set_capacity(std::string_view kind, std::uint64_t megabytes,
                                          cache_policy policy) {
  set_kind(kind, megabytes, policy, nullptr);
}

void constant_tensor_caches::check_kind(std::string_view kind, std::uint64_t megabytes) {
  if (kind.empty() || kind.find('.') != std::string_view::npos) {
    throw error(status::invalid_arguments,
                "constant tensor cache kind '" + std::string(kind) +
                    "' must be a device name's part before the first dot ('cpu', 'gpu')");
  }
  check_control_name("cache", std::string(name_prefix) + std::string(kind));
  // Checked first, so that a refused value changes nothing at all (not even
  // the kind's setting).
  if (megabytes != constant_tensor_cache::unlimited &&
      megabytes > constant_tensor_cache::max_megabytes) {
    throw error(status::invalid_arguments,
                "constant tensor cache kind '" + std::string(kind) + "': capacity " +
                    std::to_string(megabytes) + " MB is too large (the limit is " +
                    std::to_string(constant_tensor_cache::max_megabytes) + " MB)");
  }
}

void constant_tensor_caches::set_kind(std::string_view kind, std::uint64_t megabytes,
                                      std::optional<cache_policy> policy,
                                      const constant_tensor_cache* keep_policy_of) {
  check_kind(kind, megabytes);
  if (policy && to_string(*policy) == "unknown") {
    throw error(status::invalid_arguments,
                "constant tensor cache kind '" + std::string(kind) + "': policy " +
                    std::to_string(static_cast<int>(*policy)) + " does not exist");
  }
  const_cache_internal::holder_guard applying(apply_, applier_);
  std::vector<constant_tensor_cache*> targets;
  cache_policy resolved = cache_policy::no_evict;
  {
    lock_guard<mutex> guard(mutex_);
    // "Keep the policy" is resolved here, under apply_: the policy in force
    // is the one the last applied setting left, and no other setting can be
    // applied between this read and this setting's application. Read before
    // apply_, a setting applied meanwhile would be undone.
    if (policy) {
      resolved = *policy;
    } else if (keep_policy_of != nullptr) {
      resolved = keep_policy_of->policy();
    } else if (auto k = kinds_.find(kind); k != kinds_.end()) {
      resolved = k->second.policy;
    }
    kinds_[std::string(kind)] = {megabytes, resolved};
    for (auto& [name, s] : slots_) {
      if (kind_of(name) == kind) targets.push_back(&s->cache);
    }
  }
  // Outside mutex_: flushes run eviction callbacks, which may look caches up.
  for (constant_tensor_cache* c : targets) c->set_capacity(megabytes, resolved);
}

std::uint64_t constant_tensor_caches::capacity(std::string_view kind) const {
  lock_guard<mutex> guard(mutex_);
  auto it = kinds_.find(kind);
  return it == kinds_.end() ? constant_tensor_cache::unlimited : it->second.megabytes;
}

cache_policy constant_tensor_caches::policy(std::string_view kind) const {
  lock_guard<mutex> guard(mutex_);
  auto it = kinds_.find(kind);
  return it == kinds_.end() ? cache_policy::no_evict : it->second.policy;
}

capacity_change_effect constant_tensor_caches::preview_capacity(std::string_view kind,
                                                                std::uint64_t megabytes) const {
  return preview_capacity(kind, megabytes, policy(kind));
}

capacity_change_effect constant_tensor_caches::preview_capacity(std::string_view kind,
                                                                std::uint64_t megabytes,
                                                                cache_policy policy) const {
  check_kind(kind, megabytes);
  std::vector<const constant_tensor_cache*> targets;
  {
    lock_guard<mutex> guard(mutex_);
    for (const auto& [name, s] : slots_) {
      if (kind_of(name) == kind) targets.push_back(&s->cache);
    }
  }
  capacity_change_effect total;
  for (const constant_tensor_cache* c : targets) {
    const capacity_change_effect e = c->preview_capacity(megabytes, policy);
    total.flushes = total.flushes || e.flushes;
    total.tensors += e.tensors;
    total.bytes += e.bytes;
  }
  return total;
}

void constant_tensor_caches::apply(const constant_capacity_config& config) {
  for (const constant_capacity_entry& e : config.entries) {
    set_kind(e.kind, e.megabytes, e.policy, nullptr);  // no policy: the kind's stays
  }
}

constant_tensor_caches& constant_caches() {
  // PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY is read once, when the set is
  // made — before anything can use or set it — so every later setting (the
  // runtime's API, control) wins over it, whichever library touches the
  // caches first.
  static constant_tensor_caches* const caches = [] {
    auto* c = new constant_tensor_caches(control());
    c->apply(read_constant_capacity_env());
    return c;
  }();
  return *caches;
}

}  // namespace primcache
