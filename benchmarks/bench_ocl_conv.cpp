// bench_ocl_conv — the OpenCL backend's f32 forward convolution on the
// ResNet-50 layer shapes of bench_conv (minibatch 1, bias on), GFLOPS, and
// three grouped layers (MobileNet-v1's depthwise 3x3 at 112x112, stride 1
// and 2; ResNeXt-50's 3x3 with 32 groups of 4 channels), which check the
// layout rule where a work-item has few channels.
// Each iteration enqueues one convolution and waits for the stream
// (stream::wait = clFinish), so the figure is the device time plus the
// enqueue. Activations in nhwc and in nchw, the two layouts `any` chooses
// between (conv_preferred_activation: the label says which one `any` takes
// for that layer on this device); the weights in the layout the primitive
// descriptor resolves `any` to, filled outside the timed loop.
//
// Two paired benchmarks run two primitives alternately, one execution each
// per iteration, and report the median ratio of their times (counter
// `speed`, above 1 when the first is faster): BM_OclConvLayouts/<layer>
// nhwc against nchw, and BM_OclConvUnroll/u<k>/<layer> the default
// configuration with its channel loop unrolled k times (forced through
// backend::set_config_source) against the default.
//
//   build/release/benchmarks/bench_ocl_conv --benchmark_filter=nchw
//   build/release/benchmarks/bench_ocl_conv --benchmark_filter=BM_OclConvLayouts
//
// BM_OclConvUnroll also runs on four more 3x3 layers (kUnrollExtra), and
// with u8 (against a default that may now unroll less). Tuned
// configurations: a run with PRIMCACHE_TUNE=1 PRIMCACHE_TUNE_TABLE=t.json
// [--tune-max-nconfigs=N] tunes each primitive at its warm-up execution and
// writes the table at exit; runs with PRIMCACHE_TUNE_TABLE=t.json alone
// then create every primitive with its tuned configuration.
//
// Counter GFLOPS: 2 * N * OC * OH * OW * IC/G * KH * KW per iteration.
// BM_OclConv rows also report the kernel's own device time from the
// stream's profiling events (stream::profiled_ns): device_us per execution
// and device_GFLOPS.
// PoCL's own kernel cache is disabled (POCL_KERNEL_CACHE=0) unless the
// caller sets it. PRIMCACHE_OCL_DEVICE picks the device.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_ocl_tune_flag.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/runtime.hpp"

