#include "primcache/autotune/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <optional>

#include "primcache/autotune/cold_cache.hpp"
#include "primcache/base/error.hpp"

namespace primcache {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
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
  const tune_clock clock = opt.clock ? opt.clock : steady_tune_clock();
  std::optional<cold_cache> flusher;
  std::function<void()> flush = opt.flush;
  if (!flush && opt.cold_cache) {
    flusher.emplace();
    flush = [&] { flusher->flush(); };
  }
  const std::int64_t started = clock();

  tune_result r;
  // One run of candidate i, timed by the device when it can say, else by
  // the clock.
  auto timed_run = [&](std::size_t i) {
    const std::int64_t t0 = clock();
    cb.run(i);
    const std::int64_t t1 = clock();
    if (cb.device_time) {
      if (const std::optional<std::int64_t> d = cb.device_time(i)) {
        if (*d < 0) {
          throw error(status::runtime_error,
                      "the device reported a negative time (" + std::to_string(*d) + " ns)");
        }
        ++r.device_timed_runs;
        return static_cast<double>(*d);
      }
    }
    return static_cast<double>(t1 - t0);
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

  double best_ns = 0;
  for (std::size_t slot = 0; slot < order.size(); ++slot) {
    const std::size_t i = order[slot];
    candidate_report& c = r.candidates[slot];
    c.index = i;
    c.description = describe(i);
    std::string step = "build";
    try {
      cb.build(i);
      step = "run";
      for (int k = 0; k < opt.runs; ++k) {
        if (flush) flush();
        c.times_ns.push_back(timed_run(i));
      }
      c.min_ns = *std::min_element(c.times_ns.begin(), c.times_ns.end());
      c.median_ns = median_of(c.times_ns);
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
    if (c.outcome == candidate_outcome::measured) {
      ++r.measured;
      if (best_ns == 0 || c.min_ns < best_ns) best_ns = c.min_ns;
    }
    if (opt.on_progress) {
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
    std::vector<double> again;
    try {
      cb.build(0);
      for (int k = 0; k < opt.runs; ++k) {
        if (flush) flush();
        again.push_back(timed_run(0));
      }
    } catch (...) {
      again.clear();  // the first measurement stands alone
    }
    try {
      release(0);
    } catch (...) {
    }
    if (!again.empty()) {
      candidate_report& d = r.candidates[0];
      drift_ns = std::fabs(*std::min_element(again.begin(), again.end()) - d.min_ns);
      d.times_ns.insert(d.times_ns.end(), again.begin(), again.end());
      d.min_ns = *std::min_element(d.times_ns.begin(), d.times_ns.end());
      d.median_ns = median_of(d.times_ns);
    }
  }

  // The winner: faster than the default by more than the noise; the fastest such.
  const candidate_report& def = r.candidates[0];
  r.default_ns = def.min_ns;
  r.winner_ns = def.min_ns;
  std::size_t best_slot = 0;
  for (std::size_t slot = 1; slot < order.size(); ++slot) {
    const candidate_report& c = r.candidates[slot];
    if (c.outcome != candidate_outcome::measured) continue;
    const double noise = std::max({def.median_ns - def.min_ns, c.median_ns - c.min_ns,
                                   opt.min_margin * def.min_ns, drift_ns});
    if (c.min_ns < def.min_ns - noise && c.min_ns < r.winner_ns) {
      best_slot = slot;
      r.winner_ns = c.min_ns;
      r.noise_ns = noise;
    }
  }
  r.winner = r.candidates[best_slot].index;
  r.candidates[best_slot].outcome = candidate_outcome::won;
  r.drift_ns = drift_ns;
  r.tuning_ns = static_cast<double>(clock() - started);
  return r;
}

}  // namespace primcache
