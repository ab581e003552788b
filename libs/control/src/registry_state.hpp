// The registry's private state: its maps, one entry per registered cache or
// switch, and the protocol that keeps calls out of unregistered caches.
//
// Lock order: registry_state::mu, then a setting's value lock (only the
// atfork prepare handler takes both); the event ring's lock is taken alone.
// No lock is held while calling into a cache, so a cache may call back into
// the registry from inside a call; a cache entry counts its calls in a
// call_gate (primcache/base/call_gate.hpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "event_ring.hpp"
#include "metric_state.hpp"
#include "primcache/base/call_gate.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/control/cache_handle.hpp"
#include "primcache/control/capacity_unit.hpp"
#include "primcache/control/controllable_cache.hpp"
#include "primcache/control/registry.hpp"
#include "setting_entry.hpp"

namespace primcache::control_internal {

// The cache's capacity, size, stats, weight and extras into `out` (name and
// unit are the caller's); extras with invalid names are dropped, the rest
// sorted by name.
void read_info(const cache_ops& ops, cache_info& out);
extra_stat_list checked_extras(extra_stat_list extras);

// Throws error(invalid_arguments) unless `name` is [a-z_][a-z0-9_]*.
void check_metric_name(std::string_view what, std::string_view name);

// 'name', with bytes outside printable ASCII written as \xNN, for messages.
std::string quoted(std::string_view name);

class cache_entry {
 public:
  cache_entry(std::string name, capacity_unit unit, const cache_ops& ops)
      : name_(std::move(name)), unit_(unit), ops_(ops) {}

  const std::string& name() const noexcept { return name_; }
  capacity_unit unit() const noexcept { return unit_; }

  // Runs f(ops) and returns true while the entry is live; returns false
  // without running f once retire() has begun. f's exceptions propagate.
  template <typename F>
  bool call(F&& f) {
    return gate_.call([&] { std::forward<F>(f)(ops_); });
  }

  // Stops new calls, then waits until no other thread is inside one. Calls
  // the retiring thread itself is making (a cache unregistering itself from
  // one of its members) are not waited for: that wait could never end.
  void retire() noexcept { gate_.close(); }

  // In a fork child: the calls in flight are the forking thread's own; the
  // other threads' calls ended with their threads.
  void reset_in_child() noexcept { gate_.reset_in_child(); }

 private:
  const std::string name_;
  const capacity_unit unit_;
  const cache_ops ops_;
  call_gate gate_;
};

struct switch_entry {
  switch_entry(std::string n, std::string d, bool initial_state)
      : name(std::move(n)),
        description(std::move(d)),
        initial(initial_state),
        state(initial_state) {}

  const std::string name;
  const std::string description;
  const bool initial;
  // Stored with release by set_switch/set, loaded with acquire by on().
  std::atomic<bool> state;
};

class registry_state {
 public:
  // Each registry is known to the process's atfork handlers (fork.cpp) for
  // its lifetime.
  registry_state();
  ~registry_state();
  registry_state(const registry_state&) = delete;
  registry_state& operator=(const registry_state&) = delete;

  // fork(): the prepare handler holds every lock below, so the child
  // copies no map, ring or value in the middle of a change; the parent
  // releases them (unlock_after_fork). In the child, reset_in_child()
  // releases them too, once what the parent's other threads were doing in a
  // cache or a setter is undone: those threads are not in the child.
  void lock_for_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  void unlock_after_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  void reset_in_child() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;

  // Removes `entry` from the map (unless its name now belongs to a newer
  // registration), then retires it outside the map lock.
  void unregister(const std::shared_ptr<cache_entry>& entry) noexcept PRIMCACHE_EXCLUDES(mu);
  void unregister(const std::shared_ptr<switch_entry>& entry) noexcept PRIMCACHE_EXCLUDES(mu);
  void unregister(const std::shared_ptr<setting_entry>& entry) noexcept PRIMCACHE_EXCLUDES(mu);

  // Held exclusively to add or remove, shared to look up or list; never while
  // calling into a cache.
  mutable shared_mutex mu;
  std::map<std::string, std::shared_ptr<cache_entry>, std::less<>> caches PRIMCACHE_GUARDED_BY(mu);
  std::map<std::string, std::shared_ptr<switch_entry>, std::less<>> switches
      PRIMCACHE_GUARDED_BY(mu);
  std::map<std::string, std::shared_ptr<setting_entry>, std::less<>> settings
      PRIMCACHE_GUARDED_BY(mu);
  std::map<std::string, metric_family, std::less<>> metrics PRIMCACHE_GUARDED_BY(mu);
  std::map<std::string, std::map<std::string, std::string>, std::less<>> info
      PRIMCACHE_GUARDED_BY(mu);

  // Has its own lock; never taken with mu.
  event_ring events;
};

}  // namespace primcache::control_internal
