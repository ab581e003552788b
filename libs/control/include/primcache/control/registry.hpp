// primcache/control/registry.hpp — the process-wide registry of what an
// operator may see and turn: named caches, boolean switches and settings,
// and what it may read: metrics (metric.hpp), info labels and recent events
// (event.hpp).
//
// Libraries register their caches and switches and keep the registrations;
// metrics and the admin server read and turn them by name. control() is the
// one registry of the process (shared by every library that links control);
// separate control_registry objects exist for tests and embedding.
//
//   // owner
//   primcache::cache_registration reg =
//       primcache::register_cache("primitive", cache, primcache::capacity_unit::entries);
//   // operator
//   for (const primcache::cache_info& c : primcache::control().list_caches()) ...
//   primcache::control().set_capacity("primitive", 4096);
//   primcache::control().flush("primitive");
//   // the runtime, off the hit path (see metric.hpp, event.hpp)
//   static auto execs = primcache::control().counter(
//       "primcache_primitive_executions_total", "Primitive executions", {{"kind", "matmul"}});
//   execs.add();
//   primcache::control().record_event({.kind = "create", .name = "matmul",
//                                      .source = "compile", .duration_ms = 1.8});
//   primcache::control().set_info("build", "isa", "avx2");
//
// A name is registered once at a time: registering it again while registered
// throws error(already_exists); after unregistration it may be registered
// anew. Caches and switches have separate names. Names follow names.hpp.
//
// Thread-safety: every member may be called from any thread at once.
// Registration and unregistration take the registry's lock briefly; calls into
// a cache are made without it (a cache may call back into control), holding
// only that cache's entry, which its unregistration waits for.
// Exceptions: primcache::error — invalid_arguments for a bad name,
// already_exists for a name in use, not_found for a name not registered —
// std::bad_alloc, and whatever a cache's own members throw.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/control/cache_handle.hpp"
#include "primcache/control/cache_registration.hpp"
#include "primcache/control/capacity_unit.hpp"
#include "primcache/control/controllable_cache.hpp"
#include "primcache/control/event.hpp"
#include "primcache/control/metric.hpp"
#include "primcache/control/setting.hpp"
#include "primcache/control/switch_registration.hpp"

namespace primcache {

namespace control_internal {
class registry_state;
}  // namespace control_internal

// A named set of labels exported as primcache_<name>_info{labels} 1; "build"
// holds version (preset), llvm and isa ("unknown" until a backend sets them).
struct info_labels {
  std::string name;
  metric_labels labels;  // ordered by label name
};

class PRIMCACHE_API control_registry {
 public:
  control_registry();
  // Registrations may outlive the registry: they keep its state alive.
  ~control_registry();
  control_registry(const control_registry&) = delete;
  control_registry& operator=(const control_registry&) = delete;

  // Registers `cache` under `name`. The registry borrows the object: the
  // caller keeps it alive until the returned registration is destroyed.
  template <controllable_cache C>
  [[nodiscard]] cache_registration register_cache(std::string_view name, C& cache,
                                                  capacity_unit unit = capacity_unit::entries) {
    return register_cache_ops(name, unit, control_internal::make_cache_ops(cache));
  }

  // Throws error(not_found) when no cache has that name.
  cache_handle find_cache(std::string_view name) const;
  // Every registered cache, ordered by name. A cache unregistered while the
  // list is being read is left out.
  std::vector<cache_info> list_caches() const;
  // find_cache(name).set_capacity(capacity) and .flush().
  void set_capacity(std::string_view name, std::uint64_t capacity);
  void flush(std::string_view name);

  [[nodiscard]] switch_registration register_switch(std::string_view name,
                                                    std::string_view description, bool initial);
  // Throw error(not_found) when no switch has that name.
  void set_switch(std::string_view name, bool on);
  bool get_switch(std::string_view name) const;
  // Every registered switch, ordered by name.
  std::vector<switch_info> list_switches() const;

  // Settings (setting.hpp). register_setting throws invalid_arguments for a
  // bad name or a spec whose initial value fails its own checks,
  // already_exists for a name in use; set_setting throws not_found or
  // invalid_arguments with the reason.
  [[nodiscard]] setting_registration register_setting(setting_spec spec);
  void set_setting(std::string_view name, const setting_value& value);
  setting_info get_setting(std::string_view name) const;
  // Every registered setting, ordered by name.
  std::vector<setting_info> list_settings() const;

  // Metrics (metric.hpp): get or create the series `name{labels}`. Buckets:
  // ascending finite upper bounds; empty means default_latency_buckets().
  metric_counter counter(std::string_view name, std::string_view help,
                         const metric_labels& labels = {});
  metric_gauge gauge(std::string_view name, std::string_view help,
                     const metric_labels& labels = {});
  metric_histogram histogram(std::string_view name, std::string_view help,
                             const metric_labels& labels = {}, std::vector<double> buckets = {});
  // Every metric and its series now, ordered by name.
  std::vector<metric_family_info> list_metrics() const;

  // Info labels: sets (or replaces) one label of the info set `name`. Names
  // and keys are metric names ([a-z_][a-z0-9_]*); throws invalid_arguments.
  void set_info(std::string_view name, std::string_view key, std::string_view value);
  // Every info set, ordered by name.
  std::vector<info_labels> list_info() const;

  // Events (event.hpp).
  void record_event(control_event event);
  event_page events_since(std::uint64_t since) const;

 private:
  cache_registration register_cache_ops(std::string_view name, capacity_unit unit,
                                        const control_internal::cache_ops& ops);

  std::shared_ptr<control_internal::registry_state> state_;
};

// The process-wide registry; never destroyed, so usable during exit.
PRIMCACHE_API control_registry& control();

// control().register_cache(...), control().register_switch(...).
template <controllable_cache C>
[[nodiscard]] cache_registration register_cache(std::string_view name, C& cache,
                                                capacity_unit unit = capacity_unit::entries) {
  return control().register_cache(name, cache, unit);
}
[[nodiscard]] inline switch_registration register_switch(std::string_view name,
                                                         std::string_view description,
                                                         bool initial) {
  return control().register_switch(name, description, initial);
}

}  // namespace primcache
