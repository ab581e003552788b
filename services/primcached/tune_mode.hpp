// services/primcached/tune_mode.hpp — primcached's tune mode: which switch,
// table file and candidate budget apply (the command line over the config
// over the environment), applying them before the workload loads, saying
// which of the workload's primitives run tuned configurations, and writing
// the table at stop (docs/primcached.md, "Tuning").
//
//   const tune_settings s = resolve_tune_settings(command_line_tune, config);
//   tune_session tuning(s, stdout, stderr);   // before load_workload
//   tuning.describe(w);                       // the tuned configurations in use
//   ... the workload runs; the console may flip the "tune" switch ...
//   if (!tuning.finish()) exit_status = 1;    // the table written, what was said
//
// The table file is primcached's own when the command line or the config
// names one: use_tune_table_file (primcache/runtime/tuning.hpp) loads it in
// place of PRIMCACHE_TUNE_TABLE's — a missing file is a first run, a
// corrupt or foreign one is reported and ignored, never fatal — and
// finish() writes it whenever the run tuned something, whoever switched
// tuning on (the config, a flag, the environment or the console).
//
// Thread-safety: one controlling thread (main's). Exceptions: the
// constructor throws primcache::error as set_tune_max_nconfigs does (never
// for a budget resolve_tune_settings accepted); describe and finish do not
// throw but std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>

#include "config.hpp"
#include "primcache/runtime/tuning.hpp"
#include "workload.hpp"

namespace primcache::primcached {

// What the command line says (--tune / --no-tune, --tune-table,
// --tune-max-nconfigs); nullopt where it says nothing.
struct tune_flags {
  std::optional<bool> enabled;
  std::optional<std::string> table;
  std::optional<std::size_t> max_nconfigs;
};

// The settings that apply; nullopt / "" leaves the runtime's own, which
// come from PRIMCACHE_TUNE and PRIMCACHE_TUNE_TABLE (docs/CONFIGURATION.md).
struct tune_settings {
  std::optional<bool> enabled;
  std::string table;
  std::optional<std::size_t> max_nconfigs;
};

// Each setting from the command line, else the config's "tune", else none.
tune_settings resolve_tune_settings(const tune_flags& flags, const daemon_config& config);

class tune_session {
 public:
  // Applies the settings: the candidate budget, the table file (loaded as
  // above; a file that is ignored is reported on `err`), the switch; then
  // prints one line on `out` when tuning is on or a table file is in use.
  // Call before the workload loads: its primitive descriptors read the
  // table.
  tune_session(const tune_settings& settings, std::FILE* out, std::FILE* err);
  tune_session(const tune_session&) = delete;
  tune_session& operator=(const tune_session&) = delete;

  // One line on `out` per matmul and convolution of the workload whose
  // problem the table holds: the implementation and configuration its
  // primitive descriptor now has (the table's, unless the descriptor
  // refused the entry, which the line then says).
  void describe(const workload& w) const;

  // At stop, after the workload threads: prints what tuning did in this run
  // and, when it tuned something, writes the table to the file in use
  // (save_tune_table: merged with what the file holds, atomically) and
  // prints how many entries it holds. False when the write failed
  // (reported on `err`).
  bool finish();

 private:
  std::FILE* out_;
  std::FILE* err_;
  std::string path_;  // the table file in use ("" none): primcached's or PRIMCACHE_TUNE_TABLE's
  tune_stats start_;
};

}  // namespace primcache::primcached
