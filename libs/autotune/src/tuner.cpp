#include "primcache/autotune/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <optional>
#include <utility>

#include "measurement_turn.hpp"
#include "primcache/autotune/cold_cache.hpp"
#include "primcache/base/error.hpp"

namespace primcache {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// (median - minimum) / minimum of one candidate's runs: its jitter as a
// share of its time.
double relative_spread(const candidate_report& c) {
  return c.min_ns > 0 ? (c.median_ns - c.min_ns) / c.min_ns : 0.0;
}

// What an exception says, for reports.
std::string what_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// One candidate's timed runs by the clock, and by the device where it
// gave a time for each of them (device.size() == clock.size() then).
struct run_times {
  std::vector<double> clock, device;
};

// "450 ns", "422.5 ns".
std::string ns_text(double ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, ns == std::floor(ns) ? "%.0f ns" : "%.1f ns", ns);
  return buf;
}

}  // namespace

tune_clock steady_tune_clock() {
  return [] {
    return static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::steady_clock::now().time_since_epoch())
                                         .count());
  };
}

std::string_view to_string(candidate_outcome o) noexcept {
  switch (o) {
    case candidate_outcome::measured: return "measured";
    case candidate_outcome::won: return "won";
    case candidate_outcome::wrong_output: return "wrong_output";
    case candidate_outcome::failed: return "failed";
    case candidate_outcome::pruned: return "pruned";
    case candidate_outcome::rejected: return "rejected";
  }
  return "unknown";
}

std::vector<std::string> tune_result::problems() const {
  std::vector<std::string> out;
  for (const candidate_report& c : candidates) {
    if (c.outcome != candidate_outcome::wrong_output && c.outcome != candidate_outcome::failed) {
      continue;
    }
    out.push_back("candidate " + std::to_string(c.index) +
                  (c.description.empty() ? "" : " " + c.description) + ": " +
                  (c.outcome == candidate_outcome::failed ? "failed: " : "wrong output: ") +
                  c.message);
  }
  return out;
}

