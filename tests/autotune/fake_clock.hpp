// A clock the tests advance by hand: candidates "run" for preset times.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "primcache/autotune/tuner.hpp"

namespace primcache::autotune_test {

class fake_clock {
 public:
  tune_clock clock() {
    return [this] { return now_.load(std::memory_order_relaxed); };
  }
  void advance(std::int64_t ns) { now_.fetch_add(ns, std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> now_{1'000'000};
};

// Candidate i's k-th run takes times[i][k % size] ns; counts what ran.
// A run that no flush() preceded (a warm run) takes warm_times[i] instead,
// when warm_times has candidate i; flusher() is the flush that says so.
struct scripted_candidates {
  fake_clock& clk;
  std::vector<std::vector<std::int64_t>> times;
  std::vector<int> built, runs, released, compared;
  std::map<std::size_t, bool> wrong;        // candidate -> its output differs
  std::map<std::size_t, bool> fails_build;  // candidate -> build throws
  std::map<std::size_t, std::vector<std::int64_t>> warm_times;
  std::map<std::size_t, int> warm_runs;           // runs that took warm_times
  std::vector<std::pair<std::size_t, bool>> log;  // every run: candidate, after a flush
  bool flushed = false;                           // the next run follows a flush

  scripted_candidates(fake_clock& c, std::vector<std::vector<std::int64_t>> t)
      : clk(c),
        times(std::move(t)),
        built(times.size()),
        runs(times.size()),
        released(times.size()),
        compared(times.size()) {}

  tuning_callbacks callbacks() {
    tuning_callbacks cb;
    cb.count = times.size();
    cb.build = [this](std::size_t i) {
      ++built[i];
      if (fails_build.count(i)) throw std::runtime_error("cannot build candidate");
    };
    cb.run = [this](std::size_t i) {
      const bool cold = flushed;
      flushed = false;
      log.emplace_back(i, cold);
      if (auto w = warm_times.find(i); !cold && w != warm_times.end()) {
        clk.advance(w->second[static_cast<std::size_t>(warm_runs[i]++) % w->second.size()]);
      } else {
        const auto& t = times[i];
        clk.advance(t[static_cast<std::size_t>(runs[i]) % t.size()]);
      }
      ++runs[i];
    };
    cb.compare = [this](std::size_t i) {
      ++compared[i];
      output_check c;
      if (wrong.count(i)) {
        c.ok = false;
        c.detail = "element 3: 7 vs the default's 5";
      }
      return c;
    };
    cb.release = [this](std::size_t i) { ++released[i]; };
    cb.describe = [](std::size_t i) { return "{\"c\":" + std::to_string(i) + "}"; };
    return cb;
  }
  std::function<void()> flusher() {
    return [this] { flushed = true; };
  }
};

inline tune_options fake_options(fake_clock& clk) {
  tune_options o;
  o.clock = clk.clock();
  o.cold_cache = false;
  // One timed run per visit of the warm confirmation, so that the scripts
  // count runs simply (the blocks have their own test).
  o.confirm_block_ns = 0;
  return o;
}

}  // namespace primcache::autotune_test
