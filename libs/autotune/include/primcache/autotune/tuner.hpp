// primcache/autotune/tuner.hpp — measuring candidate configurations of one
// problem and picking a winner that is never slower and never wrong.
//
// The caller describes the candidates through callbacks; candidate 0 is the
// default configuration (the heuristic's), always measured, first:
//
//   primcache::tuning_callbacks cb;
//   cb.count = configs.size();                        // the default included
//   cb.build = [&](std::size_t i) { impls[i] = build(configs[i]); };
//   cb.run = [&](std::size_t i) { impls[i]->execute(i == 0 ? ref_out : out); };
//   cb.compare = [&](std::size_t i) {
//     return primcache::compare_outputs(ref_out, out, tolerance);
//   };
//   cb.release = [&](std::size_t i) { impls[i].reset(); };
//   cb.describe = [&](std::size_t i) { return configs[i].to_json(); };
//   primcache::tune_result r = primcache::tune(cb);   // options: tune_options
//   if (r.default_replaced()) install(configs[r.winner]);
//
// The procedure, for each candidate the search picks (at most
// max_nconfigs, the default included): build it; run it `runs` times, each
// run preceded by a cold-cache flush (untimed) and timed alone by the clock
// and, when the device_time callback gives one, by the device's own time
// for that run (OpenCL profiling events: the kernels alone, without the
// launch and the wait); keep the minimum and the median; compare its output (after its last run)
// with the default's (only through the compare callback: without one no
// output is checked at all, see tuning_callbacks); release it. A candidate
// whose build, run or compare throws is reported (failed) and skipped; one
// whose output differs is reported (wrong_output) and can never win.
//
// One clock per comparison: the device's times are compared only when
// every timed run of the cold measurement (every candidate's, the
// default's second measurement included) had one; if any run lacks one,
// every candidate's times are the clock's (launch to wait), so a default
// the device could not time never stands against a candidate's kernels
// alone (tune_result::device_timed says which). Each warm confirmation
// decides the same way for its own runs, and uses the device's times only
// when the cold measurement did (confirmation_report::device_timed).
//
// Then the default is measured once more (remeasure_default), its runs
// joining the first ones.
//
// The winner: the default stands unless a correct candidate is faster than
// it by more than the noise, as a share of each one's time:
//   candidate_min * (1 + noise) < default_min, where
//   noise = max(spread(default), spread(candidate), min_margin,
//               drift / default_min)
//   spread = (median - minimum) / minimum of one candidate's runs,
//   drift = |minimum of the default's first runs - of its second runs|,
// and among the candidates that clear it the fastest wins. A candidate
// within the noise never replaces the default, so tuning cannot pick a
// regression that measurement jitter made look like a gain. Each spread
// is relative to its own time so that jitter scales with what it
// disturbs: a slow default with one preempted run (a spread larger than a
// candidate 40 times as fast takes in all) does not hide that candidate,
// as an absolute noise would.
//
// The confirmation (confirm, on by default): a cold measurement is not
// what a loop that runs a primitive again and again sees (a small tile
// that wins with its operands in memory can lose with them in cache), so
// before the winner replaces the default both are built again, at once,
// and measured warm, the way such a loop runs them: confirm_runs rounds,
// default and candidate alternating which goes first, each visit an
// untimed run (it brings that candidate's own data into cache) and then a
// block of back-to-back timed runs whose mean is the visit's time. A block
// lasts about confirm_block_ns by the default's cold minimum (at least one
// run, at most confirm_max_block), so short kernels are timed over many
// runs, as a benchmark loop times them, and long ones once. The candidate
// passes when its warm minimum is not above the default's and its warm
// median is below the default's by more than min_margin of it: a winner
// that is only as fast as the default warm (within the margin) gains
// nothing a user could measure and may lose in another loop, so the
// default stands. One that does not pass is rejected (outcome rejected,
// not installed) and the next fastest that cleared the noise is confirmed
// in its place, max_confirmations in all; when none passes, the default
// stands. A build or run that throws during the confirmation fails that
// candidate (the default's: nothing more is confirmed). When the
// candidates were measured warm as well (cold_cache off and no flush) the
// confirmation is a second warm measurement, interleaved.
//
// Callbacks: during the confirmation the default and one candidate are
// built at once (build(0), build(i), runs of both, release(i), release(0));
// run(i) must run candidate i. Elsewhere one candidate is built at a time.
//
// Thread-safety: tune() keeps no state between calls; any number of
// threads may tune different problems at once (the callbacks must allow
// what they share). They take turns measuring: one measurement — a
// candidate's flushes and timed runs, the default's second measurement, a
// whole warm confirmation — holds the process's measuring turn, so no two
// tunings time at once and no other tuning's flush or run lands between a
// flush and the run it precedes; builds, compare, release, describe, prune
// and on_progress run outside it, at once with others' measurements. A
// tuning inside a run or flush callback on the same thread measures within
// its caller's turn; a run or flush that waits for another thread's tuning
// deadlocks. A fork() child never waits for a turn a parent's thread held.
// The turn serialises only tunings: other work in the process (the user's
// threads, another tuning's builds) still runs beside a measurement. The
// default flusher writes the process's one flush buffer, allocated by the
// first tuning that flushes (cold_cache.hpp).
// Exceptions: tune throws primcache::error (runtime_error) when the
// default itself cannot be built, run, or measured (nothing to compare
// against), with its message; invalid_arguments for count 0, runs < 1 or
// max_nconfigs 0, and with confirm for confirm_runs < 1, max_confirmations
// 0, confirm_max_block < 1 or a negative confirm_block_ns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/autotune/output_check.hpp"
#include "primcache/autotune/search.hpp"
#include "primcache/base/export.hpp"