tune_result tune(const tuning_callbacks& cb, const tune_options& opt) {
  if (cb.count == 0) throw error(status::invalid_arguments, "tune: there are no candidates");
  if (!cb.build || !cb.run) {
    throw error(status::invalid_arguments, "tune: the build and run callbacks are required");
  }
  if (opt.runs < 1) throw error(status::invalid_arguments, "tune: runs must be at least 1");
  if (opt.max_nconfigs == 0) {
    throw error(status::invalid_arguments, "tune: max_nconfigs must be at least 1");
  }
  if (opt.confirm && (opt.confirm_runs < 1 || opt.max_confirmations == 0)) {
    throw error(status::invalid_arguments,
                "tune: confirm_runs and max_confirmations must be at least 1");
  }
  if (opt.confirm && (opt.confirm_max_block < 1 || !(opt.confirm_block_ns >= 0))) {
    throw error(status::invalid_arguments,
                "tune: confirm_max_block must be at least 1 and confirm_block_ns not negative");
  }
  const tune_clock clock = opt.clock ? opt.clock : steady_tune_clock();
  // The default flusher uses the process's buffer (cold_cache.hpp):
  // nothing is allocated here after the process's first tuning.
  std::optional<cold_cache> flusher;
  std::function<void()> flush = opt.flush;
  if (!flush && opt.cold_cache) {
    flusher.emplace();
    flush = [&] { flusher->flush(); };
  }
  const std::int64_t started = clock();

  // Every flush and run of a measurement below happens inside a
  // measurement_turn (measurement_turn.hpp): tunings on other threads never
  // time meanwhile, and none of their flushes lands between this tuning's
  // flush and its run. Builds, output checks, releases and the progress
  // listener run outside it.
  using autotune_internal::measurement_turn;

  tune_result r;
  // One run of candidate i, appended to `into`: the clock's time always,
  // the device's when it gives one. Times of one comparison are taken by
  // one clock (tuner.hpp): a run without a device time clears *by_device,
  // and every run of that comparison is then compared by the clock's.
  auto timed_run = [&](std::size_t i, run_times& into, bool* by_device) {
    const std::int64_t t0 = clock();
    cb.run(i);
    const std::int64_t t1 = clock();
    into.clock.push_back(static_cast<double>(t1 - t0));
    std::optional<std::int64_t> d;
    if (cb.device_time) d = cb.device_time(i);
    if (d && *d < 0) {
      throw error(status::runtime_error,
                  "the device reported a negative time (" + std::to_string(*d) + " ns)");
    }
    if (d) {
      into.device.push_back(static_cast<double>(*d));
    } else {
      *by_device = false;
    }
  };
  auto describe = [&](std::size_t i) { return cb.describe ? cb.describe(i) : std::string(); };
  auto release = [&](std::size_t i) {
    if (cb.release) cb.release(i);
  };

  // Which candidates: the default, then the search's picks.
  std::vector<std::size_t> order{0};
  {
    std::vector<candidate_report> pruned;
    const search_keep keep = [&](std::size_t i) {
      if (opt.prune && opt.prune(i)) {
        candidate_report c;
        c.index = i;
        c.description = describe(i);
        c.outcome = candidate_outcome::pruned;
        pruned.push_back(std::move(c));
        return false;
      }
      return true;
    };
    const search_strategy search = opt.search ? opt.search : exhaustive_search();
    for (std::size_t i : search(cb.count, opt.max_nconfigs - 1, keep)) {
      if (i == 0 || i >= cb.count) continue;  // a strategy's mistake: never measured twice
      if (std::find(order.begin(), order.end(), i) != order.end()) continue;
      if (order.size() == opt.max_nconfigs) break;
      order.push_back(i);
    }
    r.pruned = pruned.size();
    r.candidates.reserve(order.size() + pruned.size());
    r.candidates.resize(order.size());
    for (auto& p : pruned) r.candidates.push_back(std::move(p));
  }

  // The cold measurement's runs, per slot, by both clocks; whether every
  // one of them had a device time (then the device's times are compared,
  // else the clock's, for every candidate).
  std::vector<run_times> cold(order.size());
  bool cold_by_device = static_cast<bool>(cb.device_time);
  // Candidate reports' times, minimums and medians from the clock in use
  // (measured or won candidates; a failed one keeps its runs, no minimum).
  auto settle = [&](std::size_t slot) {
    candidate_report& c = r.candidates[slot];
    const std::vector<double>& t = cold_by_device ? cold[slot].device : cold[slot].clock;
    c.times_ns = t;
    if (c.outcome == candidate_outcome::failed || t.empty()) return;
    c.min_ns = *std::min_element(t.begin(), t.end());
    c.median_ns = median_of(t);
  };
  auto settle_all = [&] {
    for (std::size_t slot = 0; slot < order.size(); ++slot) settle(slot);
  };
  for (std::size_t slot = 0; slot < order.size(); ++slot) {
    const std::size_t i = order[slot];
    candidate_report& c = r.candidates[slot];
    c.index = i;
    c.description = describe(i);
    std::string step = "build";
    try {
      cb.build(i);
      step = "run";
      {
        const measurement_turn turn;  // the candidate's runs, one turn
        for (int k = 0; k < opt.runs; ++k) {
          if (flush) flush();
          const bool was_by_device = cold_by_device;
          timed_run(i, cold[slot], &cold_by_device);
          if (was_by_device && !cold_by_device) settle_all();  // the earlier ones to the clock
        }
      }
      settle(slot);
      if (i != 0 && cb.compare) {
        step = "compare";
        output_check check = cb.compare(i);
        if (!check.ok) {
          c.outcome = candidate_outcome::wrong_output;
          c.message = check.detail.empty() ? "its output differs from the default's" : check.detail;
        }
      }
    } catch (...) {
      c.outcome = candidate_outcome::failed;
      c.message = step + ": " + what_of(std::current_exception());
      settle(slot);  // the runs it made, no minimum
    }
    try {
      release(i);
    } catch (...) {
      // A release that throws leaves the measurement as it was.
    }
    if (i == 0 && c.outcome == candidate_outcome::failed) {
      throw error(status::runtime_error, "tune: the default configuration" +
                                             (c.description.empty() ? "" : " " + c.description) +
                                             " failed to " + c.message);
    }
    if (c.outcome == candidate_outcome::wrong_output) ++r.wrong;
    if (c.outcome == candidate_outcome::failed) ++r.failed;
    if (c.outcome == candidate_outcome::measured) ++r.measured;
    if (opt.on_progress) {
      // The fastest so far by the clock in use (it may have changed).
      double best_ns = 0;
      for (std::size_t j = 0; j <= slot; ++j) {
        const candidate_report& m = r.candidates[j];
        if (m.outcome != candidate_outcome::measured) continue;
        if (best_ns == 0 || m.min_ns < best_ns) best_ns = m.min_ns;
      }
      try {
        opt.on_progress(tune_progress{slot + 1, order.size(), &c, r.candidates[0].min_ns, best_ns});
      } catch (...) {
        // A listener's failure is not the tuning's.
      }
    }
  }

  // The default again, after the others: a machine that sped up or slowed
  // down meanwhile (other processes, frequency) shows as drift between its
  // two measurements, and drift counts as noise.
  double drift_ns = 0;
  if (opt.remeasure_default && order.size() > 1) {
    const run_times first = cold[0];
    bool again_by_device = cold_by_device;
    bool ok = true;
    try {
      cb.build(0);
      const measurement_turn turn;
      for (int k = 0; k < opt.runs; ++k) {
        if (flush) flush();
        timed_run(0, cold[0], &again_by_device);
      }
    } catch (...) {
      ok = false;  // the first measurement stands alone
    }
    try {
      release(0);
    } catch (...) {
    }
    if (!ok) {
      cold[0] = first;
    } else {
      if (cold_by_device && !again_by_device) {
        cold_by_device = false;
        settle_all();
      }
      settle(0);
      const std::vector<double>& all = cold_by_device ? cold[0].device : cold[0].clock;
      const auto split = all.begin() + static_cast<std::ptrdiff_t>(first.clock.size());
      drift_ns =
          std::fabs(*std::min_element(split, all.end()) - *std::min_element(all.begin(), split));
    }
  }
  r.device_timed = cold_by_device;
  if (cold_by_device) {
    for (const run_times& t : cold) r.device_timed_runs += t.device.size();
  }

  // Runs per timed visit of the confirmation: about confirm_block_ns by
  // the default's cold minimum.
  const int block_runs = [&] {
    const double d = r.candidates[0].min_ns;
    if (d <= 0) return opt.confirm_max_block;
    const double n = std::ceil(opt.confirm_block_ns / d);
    return n >= opt.confirm_max_block ? opt.confirm_max_block : std::max(1, static_cast<int>(n));
  }();

  // Candidate i against the default, warm and interleaved (tuner.hpp).
  auto confirm_warm = [&](std::size_t i) {
    confirmation_report conf;
    conf.index = i;
    conf.block_runs = block_runs;
    bool candidate_tried = false;
    bool on_default = true;  // whose step is under way
    std::string step = "build";
    // Each visit's runs by both clocks: the device's are compared only if
    // the cold measurement was and every run here has one.
    std::vector<run_times> default_visits, candidate_visits;
    conf.device_timed = r.device_timed;
    try {
      cb.build(0);
      on_default = false;
      candidate_tried = true;
      cb.build(i);
      step = "run";
      // One turn for the whole interleaved comparison: both candidates'
      // visits under the same conditions.
      const measurement_turn turn;
      for (int k = 0; k < opt.confirm_runs; ++k) {
        for (const bool first : {true, false}) {
          on_default = (k % 2 == 0) == first;
          const std::size_t j = on_default ? 0 : i;
          cb.run(j);  // untimed: that candidate's own data into cache
          run_times& visit = (on_default ? default_visits : candidate_visits).emplace_back();
          for (int b = 0; b < block_runs; ++b) timed_run(j, visit, &conf.device_timed);
        }
      }
    } catch (...) {
      conf.message =
          (on_default ? "the default's " : "") + step + ": " + what_of(std::current_exception());
      (on_default ? conf.default_failed : conf.candidate_failed) = true;
    }
    // Released as after a measurement, whether or not its build went through.
    for (const std::size_t j : {i, std::size_t{0}}) {
      if (j == i && !candidate_tried) continue;
      try {
        release(j);
      } catch (...) {
        // As after a measurement: the figures stand.
      }
    }
    if (!conf.message.empty()) conf.device_timed = false;  // the visits made, by the clock
    // A visit's time: the mean of its block's runs (of those it made, when
    // a run threw).
    auto visit_times = [&](const std::vector<run_times>& visits) {
      std::vector<double> out;
      for (const run_times& v : visits) {
        const std::vector<double>& t = conf.device_timed ? v.device : v.clock;
        if (t.empty()) continue;
        double sum = 0;
        for (const double x : t) sum += x;
        out.push_back(sum / static_cast<double>(t.size()));
      }
      return out;
    };
    conf.default_times_ns = visit_times(default_visits);
    conf.candidate_times_ns = visit_times(candidate_visits);
    if (!conf.message.empty()) return conf;
    if (conf.device_timed) {
      r.device_timed_runs +=
          2 * static_cast<std::size_t>(opt.confirm_runs) * static_cast<std::size_t>(block_runs);
    }
    conf.default_min_ns =
        *std::min_element(conf.default_times_ns.begin(), conf.default_times_ns.end());
    conf.default_median_ns = median_of(conf.default_times_ns);
    conf.candidate_min_ns =
        *std::min_element(conf.candidate_times_ns.begin(), conf.candidate_times_ns.end());
    conf.candidate_median_ns = median_of(conf.candidate_times_ns);
    const double margin = opt.min_margin * conf.default_median_ns;
    if (conf.candidate_min_ns > conf.default_min_ns ||
        conf.candidate_median_ns > conf.default_median_ns) {
      conf.message = "slower than the default warm: minimum " + ns_text(conf.candidate_min_ns) +
                     " against " + ns_text(conf.default_min_ns) + ", median " +
                     ns_text(conf.candidate_median_ns) + " against " +
                     ns_text(conf.default_median_ns);
    } else if (conf.candidate_median_ns > conf.default_median_ns - margin) {
      conf.message = "not faster than the default warm by the margin: median " +
                     ns_text(conf.candidate_median_ns) + " against " +
                     ns_text(conf.default_median_ns) + " (margin " + ns_text(margin) + ")";
    } else {
      conf.passed = true;
    }
    return conf;
  };

  // The contenders: faster than the default by more than the noise,
  // fastest first.
  const candidate_report& def = r.candidates[0];
  r.default_ns = def.min_ns;
  r.winner_ns = def.min_ns;
  struct contender {
    std::size_t slot;
    double noise;
  };
  std::vector<contender> contenders;
  for (std::size_t slot = 1; slot < order.size(); ++slot) {
    const candidate_report& c = r.candidates[slot];
    if (c.outcome != candidate_outcome::measured) continue;
    // Each spread relative to its own minimum (tuner.hpp): a default whose
    // runs spread by more than a far faster candidate's whole time (a
    // preempted run on a loaded machine) must not hide that candidate.
    const double noise = std::max({relative_spread(def), relative_spread(c), opt.min_margin,
                                   def.min_ns > 0 ? drift_ns / def.min_ns : 0.0});
    if (c.min_ns * (1 + noise) < def.min_ns) contenders.push_back({slot, noise * def.min_ns});
  }
  std::stable_sort(contenders.begin(), contenders.end(),
                   [&](const contender& a, const contender& b) {
                     return r.candidates[a.slot].min_ns < r.candidates[b.slot].min_ns;
                   });

  // The winner: the fastest contender, confirmed warm against the default
  // when opt.confirm (a rejected one gives way to the next).
  std::size_t best_slot = 0;
  for (const contender& k : contenders) {
    candidate_report& c = r.candidates[k.slot];
    if (opt.confirm) {
      if (r.confirmations.size() == opt.max_confirmations) break;
      r.confirmations.push_back(confirm_warm(c.index));
      const confirmation_report& conf = r.confirmations.back();
      r.warm_default_ns = conf.default_min_ns;
      r.warm_winner_ns = conf.candidate_min_ns;
      if (!conf.passed) {
        if (conf.default_failed) break;  // nothing to compare against
        if (conf.candidate_failed) {
          c.outcome = candidate_outcome::failed;
          c.message = "confirmation: " + conf.message;
          --r.measured;
          ++r.failed;
        } else {
          c.outcome = candidate_outcome::rejected;
          c.message = conf.message;
          ++r.rejected;
        }
        continue;
      }
    }
    best_slot = k.slot;
    r.winner_ns = c.min_ns;
    r.noise_ns = k.noise;
    break;
  }
  r.winner = r.candidates[best_slot].index;
  r.candidates[best_slot].outcome = candidate_outcome::won;
  r.drift_ns = drift_ns;
  r.tuning_ns = static_cast<double>(clock() - started);
  return r;
}

}  // namespace primcache
