// services/primcached/config.hpp — primcached's configuration file: the
// admin server's address and token file, the workload threads, the summary
// interval, cache capacities by control name, the constant tensor caches'
// capacities by engine kind, the persistent cache, tune mode, and the
// workload to run
// (docs/primcached.md describes every field).
//
//   primcache::primcached::daemon_config c =
//       primcache::primcached::load_config(text, "configs/primcached.json");
//   primcache::primcached::apply_capacities(c);   // through primcache::control()
//
// Thread-safety: values. Exceptions: primcache::error(invalid_arguments)
// whose message names the file and the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "primcache/runtime/engine.hpp"

namespace primcache::primcached {

struct daemon_config {
  std::string file;  // what messages call it
  std::string admin_address = "127.0.0.1";
  std::uint16_t admin_port = 8477;
  std::string token_file;  // empty: services::default_token_file()
  int admin_threads = 1;
  int threads = 2;                      // workload threads
  double summary_interval_seconds = 5;  // > 0
  // (control name, capacity), in file order; capacities in the cache's unit.
  std::vector<std::pair<std::string, std::uint64_t>> caches;
  // (engine kind, MB) of the constant tensor caches ("constant_caches":
  // {"cpu": 2048, "gpu": "unlimited"}), in file order; unlimited is
  // primcache::constant_tensor_cache_unlimited. Set through
  // set_constant_tensor_cache_capacity, so they win over
  // PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY.
  std::vector<std::pair<engine_kind, std::int64_t>> constant_caches;
  // "persistent_cache": {"dir": ..., "capacity_mb": ..., "redis": ...}: the
  // persistent kernel cache to attach (docs/primcached.md). Absent: the
  // PRIMCACHE_PERSISTENT_CACHE_* variables apply, as in any program.
  struct persistent_config {
    std::string dir;  // relative paths resolved against the config file's folder
    std::uint64_t capacity_mb = 1024;
    std::string redis;  // redis://host:port/prefix
  };
  std::optional<persistent_config> persistent;
  // "tune": {"enabled": bool, "table": PATH, "max_nconfigs": N}: tune mode
  // for the workload (docs/primcached.md, "Tuning"). Each field left out
  // leaves its setting to the command line or the environment
  // (PRIMCACHE_TUNE, PRIMCACHE_TUNE_TABLE); the command line wins over it.
  struct tune_config {
    std::optional<bool> enabled;
    std::string table;  // relative paths resolved against the config file's folder; "" none
    std::optional<std::size_t> max_nconfigs;  // 1 .. 1000
  };
  tune_config tune;
  // The workload file, relative paths resolved against the config file's
  // folder; empty: the embedded default workload.
  std::string workload;
};

// Parses and validates; `file` names it in messages and anchors a relative
// workload path (an embedded config passes base_dir "").
daemon_config load_config(std::string_view text, const std::string& file,
                          const std::string& base_dir);

// Attaches the configured persistent cache (set_persistent_cache with
// open_persistent_cache); nothing when the config has none. Returns the
// reason when the store cannot be opened or attached (the daemon runs
// without it and says so), an empty string when attached or not configured.
std::string attach_persistent_cache(const daemon_config& config);

// Makes the runtime register its caches (the primitive cache, constant.cpu),
// sets the constant tensor caches' capacities by kind, then each configured
// capacity through primcache::control(); a name that is not registered is
// refused with the list of those that are.
void apply_capacities(const daemon_config& config);

}  // namespace primcache::primcached
