// services/primcached/runner.hpp — runs a workload on N threads: each thread
// picks entries by weight, creates them through the primitive cache (again,
// with the entry's recreate probability) and executes them, until stopped.
// A graph entry is run whole by its executor (shared by the threads) on the
// thread's own inputs, made once per thread from the graph's "init"s.
//
//   primcache::primcached::workload_runner r(w, 4);
//   r.start();
//   ...
//   primcache::primcached::interval_stats s = r.take_interval();  // since the last call
//   r.stop();   // in-flight creations and executions finish first
//   for (const primcache::primcached::entry_outcome& o : r.outcomes()) ...  // since start
//
// Creation time is measured around the primitive descriptor and the
// primitive's construction (what a user of the API waits for), per creation.
// Each thread keeps at most max_samples_per_thread of them between two
// take_interval calls, a uniform sample (reservoir) of its creations: a
// workload that recreates on every pick (a cache hit takes microseconds)
// would otherwise grow them by megabytes a second until the next call.
//
// Each entry's runs (a primitive's pick: its creation when due, and its
// execution; a graph's whole run) are counted per entry too, succeeded and
// failed, over the whole run (outcomes()): so the daemon can tell an entry
// that failed now and then from one that never worked.
//
// Thread-safety: start, stop, take_interval and outcomes are called from
// one controlling thread (outcomes while the threads run gives counts that
// are moments apart, exact after stop). Exceptions: start throws
// std::system_error when a thread cannot be started; failures inside the
// loop are counted and the first of each entry is printed on stderr, and
// the loop goes on.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "workload.hpp"

namespace primcache::primcached {

struct interval_stats {
  std::uint64_t executions = 0;  // primitive executions
  std::uint64_t graph_runs = 0;  // graph entries run
  std::uint64_t creations = 0;
  std::uint64_t failures = 0;
  // One sample per creation, unordered; at most max_samples_per_thread of
  // each thread's (then a uniform sample of them).
  std::vector<double> creation_ms;
};

// One workload entry's runs since start, on every thread.
struct entry_outcome {
  std::string label;  // "primitives[2] (relu)", "graphs[0] (mlp)"
  std::uint64_t succeeded = 0;
  std::uint64_t failed = 0;
  // Ran, and failed every time: an entry that was never picked has not failed.
  bool never_succeeded() const { return failed > 0 && succeeded == 0; }
};

// Offers `v` to `samples`, kept a uniform sample (a reservoir) of at most
// `cap` of the values offered so far; `seen` counts them, this one included.
void offer_sample(std::vector<double>& samples, std::uint64_t& seen, std::size_t cap, double v,
                  std::mt19937_64& rng);

class workload_runner {
 public:
  static constexpr std::size_t default_max_samples_per_thread = 1 << 16;

  workload_runner(const workload& w, int threads, std::uint64_t seed = 0x5eed,
                  std::size_t max_samples_per_thread = default_max_samples_per_thread);
  ~workload_runner();
  workload_runner(const workload_runner&) = delete;
  workload_runner& operator=(const workload_runner&) = delete;

  void start();
  // Asks the threads to stop after their current step, and joins them.
  void stop();
  interval_stats take_interval();
  // Primitives in the workload's order, then graphs.
  std::vector<entry_outcome> outcomes() const;

 private:
  struct entry_tally {
    std::atomic<std::uint64_t> succeeded{0};
    std::atomic<std::uint64_t> failed{0};
  };
  struct alignas(64) thread_state {
    explicit thread_state(std::size_t entries) : tallies(entries) {}
    // Written by the thread only, read by the controller: never resized.
    std::vector<entry_tally> tallies;  // primitives, then graphs
    std::atomic<std::uint64_t> executions{0};
    std::atomic<std::uint64_t> graph_runs{0};
    std::atomic<std::uint64_t> creations{0};
    std::atomic<std::uint64_t> failures{0};
    std::mutex mu;
    std::vector<double> creation_ms;   // guarded by mu
    std::uint64_t samples_seen = 0;    // guarded by mu: creations since the last take
    std::mt19937_64 sample_rng{0x5a};  // guarded by mu: which samples are kept
    std::uint64_t seen_executions = 0, seen_graph_runs = 0, seen_creations = 0,
                  seen_failures = 0;  // controller's
  };

  void run(int index) noexcept;
  // Counts a failed run of `entry` on `state`'s thread; prints the entry's
  // first failure.
  void count_failure(thread_state& state, std::size_t entry, const std::exception& e) noexcept;

  const workload workload_;
  const int thread_count_;
  const std::uint64_t seed_;
  const std::size_t max_samples_;
  // "primitives[i] (name)", then "graphs[i] (name)": made once, so that
  // printing a failure allocates nothing.
  const std::vector<std::string> labels_;
  std::vector<std::unique_ptr<thread_state>> states_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::mutex report_mu_;
  std::vector<bool> reported_;  // guarded by report_mu_: a failure already printed
                                // (primitives, then graphs)
};

// Memories for every argument the descriptor resolved (src, weights, bias,
// dst, and each binary post-op's operand), zero-filled through
// map_data/unmap_data, so device (GPU) memories are zeroed too. Throws
// primcache::error as memory creation and mapping do.
primitive::args make_zeroed_args(const primitive_spec& spec, const primitive_desc& pd);

// The value at quantile q in [0, 1] of the samples (nearest rank); 0 when
// there is none. Reorders the samples.
double quantile(std::vector<double>& samples, double q);

}  // namespace primcache::primcached