namespace {

using namespace primcache;

// The layers of bench_conv.cpp, then the grouped ones.
struct layer {
  const char* name;
  std::int64_t ic, oc, in, k, stride, pad;
  std::int64_t g = 1;
  std::int64_t out() const { return (in + 2 * pad - k) / stride + 1; }
  double flops() const { return 2.0 * static_cast<double>(oc * out() * out() * (ic / g) * k * k); }
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
    {"dw3x3_32_112", 32, 32, 112, 3, 1, 1, 32},
    {"dw3x3s2_64_112", 64, 64, 112, 3, 2, 1, 64},
    {"g32_3x3_128to128_56", 128, 128, 56, 3, 1, 1, 32},
};

// More 3x3 layers for BM_OclConvUnroll only, beside ResNet-50's: the 7x7
// output with fewer input channels, and 512 input channels on a 14x14
// output, which tell apart what makes conv5_3x3_512to512_7 want the
// unroll of 8 (docs/PERFORMANCE.md, "Per-shape channel unroll").
const layer kUnrollExtra[] = {
    {"x3x3_128to128_7", 128, 128, 7, 3, 1, 1},
    {"x3x3_256to256_7", 256, 256, 7, 3, 1, 1},
    {"x3x3_512to512_14", 512, 512, 14, 3, 1, 1},
    {"x3x3_1024to256_7", 1024, 256, 7, 3, 1, 1},
};

void fill(const memory& m, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto* p = static_cast<float*>(m.map_data());
  for (std::size_t i = 0; i < m.get_desc().size_bytes() / sizeof(float); ++i) p[i] = dist(gen);
  m.unmap_data(p);
}

void bm_conv(benchmark::State& state, layer l, format_tag tag) {
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const memory::desc src_md({1, l.ic, l.in, l.in}, data_type::f32, tag);
  const memory::desc wei_any =
      l.g == 1
          ? memory::desc({l.oc, l.ic, l.k, l.k}, data_type::f32, format_tag::any)
          : memory::desc({l.g, l.oc / l.g, l.ic / l.g, l.k, l.k}, data_type::f32, format_tag::any);
  const memory::desc bias_md({l.oc}, data_type::f32, format_tag::a);
  const memory::desc dst_md({1, l.oc, l.out(), l.out()}, data_type::f32, tag);
  auto make_pd = [&](const memory::desc& src, const memory::desc& dst) {
    return convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, src,
                                  wei_any, bias_md, dst, {l.stride, l.stride}, {l.pad, l.pad},
                                  {l.pad, l.pad}),
        eng);
  };
  convolution_forward::primitive_desc pd;
  std::string any_layout;
  try {
    pd = make_pd(src_md, dst_md);
    // What `any` activations resolve to for this layer on this device.
    const memory::desc any_src =
        make_pd(memory::desc(src_md.dims(), data_type::f32, format_tag::any),
                memory::desc(dst_md.dims(), data_type::f32, format_tag::any))
            .src_desc();
    any_layout =
        any_src == memory::desc(src_md.dims(), data_type::f32, format_tag::nhwc) ? "nhwc" : "nchw";
  } catch (const error& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.SetLabel(pd.impl_info_str() + " any=" + any_layout);
  memory src(src_md, eng), wei(pd.weights_desc(), eng), bias(bias_md, eng), dst(dst_md, eng);
  fill(src, 1);
  fill(wei, 2);
  fill(bias, 3);
  convolution_forward prim(pd);
  const std::unordered_map<int, memory> args = {{PRIMCACHE_ARG_SRC, src},
                                                {PRIMCACHE_ARG_WEIGHTS, wei},
                                                {PRIMCACHE_ARG_BIAS, bias},
                                                {PRIMCACHE_ARG_DST, dst}};
  prim.execute(strm, args);  // warm: the first run may page in the kernel
  strm.wait();
  const bool profiled = strm.reset_profiling();
  for (auto _ : state) {
    prim.execute(strm, args);
    strm.wait();
  }
  state.counters["GFLOPS"] = benchmark::Counter(
      l.flops(), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  // The kernel's own time from the stream's profiling events, without the
  // enqueue and the wait.
  if (profiled && state.iterations() > 0) {
    const std::optional<std::int64_t> ns = strm.profiled_ns();
    strm.stop_profiling();
    if (ns && *ns > 0) {
      const double iterations = static_cast<double>(state.iterations());
      state.counters["device_us"] = static_cast<double>(*ns) * 1e-3 / iterations;
      state.counters["device_GFLOPS"] = l.flops() * iterations / static_cast<double>(*ns);
    }
  }
}

// One primitive of a layer with its memories, for the paired benchmarks.
struct conv_run {
  convolution_forward prim;
  std::unordered_map<int, memory> args;
  std::string config;
};

// `tag`: the activations' layout; `unroll` > 0: the default configuration
// with that ic_unroll, forced through the config source.
conv_run make_run(const engine& eng, const layer& l, format_tag tag, int unroll) {
  const memory::desc src_md({1, l.ic, l.in, l.in}, data_type::f32, tag);
  const memory::desc wei_any =
      l.g == 1
          ? memory::desc({l.oc, l.ic, l.k, l.k}, data_type::f32, format_tag::any)
          : memory::desc({l.g, l.oc / l.g, l.ic / l.g, l.k, l.k}, data_type::f32, format_tag::any);
  const memory::desc bias_md({l.oc}, data_type::f32, format_tag::a);
  const memory::desc dst_md({1, l.oc, l.out(), l.out()}, data_type::f32, tag);
  const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                    src_md, wei_any, bias_md, dst_md, {l.stride, l.stride},
                                    {l.pad, l.pad}, {l.pad, l.pad});
  convolution_forward::primitive_desc pd(d, eng);
  if (unroll > 0) {
    backend::kernel_config forced;
    const auto def = backend::impl_of(pd).default_config();
    for (const auto& f : def->fields()) {
      forced.add(f.name, f.name == "ic_unroll" ? unroll : f.value);
    }
    backend::set_config_source(
        [forced](const backend::primitive_desc_impl&) -> std::optional<backend::kernel_config> {
          return forced;
        });
    try {
      pd = convolution_forward::primitive_desc(d, eng);
    } catch (...) {
      backend::set_config_source(nullptr);
      throw;
    }
    backend::set_config_source(nullptr);
  }
  conv_run r;
  const auto& cfg = backend::impl_of(pd).config();
  r.config = cfg ? cfg->to_json() : "";
  memory src(pd.src_desc(), eng), wei(pd.weights_desc(), eng), bias(bias_md, eng),
      dst(pd.dst_desc(), eng);
  fill(src, 1);
  fill(wei, 2);
  fill(bias, 3);
  r.prim = convolution_forward(pd);
  r.args = {{PRIMCACHE_ARG_SRC, src},
            {PRIMCACHE_ARG_WEIGHTS, wei},
            {PRIMCACHE_ARG_BIAS, bias},
            {PRIMCACHE_ARG_DST, dst}};
  return r;
}

