// bench_tune: primitives with their default (heuristic) configuration
// against the configuration tune mode chose for them, through the public
// API: the CPU matmul on the runtime issue's shapes and the CPU convolution
// on bench_conv's ResNet-50 layers (nChw16c; and the 1x1 layers again in
// nhwc, cpu/nhwc-conv/..., where the convolution run as one matmul,
// jit:conv:via_matmul, is a candidate beside jit:conv), and on the OpenCL device
// (PoCL on CI) the matmul on bench_ocl_matmul's shapes and the convolution
// on the same layers (activations `any`: the layout the OpenCL backend
// resolves them to for the device and shape, nhwc on PoCL).
//
// For each subject: the default primitive is created with tuning off and an
// empty tune table; then a tunable primitive's first execution tunes it
// (its wall time is the tuning time, reported as BM_TuneTime/<subject>);
// then the tuned primitive is created with tuning off (its descriptor takes
// the table's winner). The measured benchmarks are registered interleaved —
// default and tuned alternating, repetition by repetition — so the machine's
// drift falls on both alike; the summary after the run gives each subject's
// median of the repetitions, tuned/default speed-up, and per group (cpu
// matmul, cpu conv, ocl matmul, ocl conv) the geometric mean and the
// smallest speed-up; tune_warm is default / winner in the tuner's own warm
// confirmation (from the tune table's entry), rejected the candidates that
// confirmation turned down. Each iteration executes and waits for the stream.
//
//   bench_tune [--reps=N] [--subjects=ocl/,cpu/matmul] [--max-nconfigs=N]
//              [google benchmark flags]
//
// --subjects keeps the subjects whose name contains one of the
// comma-separated strings (default: all); --max-nconfigs is tune mode's
// candidate budget per primitive (default 40, the library's). The
// OpenCL tuning compiles each candidate (PoCL: about a second each).
// PRIMCACHE_JIT_MODE is set to sync (both CPU primitives run specialized
// code); POCL_KERNEL_CACHE=0 unless set; PRIMCACHE_OCL_DEVICE picks the
// OpenCL device.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/tuning.hpp"

namespace pc = primcache;

