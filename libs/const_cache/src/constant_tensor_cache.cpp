#include "primcache/const_cache/constant_tensor_cache.hpp"

#include <cstdint>
#include <string>
#include <utility>

#include "fork_handlers.hpp"
#include "listener_list.hpp"
#include "primcache/base/error.hpp"

namespace primcache {
namespace {

constexpr std::size_t bytes_of(std::uint64_t megabytes) noexcept {
  return megabytes == constant_tensor_cache::unlimited ? SIZE_MAX
                                                       : static_cast<std::size_t>(megabytes << 20);
}

// The policies primcache::cache offers: consecutive values from 0, each with
// a name (to_string gives "unknown" past the last).
int policy_count() noexcept {
  int n = 0;
  while (n < 256 && to_string(static_cast<cache_policy>(n)) != "unknown") ++n;
  return n;
}

}  // namespace

constant_tensor_cache::constant_tensor_cache(std::string device)
    : device_(std::move(device)),
      listeners_(std::make_shared<const_cache_internal::listener_list>()) {
  const int n = policy_count();
  caches_.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    backing_cache::options_type o;
    o.capacity = 0;
    o.policy = static_cast<cache_policy>(i);
    o.weigher = [](const constant_key&, const buffer_ptr& b) -> std::size_t { return b->size(); };
    // listeners_ is declared before caches_, so it outlives them.
    o.on_evict = [list = listeners_.get()](const constant_key& k, const buffer_ptr* v,
                                           eviction_reason r) { list->evicted(k, v, r); };
    caches_.push_back(std::make_unique<backing_cache>(std::move(o)));
  }
  backing_cache& first = backing(cache_policy::no_evict);
  first.set_capacity(bytes_of(unlimited));
  active_.store(&first, std::memory_order_release);
  const_cache_internal::fork_handlers::add(*this);
}

constant_tensor_cache::~constant_tensor_cache() {
  const_cache_internal::fork_handlers::remove(*this);
}

constant_tensor_cache::backing_cache& constant_tensor_cache::backing(cache_policy policy) const {
  const auto i = static_cast<std::size_t>(policy);
  if (i >= caches_.size()) {
    throw error(status::invalid_arguments, "constant tensor cache '" + device_ + "': policy " +
                                               std::to_string(static_cast<int>(policy)) +
                                               " does not exist");
  }
  return *caches_[i];
}

void constant_tensor_cache::check_created(const constant_key& key, std::size_t size,
                                          const constant_buffer* made) {
  if (made == nullptr) {
    throw error(status::invalid_arguments, "constant tensor creator of backend " +
                                               std::to_string(key.backend_id()) +
                                               " returned no buffer");
  }
  if (made->size() != size) {
    throw error(status::invalid_arguments,
                "constant tensor creator of backend " + std::to_string(key.backend_id()) +
                    " returned a buffer of " + std::to_string(made->size()) +
                    " bytes for a tensor of " + std::to_string(size) + " bytes");
  }
}

bool constant_tensor_cache::remove_if_exist(const constant_key& key) {
  bool removed = false;
  for (const auto& c : caches_) removed = c->erase(key) || removed;
  return removed;
}

bool constant_tensor_cache::remove_if_exist(std::uint64_t backend_id, std::string_view key_bytes) {
  return remove_if_exist(constant_key(backend_id, key_bytes));
}

bool constant_tensor_cache::would_keep(std::size_t bytes) const noexcept {
  return active_.load(std::memory_order_acquire)->would_admit(bytes);
}

constant_tensor_cache::buffer_ptr constant_tensor_cache::find(const constant_key& key) {
  return active_.load(std::memory_order_acquire)->get_if_ready(key).value_or(nullptr);
}

void constant_tensor_cache::count_refused_miss() noexcept {
  active_.load(std::memory_order_acquire)->count_refused_miss();
}

std::uint64_t constant_tensor_cache::get_size() const noexcept {
  std::uint64_t bytes = 0;
  for (const auto& c : caches_) bytes += c->weight();
  return bytes;
}

std::size_t constant_tensor_cache::tensor_count() const noexcept {
  std::size_t n = 0;
  for (const auto& c : caches_) n += c->size();
  return n;
}

bool constant_tensor_cache::flushes(std::uint64_t megabytes, cache_policy policy) const {
  return !capacity_set() || megabytes < capacity() || megabytes == 0 || policy != this->policy();
}

