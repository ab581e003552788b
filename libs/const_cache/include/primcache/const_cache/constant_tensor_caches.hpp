// primcache/const_cache/constant_tensor_caches.hpp — the constant tensor
// caches of a process: one per device, found by the device's name, each
// registered in control as `constant.<device>`.
//
// The library does not know the runtime's engine kinds. A device is named by
// whoever uses it: its engine kind, then, where a kind has several devices,
// a dot and an index ("cpu", "gpu.0", "gpu.1"). The part before the first
// dot is the device's kind. Capacities are set per kind, as the RFC's
// set_constant_tensor_cache_capacity(engine_kind, mb) does: the budget is
// per device, and a kind's setting applies to each of its devices, those
// that exist and those created later (the RFC's multi-device proposal). A
// device's own cache may still be set alone (the admin API does, by name).
//
//   primcache::constant_tensor_caches& caches = primcache::constant_caches();
//   caches.set_capacity("gpu", 2048);                  // every gpu.N, 2 GiB each
//   primcache::constant_tensor_cache& c = caches.device("gpu.0");   // kept: never destroyed
//   primcache::control().set_capacity("constant.gpu.0", 1024);      // same flush rules
//
// In control each cache reports capacity in MB (unlimited_capacity for
// none), size in MB (rounded up), weight_bytes (its bytes), the counters
// (hits, misses, waits, evictions, refusals, failures, creation time) and
// extra statistics: `tensors` (entries held), `capacity_set` (1 once a
// capacity was set: the next setting then flushes only if it decreases) and
// `policy` (the cache_policy's value). A capacity set through control
// follows the flush rules and keeps the policy; on a device named by its
// kind alone ("cpu") it sets the kind (keeping that cache's policy). Its
// preview_capacity (control's cache_handle::preview_capacity) tells what a
// capacity would drop.
//
// Thread-safety: every member may be called from any thread at once. A
// device's cache, once created, lives as long as the set (for
// constant_caches(), the process). Kind settings are serialized among
// themselves; one that keeps the policy keeps the one the settings before it
// left, whatever runs meanwhile. They run eviction callbacks (see
// constant_tensor_cache.hpp) while serialized, so a callback must not set a
// capacity or policy (it may preview and flush, also through control).
// Exceptions: error(invalid_arguments) for a device name that is not
// `[a-z0-9_.-]+` (up to 119 characters) or a capacity too large;
// error(already_exists) when the registry already has a cache of that name;
// std::bad_alloc.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/cache/cache_policy.hpp"
#include "primcache/const_cache/capacity_config.hpp"
#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "primcache/control/registry.hpp"

namespace primcache {

namespace const_cache_internal {
class fork_handlers;
}  // namespace const_cache_internal

class PRIMCACHE_API constant_tensor_caches {
 public:
  // Registers each cache it creates with `registry`, which must outlive the
  // set.
  explicit constant_tensor_caches(control_registry& registry = control());
  // Unregisters every cache, then destroys them.
  ~constant_tensor_caches();
  constant_tensor_caches(const constant_tensor_caches&) = delete;
  constant_tensor_caches& operator=(const constant_tensor_caches&) = delete;

  // The device's cache, created (with its kind's setting) and registered on
  // first use. The reference stays valid as long as the set.
  constant_tensor_cache& device(std::string_view name);
  // The device's cache, or nullptr if none was created.
  constant_tensor_cache* find(std::string_view name) const;
  // The devices with a cache, ordered by name.
  std::vector<std::string> devices() const;

  // Sets the capacity (MB; constant_tensor_cache::unlimited for none) of
  // every device of `kind`, keeping or changing the policy, by the flush
  // rules; devices created later start with it.
  void set_capacity(std::string_view kind, std::uint64_t megabytes);
  void set_capacity(std::string_view kind, std::uint64_t megabytes, cache_policy policy);
  // The kind's setting (unlimited and no_evict until set).
  std::uint64_t capacity(std::string_view kind) const;
  cache_policy policy(std::string_view kind) const;
  // What set_capacity(kind, megabytes) would drop now from the kind's
  // devices, summed (flushes: at least one would be emptied). Same
  // exceptions as set_capacity; changes nothing.
  capacity_change_effect preview_capacity(std::string_view kind, std::uint64_t megabytes) const;
  capacity_change_effect preview_capacity(std::string_view kind, std::uint64_t megabytes,
                                          cache_policy policy) const;

  // Applies parsed entries (capacity_config.hpp), each as set_capacity of
  // its kind, keeping the kind's policy where an entry names none. The
  // runtime calls this at start, before API calls that should win.
  void apply(const constant_capacity_config& config);

  // The kind of a device name: the part before the first dot.
  static std::string_view kind_of(std::string_view device) noexcept;

 private:
  friend class const_cache_internal::fork_handlers;  // fork(): mutex_ and apply_
  struct kind_setting {
    std::uint64_t megabytes = constant_tensor_cache::unlimited;
    cache_policy policy = cache_policy::no_evict;
  };
  struct slot;         // a cache, its control view and its registration
  class control_view;  // what control sees of a cache (constant_tensor_caches.cpp)

  static void check_kind(std::string_view kind, std::uint64_t megabytes);
  // Sets the kind's capacity and policy and applies them to its devices.
  // No `policy` keeps one: that of `keep_policy_of` (the kind's own cache,
  // for control) or else the kind's, read under apply_ so that a setting
  // applied meanwhile is never undone.
  void set_kind(std::string_view kind, std::uint64_t megabytes, std::optional<cache_policy> policy,
                const constant_tensor_cache* keep_policy_of) PRIMCACHE_EXCLUDES(mutex_, apply_);

  control_registry& registry_;
  // Serializes kind settings, from resolving a kept policy to the last
  // device's change (callbacks included; outside mutex_).
  mutex apply_;
  // The thread holding apply_, if any: a fork child remakes apply_ that a
  // thread it does not have held, never one its own thread holds (it forked
  // from a callback of that setting). mutex_ is held across fork()
  // (src/fork_handlers.hpp).
  std::atomic<std::thread::id> applier_{};
  mutable mutex mutex_;
  std::map<std::string, std::unique_ptr<slot>, std::less<>> slots_ PRIMCACHE_GUARDED_BY(mutex_);
  std::map<std::string, kind_setting, std::less<>> kinds_ PRIMCACHE_GUARDED_BY(mutex_);
};

// The process's set, registered with control(); never destroyed, so caches
// stay usable during exit. When it is made (the first call), it applies
// PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY (read_constant_capacity_env), so
// the variable is read once, before any setting, and every later setting
// wins over it.
PRIMCACHE_API constant_tensor_caches& constant_caches();

}  // namespace primcache