double run_once(stream& strm, const conv_run& r) {
  const auto t0 = std::chrono::steady_clock::now();
  r.prim.execute(strm, r.args);
  strm.wait();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A against B, alternating one execution each per iteration (so the
// machine's drift falls on both alike): counters A_GFLOPS and B_GFLOPS from
// the median times, and speed, the median over the pairs of B's time / A's
// (above 1: A is faster); and A's and B's source builds (creation through
// the first execution), one each.
void bm_pair(benchmark::State& state, layer l, std::function<conv_run(const engine&)> make_a,
             std::function<conv_run(const engine&)> make_b, std::string a_name,
             std::string b_name) {
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  conv_run a, b;
  // Each one's creation through its first execution (PoCL compiles the
  // kernel's work-group function there): a source build, as
  // BM_OclCreate/source_build times it, once.
  double build_a = 0, build_b = 0;
  const int capacity = get_primitive_cache_capacity();
  set_primitive_cache_capacity(0);  // no primitive built before is reused
  try {
    auto t0 = std::chrono::steady_clock::now();
    a = make_a(eng);
    run_once(strm, a);
    auto t1 = std::chrono::steady_clock::now();
    b = make_b(eng);
    run_once(strm, b);
    auto t2 = std::chrono::steady_clock::now();
    build_a = std::chrono::duration<double>(t1 - t0).count();
    build_b = std::chrono::duration<double>(t2 - t1).count();
  } catch (const error& e) {
    set_primitive_cache_capacity(capacity);
    state.SkipWithError(e.what());
    return;
  }
  set_primitive_cache_capacity(capacity);
  state.SetLabel(a_name + " " + a.config + " vs " + b_name + " " + b.config);
  std::vector<double> ta, tb, ratio;
  bool a_first = true;
  for (auto _ : state) {
    // Which runs first alternates too (the second may find warmer caches).
    const double x = a_first ? run_once(strm, a) : 0, y = run_once(strm, b);
    const double x2 = a_first ? x : run_once(strm, a);
    a_first = !a_first;
    ta.push_back(x2);
    tb.push_back(y);
    ratio.push_back(y / x2);
  }
  state.counters[a_name + "_GFLOPS"] = l.flops() / median(ta) / 1e9;
  state.counters[b_name + "_GFLOPS"] = l.flops() / median(tb) / 1e9;
  state.counters["speed"] = median(ratio);
  state.counters[a_name + "_build_ms"] = build_a * 1e3;
  state.counters[b_name + "_build_ms"] = build_b * 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("POCL_KERNEL_CACHE", "0", /*overwrite=*/0);
  for (const layer& l : kLayers) {
    for (auto [tag, name] :
         {std::pair{format_tag::nhwc, "nhwc"}, std::pair{format_tag::nchw, "nchw"}}) {
      benchmark::RegisterBenchmark(("BM_OclConv/" + std::string(name) + "/" + l.name).c_str(),
                                   bm_conv, l, tag)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  // BM_OclConvLayouts/<layer>: nhwc against nchw, interleaved (speed:
  // nhwc's). BM_OclConvUnroll/u<k>/<layer>: the default configuration with
  // ic_unroll k against the default itself, `any` activations (speed: k's).
  for (const layer& l : kLayers) {
    benchmark::RegisterBenchmark(
        ("BM_OclConvLayouts/" + std::string(l.name)).c_str(), bm_pair, l,
        [l](const engine& e) { return make_run(e, l, format_tag::nhwc, 0); },
        [l](const engine& e) { return make_run(e, l, format_tag::nchw, 0); }, "nhwc", "nchw")
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  std::vector<layer> unroll_layers;
  for (const layer& l : kLayers) {
    if (l.g == 1) unroll_layers.push_back(l);
  }
  unroll_layers.insert(unroll_layers.end(), std::begin(kUnrollExtra), std::end(kUnrollExtra));
  for (int u : {1, 2, 4, 8}) {
    for (const layer& l : unroll_layers) {
      benchmark::RegisterBenchmark(
          ("BM_OclConvUnroll/u" + std::to_string(u) + "/" + l.name).c_str(), bm_pair, l,
          [l, u](const engine& e) { return make_run(e, l, format_tag::any, u); },
          [l](const engine& e) { return make_run(e, l, format_tag::any, 0); },
          "u" + std::to_string(u), "default")
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (!bench_ocl::take_tune_flag(argc, argv)) return 1;
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
