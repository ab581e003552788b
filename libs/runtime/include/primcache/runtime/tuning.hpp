// primcache/runtime/tuning.hpp — tune mode: kernel configurations chosen by
// measurement, kept in the process's tune table (the auto-tuning RFC's
// option 1.3, without its allowance for regressions or wrong results).
//
//   primcache::set_tune(true);                      // or PRIMCACHE_TUNE=1
//   primcache::matmul::primitive_desc pd(desc, attr, eng);
//   primcache::matmul prim(pd);
//   prim.execute(strm, args);                       // tunes here, once
//   primcache::set_tune(false);
//   primcache::matmul tuned(primcache::matmul::primitive_desc(desc, attr, eng));
//   tuned.execute(strm, args);                      // runs the winner
//   primcache::save_tune_table("tune.json");        // or PRIMCACHE_TUNE_TABLE=path
//
// What happens: the first execute() of a primitive whose attribute
// `tunable` is on (primitive_attr::set_tunable; unset, it follows the
// switch) tunes it before running it, when its implementation has
// configurations (CPU matmul and convolution) and the table has no entry
// for its problem on this device yet. The default (the heuristic's)
// configuration and up to max_nconfigs - 1 others from the
// implementation's space are each built in a private cache the global
// primitive cache never sees, run five times under a cold cache on
// synthetic inputs in the primitive's own descriptors, checked against the
// default's output (autotune/output_check.hpp), and the fastest correct one
// that beats the default by more than the noise wins
// (autotune/tuner.hpp) — once it is confirmed against the default warm
// (interleaved runs, not slower by minimum or median; a rejected one gives
// way to the next fastest, three at most). The winner — the default when nothing beat it —
// goes into the table under (device, problem key); the primitive
// descriptors cached so far are invalidated, so the next creation of that
// descriptor (tuning on or off) gets the winner's configuration and its own
// primitive key. The primitive that tuned keeps the code it was created
// with. Later executions never tune again; a failed tuning is reported on
// stderr and the primitive runs as it is. `tunable` is not part of the
// primitive key.
//
// The table: loaded from PRIMCACHE_TUNE_TABLE when the runtime's tuning
// state is first used (a corrupt or unreadable file is reported on stderr
// and ignored; entries of another library version are ignored), or from
// the path use_tune_table_file() names instead; written there at exit when
// it changed, and on request with save_tune_table().
//
// Thread-safety: every function may be called from any thread. Many
// primitives may tune at once (each problem is tuned by one thread; others
// executing it meanwhile run untuned). Exceptions: primcache::error, as
// each function says.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "primcache/autotune/tune_table.hpp"
#include "primcache/base/export.hpp"
#include "primcache/runtime/engine.hpp"

namespace primcache {

// The global switch (also the control switch "tune"); initially
// PRIMCACHE_TUNE (0/1), off when unset or malformed.
PRIMCACHE_API void set_tune(bool on);
PRIMCACHE_API bool get_tune();

// Candidates measured per primitive, the default included: 1 .. 1000
// (default 40); anything else throws invalid_arguments.
PRIMCACHE_API void set_tune_max_nconfigs(std::size_t n);
PRIMCACHE_API std::size_t get_tune_max_nconfigs();

// The process's table (what primitive descriptor creation reads and tuning
// writes).
PRIMCACHE_API tune_table& global_tune_table();
// The device name the table files this process's entries under for `eng`
// ("cpu:avx512_core": the engine's description).
PRIMCACHE_API std::string tune_device_of(const engine& eng);
// The table file: PRIMCACHE_TUNE_TABLE, or the last use_tune_table_file()
// path; "" when neither.
PRIMCACHE_API std::string get_tune_table_path();

// What use_tune_table_file found at its path.
struct tune_table_file_report {
  bool found = false;       // a file is there (false: a first run; the first save creates it)
  std::size_t entries = 0;  // entries the table took from it
  // Why the file was ignored — corrupt, unreadable, of another library
  // version — naming the path; empty when it was not.
  std::string ignored;
};
// Makes `path` the process's table file in place of PRIMCACHE_TUNE_TABLE's,
// as that variable does at start: the table's entries are replaced by the
// file's, and save_tune_table() with no path and the exit hook write there.
// A missing file leaves the table empty; a corrupt, unreadable or
// other-version file is ignored (the table left empty) and the report says
// why: never an error. The primitive descriptors cached so far are
// invalidated, since they chose their configurations from the old entries.
// Meant for start-up (a daemon's --tune-table): entries tuned before the
// call are dropped. invalid_arguments for an empty path.
PRIMCACHE_API tune_table_file_report use_tune_table_file(const std::string& path);
// Writes the table to `path` (empty: PRIMCACHE_TUNE_TABLE's; invalid_arguments
// when that is unset too), merging what the file holds, atomically. Returns
// the entries written; runtime_error naming the path when it cannot.
PRIMCACHE_API std::size_t save_tune_table(const std::string& path = {});

// Where a tuning stands after each candidate, for progress displays
// (`primcache tune`): the problem, candidates done of total, the default's
// time and the fastest correct time so far (before the noise rule).
struct tune_progress_event {
  std::string problem;
  std::size_t done = 0, total = 0;
  double default_ms = 0, best_ms = 0;
};
// Called on the tuning thread after each candidate; empty: none. What it
// throws is ignored. Replaces the previous listener.
PRIMCACHE_API void set_tune_progress_listener(std::function<void(const tune_progress_event&)> fn);

// What tuning did in this process.
struct tune_stats {
  std::uint64_t tuned = 0;              // primitives tuned
  std::uint64_t replaced = 0;           // of which a candidate beat the default
  std::uint64_t failed = 0;             // tunings that failed (reported, primitive untouched)
  std::uint64_t skipped = 0;            // tunable primitives with nothing to tune
  std::uint64_t wrong_candidates = 0;   // candidates discarded for wrong output
  std::uint64_t failed_candidates = 0;  // candidates that failed to build or run
  // Candidates that beat the default cold but were slower than it warm
  // (the tuner's confirmation, autotune/tuner.hpp): not installed.
  std::uint64_t rejected_candidates = 0;
  // Timed runs measured by the device (OpenCL profiling events: the kernels
  // alone) rather than by the host's clock (launch and wait included).
  std::uint64_t device_timed_runs = 0;
  double seconds = 0;  // time spent tuning
};
PRIMCACHE_API tune_stats get_tune_stats();

}  // namespace primcache
