#include "runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>

#include "primcache/graph/graph_json.hpp"

namespace primcache::primcached {

namespace {

struct entry_slot {
  primitive prim;
  primitive::args args;
};

// Zero-filled through a host mapping: on a GPU engine the data handle is the
// device buffer, not host memory.
memory zeroed(const memory::desc& md, const engine& eng) {
  memory m(md, eng);
  if (md.size_bytes() == 0) return m;
  void* p = m.map_data();
  std::memset(p, 0, md.size_bytes());
  m.unmap_data(p);
  return m;
}

std::vector<std::string> entry_labels(const workload& w) {
  std::vector<std::string> labels;
  for (std::size_t i = 0; i < w.primitives.size(); ++i) {
    labels.push_back("primitives[" + std::to_string(i) + "] (" + w.primitives[i].name + ")");
  }
  for (std::size_t i = 0; i < w.graphs.size(); ++i) {
    labels.push_back("graphs[" + std::to_string(i) + "] (" + w.graphs[i].name + ")");
  }
  return labels;
}

}  // namespace

primitive::args make_zeroed_args(const primitive_spec& spec, const primitive_desc& pd) {
  const engine& eng = pd.get_engine();
  primitive::args args;
  for (int arg :
       {PRIMCACHE_ARG_SRC, PRIMCACHE_ARG_WEIGHTS, PRIMCACHE_ARG_BIAS, PRIMCACHE_ARG_DST}) {
    const memory::desc md = pd.query_md(arg);
    if (md.size_bytes() != 0) args.emplace(arg, zeroed(md, eng));
  }
  for (std::size_t i = 0; i < spec.post_ops.size(); ++i) {
    if (!spec.post_ops[i].binary) continue;
    args.emplace(PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | PRIMCACHE_ARG_SRC_1,
                 zeroed(spec.post_ops[i].src1.desc(), eng));
  }
  return args;
}

void offer_sample(std::vector<double>& samples, std::uint64_t& seen, std::size_t cap, double v,
                  std::mt19937_64& rng) {
  ++seen;
  if (samples.size() < cap) {
    samples.push_back(v);
  } else if (const std::uint64_t j = rng() % seen; j < cap) {
    samples[j] = v;
  }
}

workload_runner::workload_runner(const workload& w, int threads, std::uint64_t seed,
                                 std::size_t max_samples_per_thread)
    : workload_(w),
      thread_count_(threads),
      seed_(seed),
      max_samples_(max_samples_per_thread),
      labels_(entry_labels(w)),
      reported_(labels_.size(), false) {
  for (int i = 0; i < thread_count_; ++i) {
    states_.push_back(std::make_unique<thread_state>(labels_.size()));
  }
}

workload_runner::~workload_runner() {
  stop();
}

void workload_runner::start() {
  stop_.store(false);
  for (int i = 0; i < thread_count_; ++i) threads_.emplace_back([this, i] { run(i); });
}

void workload_runner::stop() {
  stop_.store(true);
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

interval_stats workload_runner::take_interval() {
  interval_stats out;
  for (const std::unique_ptr<thread_state>& s : states_) {
    const std::uint64_t e = s->executions.load(std::memory_order_relaxed);
    const std::uint64_t g = s->graph_runs.load(std::memory_order_relaxed);
    const std::uint64_t c = s->creations.load(std::memory_order_relaxed);
    const std::uint64_t f = s->failures.load(std::memory_order_relaxed);
    out.executions += e - s->seen_executions;
    out.graph_runs += g - s->seen_graph_runs;
    out.creations += c - s->seen_creations;
    out.failures += f - s->seen_failures;
    s->seen_executions = e;
    s->seen_graph_runs = g;
    s->seen_creations = c;
    s->seen_failures = f;
    std::vector<double> samples;
    {
      std::lock_guard lock(s->mu);
      samples.swap(s->creation_ms);
      s->samples_seen = 0;
    }
    out.creation_ms.insert(out.creation_ms.end(), samples.begin(), samples.end());
  }
  return out;
}

std::vector<entry_outcome> workload_runner::outcomes() const {
  std::vector<entry_outcome> out(labels_.size());
  for (std::size_t i = 0; i < labels_.size(); ++i) out[i].label = labels_[i];
  for (const std::unique_ptr<thread_state>& s : states_) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i].succeeded += s->tallies[i].succeeded.load(std::memory_order_relaxed);
      out[i].failed += s->tallies[i].failed.load(std::memory_order_relaxed);
    }
  }
  return out;
}