// Capacity changes and flushes hold config_ while they empty backing caches;
// the removals they cause are collected (`later`, declared before the guard)
// and heard once config_ is released, before the call returns. So a callback
// may flush or preview this cache, directly or through control, without
// taking config_ twice on one thread. They take config_ through a
// holder_guard, which records the holder for the fork handlers
// (fork_handlers.hpp).

void constant_tensor_cache::set_capacity(std::uint64_t megabytes) {
  const_cache_internal::deferred_notifications later(*listeners_);
  const_cache_internal::holder_guard guard(config_, config_holder_);
  set_capacity_locked(megabytes, policy());
}

void constant_tensor_cache::set_capacity(std::uint64_t megabytes, cache_policy policy) {
  const_cache_internal::deferred_notifications later(*listeners_);
  const_cache_internal::holder_guard guard(config_, config_holder_);
  set_capacity_locked(megabytes, policy);
}

void constant_tensor_cache::check_capacity(std::uint64_t megabytes) const {
  if (megabytes != unlimited && megabytes > max_megabytes) {
    throw error(status::invalid_arguments,
                "constant tensor cache '" + device_ + "': capacity " + std::to_string(megabytes) +
                    " MB is too large (the limit is " + std::to_string(max_megabytes) + " MB)");
  }
}

void constant_tensor_cache::set_capacity_locked(std::uint64_t megabytes, cache_policy policy) {
  check_capacity(megabytes);
  backing_cache& next = backing(policy);
  const bool flush = flushes(megabytes, policy);
  backing_cache* current = active_.load(std::memory_order_relaxed);
  if (&next != current) {
    // A policy change: the new backing cache (empty, capacity 0 since it was
    // last replaced) takes over, then the old one is emptied and closed in
    // one step, so that no caller still holding it inserts in between.
    // Callers holding it afterwards find capacity 0 there: their creators
    // run and nothing is kept.
    next.set_capacity(bytes_of(megabytes));
    active_.store(&next, std::memory_order_release);
    current->clear_and_set_capacity(0);
  } else if (flush) {
    // One step too: a tensor inserted between a flush and a decrease would
    // survive the decrease that was to flush it.
    current->clear_and_set_capacity(bytes_of(megabytes));
  } else {
    current->set_capacity(bytes_of(megabytes));
  }
  capacity_mb_.store(megabytes, std::memory_order_relaxed);
  policy_.store(policy, std::memory_order_relaxed);
  capacity_set_.store(true, std::memory_order_relaxed);
}

capacity_change_effect constant_tensor_cache::preview_capacity(std::uint64_t megabytes) const {
  lock_guard<mutex> guard(config_);
  return preview_locked(megabytes, policy());
}

capacity_change_effect constant_tensor_cache::preview_capacity(std::uint64_t megabytes,
                                                               cache_policy policy) const {
  lock_guard<mutex> guard(config_);
  return preview_locked(megabytes, policy);
}

capacity_change_effect constant_tensor_cache::preview_locked(std::uint64_t megabytes,
                                                             cache_policy policy) const {
  check_capacity(megabytes);
  (void)backing(policy);  // throws for a policy that does not exist
  if (!flushes(megabytes, policy)) return {};
  capacity_change_effect effect;
  effect.flushes = true;
  for (const auto& c : caches_) {
    const cache_occupancy o = c->occupancy();
    effect.tensors += o.size;
    effect.bytes += o.weight;
  }
  return effect;
}

void constant_tensor_cache::flush() {
  const_cache_internal::deferred_notifications later(*listeners_);
  const_cache_internal::holder_guard guard(config_, config_holder_);
  active_.load(std::memory_order_relaxed)->clear();
}

cache_stats constant_tensor_cache::stats() const noexcept {
  cache_stats total;
  for (const auto& c : caches_) {
    const cache_stats s = c->stats();
    total.hits += s.hits;
    total.misses += s.misses;
    total.waits += s.waits;
    total.evictions += s.evictions;
    total.refusals += s.refusals;
    total.failures += s.failures;
    total.creation_time += s.creation_time;
  }
  return total;
}

eviction_subscription constant_tensor_cache::on_eviction(eviction_callback callback) {
  if (!callback) {
    throw error(status::invalid_arguments,
                "constant tensor cache '" + device_ + "': eviction callback is empty");
  }
  return listeners_->add(std::move(callback));
}

}  // namespace primcache
