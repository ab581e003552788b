// bench_ocl_conv — the OpenCL backend's f32 forward convolution on the
// ResNet-50 layer shapes of bench_conv (minibatch 1, bias on), GFLOPS.
// Each iteration enqueues one convolution and waits for the stream
// (stream::wait = clFinish), so the figure is the device time plus the
// enqueue. Activations in nchw (what `any` resolves to) and in nhwc; the
// weights in the layout the primitive descriptor resolves `any` to, filled
// outside the timed loop.
//
//   build/release/benchmarks/bench_ocl_conv --benchmark_filter=nchw
//
// Counter GFLOPS: 2 * N * OC * OH * OW * IC/G * KH * KW per iteration.
// PoCL's own kernel cache is disabled (POCL_KERNEL_CACHE=0) unless the
// caller sets it. PRIMCACHE_OCL_DEVICE picks the device.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/runtime.hpp"

namespace {

using namespace primcache;

// The layers of bench_conv.cpp.
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
  const memory::desc wei_any({l.oc, l.ic, l.k, l.k}, data_type::f32, format_tag::any);
  const memory::desc bias_md({l.oc}, data_type::f32, format_tag::a);
  const memory::desc dst_md({1, l.oc, l.out(), l.out()}, data_type::f32, tag);
  convolution_forward::primitive_desc pd;
  try {
    pd = convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                  src_md, wei_any, bias_md, dst_md, {l.stride, l.stride},
                                  {l.pad, l.pad}, {l.pad, l.pad}),
        eng);
  } catch (const error& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.SetLabel(pd.impl_info_str());
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
  for (auto _ : state) {
    prim.execute(strm, args);
    strm.wait();
  }
  state.counters["GFLOPS"] = benchmark::Counter(
      l.flops(), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
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
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
