#include "tune_mode.hpp"

#include <exception>

#include "primcache/base/error.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"

namespace primcache::primcached {

tune_settings resolve_tune_settings(const tune_flags& flags, const daemon_config& config) {
  tune_settings s;
  s.enabled = flags.enabled ? flags.enabled : config.tune.enabled;
  s.table = flags.table ? *flags.table : config.tune.table;
  s.max_nconfigs = flags.max_nconfigs ? flags.max_nconfigs : config.tune.max_nconfigs;
  return s;
}

tune_session::tune_session(const tune_settings& settings, std::FILE* out, std::FILE* err)
    : out_(out), err_(err) {
  if (settings.max_nconfigs) set_tune_max_nconfigs(*settings.max_nconfigs);
  std::string loaded;
  if (!settings.table.empty()) {
    path_ = settings.table;
    const tune_table_file_report r = use_tune_table_file(path_);
    if (!r.ignored.empty()) {
      std::fprintf(err_,
                   "primcached: ignoring the tune table: %s (replaced at stop if this run tunes "
                   "anything)\n",
                   r.ignored.c_str());
      loaded = "ignored";
    } else if (!r.found) {
      loaded = "not found (written at stop)";
    } else {
      loaded = std::to_string(r.entries) + (r.entries == 1 ? " entry" : " entries");
    }
  } else {
    path_ = get_tune_table_path();
    if (!path_.empty()) {
      const std::size_t n = global_tune_table().size();
      loaded = std::to_string(n) + (n == 1 ? " entry" : " entries") + " (PRIMCACHE_TUNE_TABLE)";
    }
  }
  if (settings.enabled) set_tune(*settings.enabled);
  start_ = get_tune_stats();
  const bool on = get_tune();
  if (!on && path_.empty()) return;
  std::string line = on ? "tuning on (at most " + std::to_string(get_tune_max_nconfigs()) +
                              " configurations per primitive)"
                        : "tuning off";
  line += path_.empty() ? "; no tune table file: what is tuned is not kept"
                        : "; tune table " + path_ + ": " + loaded;
  std::fprintf(out_, "primcached: %s\n", line.c_str());
}

void tune_session::describe(const workload& w) const {
  if (global_tune_table().size() == 0) return;
  for (const primitive_spec& spec : w.primitives) {
    if (spec.kind != primitive_kind::matmul && spec.kind != primitive_kind::convolution) continue;
    try {
      const engine eng(spec.engine, 0);
      const primitive_desc pd = make_primitive_desc(spec, eng);
      const backend::primitive_desc_impl& impl = backend::impl_of(pd);
      const auto entry = global_tune_table().find(tune_device_of(eng), impl.problem_key());
      if (!entry) continue;
      const std::string config = impl.config() ? impl.config()->to_json() : "{}";
      std::string line = "primcached: tuned " + spec.name + ": " + impl.name() + " " + config;
      if (entry->implementation != impl.name() || entry->config != config) {
        line +=
            " (the table's entry " + entry->implementation + " " + entry->config + " was refused)";
      }
      std::fprintf(out_, "%s\n", line.c_str());
    } catch (const std::exception& e) {
      // The workload loaded, so this does not happen; a description is not
      // worth stopping for.
      std::fprintf(err_, "primcached: %s: %s\n", spec.name.c_str(), e.what());
    }
  }
}

bool tune_session::finish() {
  const tune_stats now = get_tune_stats();
  const std::uint64_t tuned = now.tuned - start_.tuned;
  const std::uint64_t replaced = now.replaced - start_.replaced;
  const std::uint64_t failed = now.failed - start_.failed;
  const std::uint64_t skipped = now.skipped - start_.skipped;
  if (tuned + failed + skipped != 0 || get_tune()) {
    std::fprintf(out_,
                 "primcached: tuning: %llu tuned (%llu replaced the default configuration), "
                 "%llu failed, %llu with nothing to tune; %.1f s\n",
                 static_cast<unsigned long long>(tuned), static_cast<unsigned long long>(replaced),
                 static_cast<unsigned long long>(failed), static_cast<unsigned long long>(skipped),
                 now.seconds - start_.seconds);
  }
  if (path_.empty()) {
    if (tuned != 0) {
      std::fprintf(out_,
                   "primcached: the tuned entries are not kept: no tune table file (--tune-table, "
                   "the config's \"tune\": {\"table\": ...} or PRIMCACHE_TUNE_TABLE)\n");
    }
    return true;
  }
  if (tuned == 0) {
    std::fprintf(out_, "primcached: tune table %s: nothing tuned in this run, not written\n",
                 path_.c_str());
    return true;
  }
  try {
    const std::size_t entries = save_tune_table(path_);
    std::fprintf(out_, "primcached: tune table %s: wrote %zu %s\n", path_.c_str(), entries,
                 entries == 1 ? "entry" : "entries");
  } catch (const error& e) {
    std::fprintf(err_, "primcached: cannot write the tune table: %s\n", e.message().c_str());
    return false;
  }
  return true;
}

}  // namespace primcache::primcached