namespace primcache {

// Monotonic nanoseconds. Tests inject a clock their run callback advances.
using tune_clock = std::function<std::int64_t()>;
PRIMCACHE_API tune_clock steady_tune_clock();

struct tuning_callbacks {
  std::size_t count = 0;                   // candidates, the default (0) included
  std::function<void(std::size_t)> build;  // required
  std::function<void(std::size_t)> run;    // required; one execution
  // Candidate i's output (after its last run) against the default's.
  //
  // OPTIONAL, AND WITHOUT IT NOTHING IS CHECKED: when compare is empty,
  // no candidate's output is looked at, a candidate that computes garbage
  // (skips a tail, drops a term, writes nothing) is timed like any other
  // and can win, and tune_result::wrong stays 0. Only a caller that checks
  // correctness some other way (every candidate verified beforehand, or a
  // test of the timing rules alone) may leave it out; tune mode in the
  // runtime always sets it.
  std::function<output_check(std::size_t)> compare;
  std::function<void(std::size_t)> release;          // optional
  std::function<std::string(std::size_t)> describe;  // optional, for reports
  // Optional: called after each timed run of candidate i, the time the
  // device measured for that run in nanoseconds; nullopt (or no callback):
  // that run has no device time, and the comparison it belongs to is made
  // by the clock for every candidate (above). A throw fails the candidate
  // like a run's.
  std::function<std::optional<std::int64_t>(std::size_t)> device_time;
};

struct candidate_report;

// Where a tuning stands after each candidate (tune_options::on_progress).
struct tune_progress {
  std::size_t done = 0;                    // candidates finished (measured, rejected or failed)
  std::size_t total = 0;                   // candidates that will be tried, the default included
  const candidate_report* last = nullptr;  // the one just finished; valid during the call
  double default_ns = 0;                   // the default's minimum (0 before it is measured)
  double best_ns = 0;  // the fastest correct minimum so far, before the noise rule
};

struct tune_options {
  std::size_t max_nconfigs = 40;  // candidates measured at most, the default included
  int runs = 5;                   // timed runs per candidate; the minimum counts
  double min_margin = 0.01;       // the least relative gain that may replace the default
  // Measure the default again after the others (its times join the first
  // ones; the difference of the two minimums is drift, which counts as noise).
  bool remeasure_default = true;
  tune_clock clock;  // empty: steady_tune_clock()
  // Called before every timed run, untimed. Empty: a cold_cache flush
  // (cold_cache.hpp) when cold_cache is true, nothing when false.
  std::function<void()> flush;
  bool cold_cache = true;
  search_strategy search;  // empty: exhaustive_search()
  prune_hook prune;        // empty: nothing pruned
  // Called on the tuning thread after each candidate (a progress bar);
  // what it throws is ignored.
  std::function<void(const tune_progress&)> on_progress;
  // Confirm the winner against the default warm before it replaces it
  // (see above): timed runs of each, and how many candidates may be
  // confirmed before the default stands.
  bool confirm = true;
  int confirm_runs = 10;
  std::size_t max_confirmations = 3;
  // How long one timed visit of the confirmation runs its candidate back
  // to back (by the default's cold minimum), and the most runs it may take.
  double confirm_block_ns = 2'000'000;
  int confirm_max_block = 64;
};

enum class candidate_outcome {
  measured,      // correct, ran, did not win
  won,           // the winner (the default when nothing beat it)
  wrong_output,  // its output differed from the default's: discarded
  failed,        // build, run or compare threw (or its confirmation's build or run): discarded
  pruned,        // dropped by the pruning hook before it was built
  rejected,      // beat the default cold, was slower than it warm (the confirmation): not installed
};
PRIMCACHE_API std::string_view to_string(candidate_outcome o) noexcept;

struct candidate_report {
  std::size_t index = 0;
  std::string description;
  candidate_outcome outcome = candidate_outcome::measured;
  std::vector<double> times_ns;  // every timed run, in order
  double min_ns = 0;
  double median_ns = 0;
  std::string message;  // why it was discarded; empty otherwise
};

// One warm confirmation of a candidate against the default.
struct confirmation_report {
  std::size_t index = 0;  // the candidate confirmed
  bool passed = false;    // faster warm by the margin: it may replace the default
  int block_runs = 1;     // timed runs per visit
  // Each visit's mean time per run, in order.
  std::vector<double> default_times_ns, candidate_times_ns;
  double default_min_ns = 0, default_median_ns = 0;
  double candidate_min_ns = 0, candidate_median_ns = 0;
  std::string message;  // why it did not pass; empty when it did
  // A build or run threw during the confirmation: the default's, or the
  // candidate's (then it is failed, not rejected).
  bool default_failed = false, candidate_failed = false;
  // The times above are the device's (every run of this confirmation and
  // of the cold measurement had one), else the clock's.
  bool device_timed = false;
};

struct PRIMCACHE_API tune_result {
  std::size_t winner = 0;  // index of the winner; 0: the default stands
  double default_ns = 0;   // the default's minimum
  double winner_ns = 0;    // the winner's minimum
  double noise_ns = 0;     // the noise the winner cleared, in ns of the default (0: it stood)
  double drift_ns = 0;     // |first - second minimum| of the default (remeasure_default)
  // The last confirmation's warm minimums (the winner's when one passed):
  // the default's and the candidate's; 0 when nothing was confirmed.
  double warm_default_ns = 0, warm_winner_ns = 0;
  std::vector<confirmation_report> confirmations;  // in the order they ran
  std::size_t rejected = 0;                        // candidates the confirmation rejected
  // measured: correct and timed (the rejected included; a candidate whose
  // confirmation threw counts as failed instead).
  std::size_t measured = 0, wrong = 0, failed = 0, pruned = 0;
  // The cold measurement was compared by the device's times (every run had
  // one), else by the clock's.
  bool device_timed = false;
  // Runs whose device time was compared: the cold measurement's when
  // device_timed, plus each confirmation's that was device_timed.
  std::size_t device_timed_runs = 0;
  double tuning_ns = 0;                      // the whole tuning, by the clock (builds included)
  std::vector<candidate_report> candidates;  // the default first, then in measurement order
  bool default_replaced() const noexcept { return winner != 0; }
  // One line per discarded candidate: "candidate 3 {...}: wrong output: element 7: ...".
  std::vector<std::string> problems() const;
};

PRIMCACHE_API tune_result tune(const tuning_callbacks& callbacks, const tune_options& options = {});

}  // namespace primcache
