// bench_tune: the CPU matmul with its default (heuristic) configuration
// against the configuration tune mode chose for it, on the runtime issue's
// matmul shapes, through the public API.
//
// For each shape: the default primitive is created with tuning off and an
// empty tune table; then a tunable primitive's first execution tunes it
// (its wall time is the tuning time, reported as BM_TuneTime/<shape>);
// then the tuned primitive is created with tuning off (its descriptor takes
// the table's winner). The measured benchmarks are registered interleaved —
// default and tuned alternating, repetition by repetition — so the machine's
// drift falls on both alike; the summary after the run gives each shape's
// median of the repetitions and tuned/default speed-up.
//
//   bench_tune [--reps=N] [google benchmark flags]
//   PRIMCACHE_JIT_MODE is set to sync: both primitives run specialized code.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/tuning.hpp"

namespace pc = primcache;

namespace {

struct shape {
  std::int64_t m, n, k;
  std::string name() const {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  }
};

// bench_matmul's shapes but 2048^3 (whose tuning alone takes minutes here).
const shape kShapes[] = {{64, 64, 64},     {256, 256, 256},   {1024, 1024, 1024}, {1, 4096, 4096},
                         {128, 768, 3072}, {384, 1024, 1024}, {49, 2048, 512}};

struct subject {
  shape s;
  std::vector<float> a, b, c;
  pc::matmul def, tuned;
  pc::primitive::args args;
  std::string default_config, tuned_config;
  double tuning_seconds = 0;
};

pc::engine& cpu() {
  static pc::engine e(pc::engine_kind::cpu, 0);
  return e;
}

std::string config_of(const pc::primitive_desc& pd) {
  const auto& c = pc::backend::impl_of(pd).config();
  return c ? c->to_json() : "(none)";
}

std::unique_ptr<subject> prepare(const shape& s) {
  auto x = std::make_unique<subject>();
  x->s = s;
  x->a.resize(static_cast<std::size_t>(s.m * s.k));
  x->b.resize(static_cast<std::size_t>(s.k * s.n));
  x->c.resize(static_cast<std::size_t>(s.m * s.n));
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& v : x->a) v = dist(gen);
  for (float& v : x->b) v = dist(gen);
  pc::memory::desc a_md({s.m, s.k}, pc::data_type::f32, pc::format_tag::ab);
  pc::memory::desc b_md({s.k, s.n}, pc::data_type::f32, pc::format_tag::ab);
  pc::memory::desc c_md({s.m, s.n}, pc::data_type::f32, pc::format_tag::ab);
  const pc::matmul::desc d(a_md, b_md, c_md);
  x->args = {{PRIMCACHE_ARG_SRC, pc::memory(a_md, cpu(), x->a.data())},
             {PRIMCACHE_ARG_WEIGHTS, pc::memory(b_md, cpu(), x->b.data())},
             {PRIMCACHE_ARG_DST, pc::memory(c_md, cpu(), x->c.data())}};
  pc::stream strm(cpu());
  pc::set_tune(false);
  const pc::matmul::primitive_desc def_pd(d, cpu());
  x->default_config = config_of(def_pd);
  x->def = pc::matmul(def_pd);
  pc::primitive_attr tunable;
  tunable.set_tunable(true);
  const auto start = std::chrono::steady_clock::now();
  pc::matmul(pc::matmul::primitive_desc(d, tunable, cpu())).execute(strm, x->args);
  x->tuning_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const pc::matmul::primitive_desc tuned_pd(d, cpu());
  x->tuned_config = config_of(tuned_pd);
  x->tuned = pc::matmul(tuned_pd);
  return x;
}

void run(benchmark::State& state, const subject* x, bool tuned) {
  pc::stream strm(cpu());
  const pc::matmul& p = tuned ? x->tuned : x->def;
  for (auto _ : state) {
    p.execute(strm, x->args);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * x->s.m * x->s.n * x->s.k,
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

// Collects every run's real time per iteration, by benchmark name without
// its repetition suffix, for the medians.
class collecting_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      std::string name = r.benchmark_name();
      name = name.substr(0, name.rfind("/rep:"));
      times_[name].push_back(r.GetAdjustedRealTime());
    }
    ConsoleReporter::ReportRuns(runs);
  }
  double median(const std::string& name) const {
    auto it = times_.find(name);
    if (it == times_.end() || it->second.empty()) return 0;
    std::vector<double> v = it->second;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }

 private:
  std::map<std::string, std::vector<double>> times_;
};

}  // namespace

int main(int argc, char** argv) {
  ::setenv("PRIMCACHE_JIT_MODE", "sync", 1);
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--reps=", 7) == 0) {
      reps = std::max(1, std::atoi(argv[i] + 7));
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      --i;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  pc::global_tune_table().clear();  // defaults are the heuristic's, whatever the environment says
  std::vector<std::unique_ptr<subject>> subjects;
  for (const shape& s : kShapes) {
    std::fprintf(stderr, "tuning %s ...\n", s.name().c_str());
    subjects.push_back(prepare(s));
  }
  for (const auto& x : subjects) {
    // The tuning time, as a benchmark of one iteration timed by hand.
    const double seconds = x->tuning_seconds;
    benchmark::RegisterBenchmark(("BM_TuneTime/" + x->s.name()).c_str(),
                                 [seconds](benchmark::State& state) {
                                   for (auto _ : state) state.SetIterationTime(seconds);
                                 })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
  for (int r = 0; r < reps; ++r) {
    for (const auto& x : subjects) {
      for (bool tuned : {false, true}) {
        const std::string name = std::string("BM_Tuned/") + (tuned ? "tuned/" : "default/") +
                                 x->s.name() + "/rep:" + std::to_string(r);
        benchmark::RegisterBenchmark(name.c_str(), run, x.get(), tuned)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  collecting_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nmedians of %d interleaved repetitions (real time per iteration, us)\n", reps);
  std::printf("%-16s %12s %12s %9s %12s  %s -> %s\n", "shape", "default", "tuned", "speedup",
              "tuning_ms", "default config", "tuned config");
  for (const auto& x : subjects) {
    const double d = reporter.median("BM_Tuned/default/" + x->s.name());
    const double t = reporter.median("BM_Tuned/tuned/" + x->s.name());
    std::printf("%-16s %12.1f %12.1f %8.3fx %12.0f  %s -> %s\n", x->s.name().c_str(), d, t,
                t > 0 ? d / t : 0.0, x->tuning_seconds * 1e3, x->default_config.c_str(),
                x->tuned_config.c_str());
  }
  const pc::tune_stats st = pc::get_tune_stats();
  std::printf("tuned %llu primitives, %llu replaced the default, %llu wrong candidates\n",
              static_cast<unsigned long long>(st.tuned),
              static_cast<unsigned long long>(st.replaced),
              static_cast<unsigned long long>(st.wrong_candidates));
  benchmark::Shutdown();
  return 0;
}