void workload_runner::count_failure(thread_state& state, std::size_t entry,
                                    const std::exception& e) noexcept {
  state.failures.fetch_add(1, std::memory_order_relaxed);
  state.tallies[entry].failed.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(report_mu_);
  if (reported_[entry]) return;
  reported_[entry] = true;
  std::fprintf(stderr, "primcached: %s failed: %s (counted; not repeated)\n",
               labels_[entry].c_str(), e.what());
}

void workload_runner::run(int index) noexcept {
  thread_state& state = *states_[static_cast<std::size_t>(index)];
  const std::vector<primitive_spec>& specs = workload_.primitives;
  const std::vector<graph_entry>& graphs = workload_.graphs;
  std::vector<double> weights;
  for (const primitive_spec& s : specs) weights.push_back(s.weight);
  for (const graph_entry& g : graphs) weights.push_back(g.weight);
  // This thread's inputs of each graph, made at its first pick.
  std::vector<std::optional<executor::tensor_map>> graph_inputs(graphs.size());
  std::mt19937_64 rng(seed_ + static_cast<std::uint64_t>(index) * 0x9e3779b97f4a7c15ull);
  std::discrete_distribution<std::size_t> pick(weights.begin(), weights.end());
  std::uniform_real_distribution<double> coin(0.0, 1.0);

  std::vector<entry_slot> slots(specs.size());
  std::optional<engine> cpu;
  std::optional<stream> cpu_stream;
  std::optional<engine> gpu;
  std::optional<stream> gpu_stream;
  // Engines were built when the workload was validated; these cannot fail
  // for a kind that is in use. If one does, it is counted against the entry
  // that needed it, and this thread runs nothing.
  std::size_t needing = 0;
  try {
    for (; needing < specs.size(); ++needing) {
      const primitive_spec& s = specs[needing];
      if (s.engine == engine_kind::cpu && !cpu) {
        cpu.emplace(engine_kind::cpu, 0);
        cpu_stream.emplace(*cpu);
      } else if (s.engine == engine_kind::gpu && !gpu) {
        gpu.emplace(engine_kind::gpu, 0);
        gpu_stream.emplace(*gpu);
      }
    }
  } catch (const std::exception& e) {
    count_failure(state, needing, e);
    return;
  }

  while (!stop_.load(std::memory_order_relaxed)) {
    const std::size_t i = pick(rng);
    if (i >= specs.size()) {
      const std::size_t gi = i - specs.size();
      try {
        if (!graph_inputs[gi]) graph_inputs[gi] = make_inputs(*graphs[gi].graph);
        (void)graphs[gi].exec->run(*graph_inputs[gi]);
        state.graph_runs.fetch_add(1, std::memory_order_relaxed);
        state.tallies[i].succeeded.fetch_add(1, std::memory_order_relaxed);
      } catch (const std::exception& e) {
        count_failure(state, i, e);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      continue;
    }
    const primitive_spec& spec = specs[i];
    entry_slot& slot = slots[i];
    const engine& eng = spec.engine == engine_kind::cpu ? *cpu : *gpu;
    const stream& strm = spec.engine == engine_kind::cpu ? *cpu_stream : *gpu_stream;
    try {
      if (!slot.prim || (spec.recreate > 0 && coin(rng) < spec.recreate)) {
        const auto t0 = std::chrono::steady_clock::now();
        const primitive_desc pd = make_primitive_desc(spec, eng);
        primitive p = make_primitive(pd);
        const auto t1 = std::chrono::steady_clock::now();
        {
          const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
          std::lock_guard lock(state.mu);
          offer_sample(state.creation_ms, state.samples_seen, max_samples_, ms, state.sample_rng);
        }
        state.creations.fetch_add(1, std::memory_order_relaxed);
        if (slot.args.empty()) slot.args = make_zeroed_args(spec, pd);
        slot.prim = std::move(p);
      }
      slot.prim.execute(strm, slot.args);
      state.executions.fetch_add(1, std::memory_order_relaxed);
      state.tallies[i].succeeded.fetch_add(1, std::memory_order_relaxed);
    } catch (const std::exception& e) {
      count_failure(state, i, e);
      // Do not spin on an entry that fails at once every time.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

double quantile(std::vector<double>& samples, double q) {
  if (samples.empty()) return 0;
  const std::size_t n = samples.size();
  std::size_t rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
  rank = std::clamp<std::size_t>(rank, 1, n) - 1;
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(rank),
                   samples.end());
  return samples[rank];
}

}  // namespace primcache::primcached