namespace {

struct mm_shape {
  std::int64_t m, n, k;
  std::string name() const {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  }
};

// bench_matmul's shapes but 2048^3 (whose tuning alone takes minutes here).
const mm_shape kCpuMatmul[] = {{64, 64, 64},    {256, 256, 256},  {1024, 1024, 1024},
                               {1, 4096, 4096}, {128, 768, 3072}, {384, 1024, 1024},
                               {49, 2048, 512}};
// The shapes docs/ocl.md reports for bench_ocl_matmul.
const mm_shape kOclMatmul[] = {{64, 64, 64},     {256, 256, 256},   {1, 4096, 4096},
                               {128, 768, 3072}, {384, 1024, 1024}, {49, 2048, 512}};

// The ResNet-50 layers of bench_conv (minibatch 1, bias on).
struct layer {
  const char* name;
  std::int64_t ic, oc, in, k, stride, pad;
  std::int64_t out() const { return (in + 2 * pad - k) / stride + 1; }
  double flops() const { return 2.0 * static_cast<double>(oc * out() * out() * ic * k * k); }
};
const layer kLayers[] = {
    {"conv1_7x7s2_3to64_224", 3, 64, 224, 7, 2, 3},
    {"conv2_3x3_64to64_56", 64, 64, 56, 3, 1, 1},
    {"conv2_1x1_64to256_56", 64, 256, 56, 1, 1, 0},
    {"conv2_1x1_256to64_56", 256, 64, 56, 1, 1, 0},
    {"conv3_3x3_128to128_28", 128, 128, 28, 3, 1, 1},
    {"conv3_3x3s2_128to128_56", 128, 128, 56, 3, 2, 1},
    {"conv3_1x1_512to128_28", 512, 128, 28, 1, 1, 0},
    {"conv4_3x3_256to256_14", 256, 256, 14, 3, 1, 1},
    {"conv4_1x1_1024to256_14", 1024, 256, 14, 1, 1, 0},
    {"conv5_3x3_512to512_7", 512, 512, 7, 3, 1, 1},
    {"conv5_1x1_2048to512_7", 2048, 512, 7, 1, 1, 0},
};

struct subject {
  explicit subject(const pc::engine& e) : eng(e) {}
  std::string name;   // "ocl/matmul/64x64x64"
  std::string group;  // "ocl/matmul"
  pc::engine eng;
  double flops = 0;
  pc::primitive::args args;
  pc::primitive def, tuned;
  std::string default_config, tuned_config;
  double tuning_seconds = 0;
  // From the tune table's entry: the tuner's warm confirmation of the
  // winner against the default (0 when the default stood cold), and the
  // candidates the confirmation rejected while tuning this subject.
  double warm_default_ns = 0, warm_tuned_ns = 0;
  std::uint64_t rejected = 0;
};

// "jit:conv {...}": the implementation (tuning may pick another one) and
// its configuration.
std::string config_of(const pc::primitive_desc& pd) {
  if (!pd) return "(none)";
  const auto& impl = pc::backend::impl_of(pd);
  const auto& c = impl.config();
  return std::string(impl.name()) + " " + (c ? c->to_json() : "(no configuration)");
}

void fill(const pc::memory& m, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto* p = static_cast<float*>(m.map_data());
  for (std::size_t i = 0; i < m.get_desc().size_bytes() / sizeof(float); ++i) p[i] = dist(gen);
  m.unmap_data(p);
}

// make_pd(attr) -> the descriptor; the rest is shared by every subject.
template <class Prim, class MakePd>
std::unique_ptr<subject> prepare(std::unique_ptr<subject> x, MakePd make_pd) {
  pc::set_tune(false);
  const auto def_pd = make_pd(pc::primitive_attr());
  x->default_config = config_of(def_pd);
  x->def = Prim(def_pd);
  for (int arg :
       {PRIMCACHE_ARG_SRC, PRIMCACHE_ARG_WEIGHTS, PRIMCACHE_ARG_BIAS, PRIMCACHE_ARG_DST}) {
    const pc::memory::desc md = def_pd.query_md(arg);
    if (md.is_zero()) continue;
    pc::memory m(md, x->eng);
    if (arg != PRIMCACHE_ARG_DST) fill(m, static_cast<std::uint32_t>(arg));
    x->args.emplace(arg, m);
  }
  pc::stream strm(x->eng);
  pc::primitive_attr tunable;
  tunable.set_tunable(true);
  const std::uint64_t rejected_before = pc::get_tune_stats().rejected_candidates;
  const auto start = std::chrono::steady_clock::now();
  Prim(make_pd(tunable)).execute(strm, x->args);
  strm.wait();
  x->tuning_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  x->rejected = pc::get_tune_stats().rejected_candidates - rejected_before;
  const auto tuned_pd = make_pd(pc::primitive_attr());
  x->tuned_config = config_of(tuned_pd);
  if (auto e = pc::global_tune_table().find(pc::tune_device_of(x->eng),
                                            pc::backend::impl_of(tuned_pd).problem_key())) {
    x->warm_default_ns = e->warm_default_time_ns;
    x->warm_tuned_ns = e->warm_time_ns;
  }
  x->tuned = Prim(tuned_pd);
  return x;
}

std::unique_ptr<subject> matmul_subject(const std::string& backend, const pc::engine& eng,
                                        const mm_shape& s) {
  auto x = std::make_unique<subject>(eng);
  x->group = backend + "/matmul";
  x->name = x->group + "/" + s.name();
  x->flops = 2.0 * static_cast<double>(s.m * s.n * s.k);
  const pc::matmul::desc d(pc::memory::desc({s.m, s.k}, pc::data_type::f32, pc::format_tag::ab),
                           pc::memory::desc({s.k, s.n}, pc::data_type::f32, pc::format_tag::ab),
                           pc::memory::desc({s.m, s.n}, pc::data_type::f32, pc::format_tag::ab));
  return prepare<pc::matmul>(std::move(x), [&](const pc::primitive_attr& attr) {
    return pc::matmul::primitive_desc(d, attr, eng);
  });
}

std::unique_ptr<subject> conv_subject(const std::string& backend, const pc::engine& eng,
                                      const layer& l, pc::format_tag act,
                                      const std::string& kind = "conv") {
  auto x = std::make_unique<subject>(eng);
  x->group = backend + "/" + kind;
  x->name = x->group + "/" + l.name;
  x->flops = l.flops();
  const pc::convolution_forward::desc d(
      pc::prop_kind::forward_inference, pc::algorithm::convolution_direct,
      pc::memory::desc({1, l.ic, l.in, l.in}, pc::data_type::f32, act),
      pc::memory::desc({l.oc, l.ic, l.k, l.k}, pc::data_type::f32, pc::format_tag::any),
      pc::memory::desc({l.oc}, pc::data_type::f32, pc::format_tag::a),
      pc::memory::desc({1, l.oc, l.out(), l.out()}, pc::data_type::f32, act), {l.stride, l.stride},
      {l.pad, l.pad}, {l.pad, l.pad});
  return prepare<pc::convolution_forward>(std::move(x), [&](const pc::primitive_attr& attr) {
    return pc::convolution_forward::primitive_desc(d, attr, eng);
  });
}

void run(benchmark::State& state, const subject* x, bool tuned) {
  pc::stream strm(x->eng);
  const pc::primitive& p = tuned ? x->tuned : x->def;
  for (auto _ : state) {
    p.execute(strm, x->args);
    strm.wait();
  }
  state.counters["GFLOPS"] = benchmark::Counter(
      x->flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
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

// Removes argv[i] when it starts with `flag`, returning what follows it.
bool take_flag(int& argc, char** argv, int i, const char* flag, std::string& value) {
  const std::size_t n = std::strlen(flag);
  if (std::strncmp(argv[i], flag, n) != 0) return false;
  value = argv[i] + n;
  for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
  --argc;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  ::setenv("PRIMCACHE_JIT_MODE", "sync", 1);
  ::setenv("POCL_KERNEL_CACHE", "0", /*overwrite=*/0);
  int reps = 5;
  std::size_t max_nconfigs = 40;
  std::vector<std::string> wanted;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (take_flag(argc, argv, i, "--reps=", v)) {
      reps = std::max(1, std::atoi(v.c_str()));
    } else if (take_flag(argc, argv, i, "--max-nconfigs=", v)) {
      max_nconfigs = static_cast<std::size_t>(std::max(1, std::atoi(v.c_str())));
    } else if (take_flag(argc, argv, i, "--subjects=", v)) {
      for (std::size_t p = 0; p <= v.size();) {
        const std::size_t q = std::min(v.find(',', p), v.size());
        if (q > p) wanted.push_back(v.substr(p, q - p));
        p = q + 1;
      }
    } else {
      continue;
    }
    --i;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  pc::global_tune_table().clear();  // defaults are the heuristic's, whatever the environment says
  pc::set_tune_max_nconfigs(max_nconfigs);
  auto want = [&](const std::string& name) {
    if (wanted.empty()) return true;
    for (const std::string& w : wanted) {
      if (name.find(w) != std::string::npos) return true;
    }
    return false;
  };
  // Each subject's maker, by name, so that only the wanted ones are made.
  std::vector<std::pair<std::string, std::function<std::unique_ptr<subject>()>>> makers;
  const pc::engine cpu(pc::engine_kind::cpu, 0);
  for (const mm_shape& s : kCpuMatmul) {
    makers.emplace_back("cpu/matmul/" + s.name(),
                        [&cpu, s] { return matmul_subject("cpu", cpu, s); });
  }
  for (const layer& l : kLayers) {
    makers.emplace_back("cpu/conv/" + std::string(l.name),
                        [&cpu, l] { return conv_subject("cpu", cpu, l, pc::format_tag::nChw16c); });
  }
  // The 1x1 layers in nhwc: there the convolution is also a matmul
  // (jit:conv:via_matmul), which the tuning measures beside jit:conv.
  for (const layer& l : kLayers) {
    if (l.k != 1) continue;
    makers.emplace_back("cpu/nhwc-conv/" + std::string(l.name), [&cpu, l] {
      return conv_subject("cpu", cpu, l, pc::format_tag::nhwc, "nhwc-conv");
    });
  }
  std::unique_ptr<pc::engine> gpu;
  auto ocl = [&gpu]() -> const pc::engine& {
    if (!gpu) gpu = std::make_unique<pc::engine>(pc::engine_kind::gpu, 0);
    return *gpu;
  };
  for (const mm_shape& s : kOclMatmul) {
    makers.emplace_back("ocl/matmul/" + s.name(),
                        [ocl, s] { return matmul_subject("ocl", ocl(), s); });
  }
  for (const layer& l : kLayers) {
    makers.emplace_back("ocl/conv/" + std::string(l.name),
                        [ocl, l] { return conv_subject("ocl", ocl(), l, pc::format_tag::any); });
  }
  std::vector<std::unique_ptr<subject>> subjects;
  for (auto& [name, make] : makers) {
    if (!want(name)) continue;
    std::fprintf(stderr, "tuning %s ...\n", name.c_str());
    try {
      subjects.push_back(make());
    } catch (const pc::error& e) {
      std::fprintf(stderr, "  skipped: %s\n", e.what());
    }
  }
  for (const auto& x : subjects) {
    // The tuning time, as a benchmark of one iteration timed by hand.
    const double seconds = x->tuning_seconds;
    benchmark::RegisterBenchmark(("BM_TuneTime/" + x->name).c_str(),
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
                                 x->name + "/rep:" + std::to_string(r);
        benchmark::RegisterBenchmark(name.c_str(), run, x.get(), tuned)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  collecting_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf(
      "\nmedians of %d interleaved repetitions (real time per iteration, us), "
      "max_nconfigs %zu\n",
      reps, max_nconfigs);
  std::printf("%-36s %12s %12s %9s %12s %9s %8s  %s -> %s\n", "subject", "default", "tuned",
              "speedup", "tuning_ms", "tune_warm", "rejected", "default config", "tuned config");
  struct group_stats {
    double log_sum = 0, min = 1e300;
    int n = 0;
  };
  std::map<std::string, group_stats> groups;
  for (const auto& x : subjects) {
    const double d = reporter.median("BM_Tuned/default/" + x->name);
    const double t = reporter.median("BM_Tuned/tuned/" + x->name);
    const double speedup = t > 0 ? d / t : 0.0;
    // tune_warm: default / winner in the tuner's warm confirmation ("-": none).
    char warm[16] = "-";
    if (x->warm_tuned_ns > 0) {
      std::snprintf(warm, sizeof warm, "%.3fx", x->warm_default_ns / x->warm_tuned_ns);
    }
    std::printf("%-36s %12.1f %12.1f %8.3fx %12.0f %9s %8llu  %s -> %s\n", x->name.c_str(), d, t,
                speedup, x->tuning_seconds * 1e3, warm,
                static_cast<unsigned long long>(x->rejected), x->default_config.c_str(),
                x->tuned_config.c_str());
    if (speedup > 0) {
      group_stats& g = groups[x->group];
      g.log_sum += std::log(speedup);
      g.min = std::min(g.min, speedup);
      ++g.n;
    }
  }
  for (const auto& [name, g] : groups) {
    std::printf("%-12s geometric mean %.3fx, smallest %.3fx over %d\n", name.c_str(),
                std::exp(g.log_sum / g.n), g.min, g.n);
  }
  const pc::tune_stats st = pc::get_tune_stats();
  std::printf(
      "tuned %llu primitives, %llu replaced the default, %llu wrong candidates, "
      "%llu failed candidates, %llu rejected by the warm confirmation\n",
      static_cast<unsigned long long>(st.tuned), static_cast<unsigned long long>(st.replaced),
      static_cast<unsigned long long>(st.wrong_candidates),
      static_cast<unsigned long long>(st.failed_candidates),
      static_cast<unsigned long long>(st.rejected_candidates));
  benchmark::Shutdown();
  return 0;
}
