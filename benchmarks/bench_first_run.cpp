// What a user feels on a model's first run: a 59-layer network, ResNet-50's
// 53 convolutions (v1.5, batch 1, blocked activations, weights in the
// implementation's preferred layout) followed by a transformer block's six
// matmuls (sequence 128, hidden 768, FFN 3072), each layer created and
// executed once, in order, from a cold primitive cache. Part of bench_create.
//
//   BM_FirstRun/sync     primcache in the sync JIT mode (every kernel
//                        compiled before its creation returns)
//   BM_FirstRun/tiered   primcache in the tiered JIT mode (the generic kernel
//                        where the backend has one, the specialized one on
//                        the background pool); counter specialized_ms: from
//                        the start until every layer's specialized kernel
//                        is installed (polled, not waited for: a wait would
//                        compile on this thread)
//   BM_FirstRun/onednn   oneDNN 2.6, its primitive cache cleared first; its
//                        convolutions take format_tag::any for every tensor
//
// The time is to the first output: every layer created and run, the stream
// waited for. Repeated shapes hit the cache within a run, as in a real model.
// Buffers are allocated once, outside the timing, and reused by every layer
// (their contents do not matter for the time: they stay zero). No persistent
// cache is attached. One untimed run comes first, so that once-per-process
// costs (the generic kernels' link into the JIT, oneDNN's own set-up, the
// first touch of the buffers) are in neither side's figure.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "primcache/runtime/runtime.hpp"

namespace {

namespace pc = primcache;

struct conv_layer {
  std::int64_t ic, oc, in, k, stride;
  std::int64_t pad() const { return k / 2; }
  std::int64_t out() const { return (in + 2 * pad() - k) / stride + 1; }
};
struct matmul_layer {
  std::int64_t m, n, k;
};

// ResNet-50 v1.5: the stride of a stage's first block sits on its 3x3 and on
// the projection.
std::vector<conv_layer> resnet50_convs() {
  std::vector<conv_layer> layers = {{3, 64, 224, 7, 2}};
  struct stage {
    std::int64_t in_channels, mid, out, size, blocks, stride;
  };
  const stage stages[] = {{64, 64, 256, 56, 3, 1},
                          {256, 128, 512, 56, 4, 2},
                          {512, 256, 1024, 28, 6, 2},
                          {1024, 512, 2048, 14, 3, 2}};
  for (const stage& s : stages) {
    const std::int64_t out_size = s.size / s.stride;
    for (std::int64_t b = 0; b < s.blocks; ++b) {
      const bool first = b == 0;
      const std::int64_t in_ch = first ? s.in_channels : s.out;
      const std::int64_t in_size = first ? s.size : out_size;
      layers.push_back({in_ch, s.mid, in_size, 1, 1});
      layers.push_back({s.mid, s.mid, in_size, 3, first ? s.stride : 1});
      layers.push_back({s.mid, s.out, out_size, 1, 1});
      if (first) layers.push_back({in_ch, s.out, in_size, 1, s.stride});
    }
  }
  return layers;
}

const std::vector<matmul_layer>& transformer_matmuls() {
  static const std::vector<matmul_layer> layers = {
      {128, 768, 768},  {128, 768, 768},  {128, 768, 768},  // Q, K, V
      {128, 768, 768},                                      // attention output
      {128, 3072, 768}, {128, 768, 3072},                   // FFN up, down
  };
  return layers;
}

// Zeroed scratch memory shared by every layer; large enough for any of them
// (checked per layer against the descriptor's size).
struct scratch {
  static constexpr std::size_t kActivationFloats = std::size_t{2} << 20;
  static constexpr std::size_t kWeightFloats = std::size_t{8} << 20;
  std::vector<float> src = std::vector<float>(kActivationFloats);
  std::vector<float> dst = std::vector<float>(kActivationFloats);
  std::vector<float> weights = std::vector<float>(kWeightFloats);
  std::vector<float> bias = std::vector<float>(4096);
  bool fits(std::size_t src_bytes, std::size_t wei_bytes, std::size_t dst_bytes) const {
    return src_bytes <= src.size() * sizeof(float) && dst_bytes <= dst.size() * sizeof(float) &&
           wei_bytes <= weights.size() * sizeof(float);
  }
};
scratch& buffers() {
  static scratch s;
  return s;
}

// ---- primcache ----

pc::engine& pc_cpu() {
  static pc::engine e(pc::engine_kind::cpu, 0);
  return e;
}

// Creates and runs one layer; the primitive is kept so that the tiered run
// can tell when its specialized kernel is in. False (with `why`) when the
// scratch buffers are too small for it.
bool pc_conv_run(const conv_layer& l, pc::stream& strm, std::vector<pc::primitive>& made,
                 std::string& why) {
  using tag = pc::format_tag;
  pc::memory::desc src({1, l.ic, l.in, l.in}, pc::data_type::f32, tag::nChw16c);
  pc::memory::desc wei({l.oc, l.ic, l.k, l.k}, pc::data_type::f32, tag::any);
  pc::memory::desc bias({l.oc}, pc::data_type::f32, tag::a);
  pc::memory::desc dst({1, l.oc, l.out(), l.out()}, pc::data_type::f32, tag::nChw16c);
  pc::convolution_forward::primitive_desc pd(
      pc::convolution_forward::desc(pc::prop_kind::forward_inference,
                                    pc::algorithm::convolution_direct, src, wei, bias, dst,
                                    {l.stride, l.stride}, {l.pad(), l.pad()}, {l.pad(), l.pad()}),
      pc_cpu());
  scratch& b = buffers();
  if (!b.fits(src.size_bytes(), pd.weights_desc().size_bytes(), dst.size_bytes())) {
    why = "scratch buffers too small for a convolution";
    return false;
  }
  pc::convolution_forward prim(pd);
  prim.execute(strm,
               {{PRIMCACHE_ARG_SRC, pc::memory(src, pc_cpu(), b.src.data())},
                {PRIMCACHE_ARG_WEIGHTS, pc::memory(pd.weights_desc(), pc_cpu(), b.weights.data())},
                {PRIMCACHE_ARG_BIAS, pc::memory(bias, pc_cpu(), b.bias.data())},
                {PRIMCACHE_ARG_DST, pc::memory(dst, pc_cpu(), b.dst.data())}});
  made.push_back(prim);
  return true;
}

bool pc_matmul_run(const matmul_layer& l, pc::stream& strm, std::vector<pc::primitive>& made,
                   std::string& why) {
  using tag = pc::format_tag;
  pc::memory::desc a({l.m, l.k}, pc::data_type::f32, tag::ab);
  pc::memory::desc w({l.k, l.n}, pc::data_type::f32, tag::ab);
  pc::memory::desc c({l.m, l.n}, pc::data_type::f32, tag::ab);
  scratch& b = buffers();
  if (!b.fits(a.size_bytes(), w.size_bytes(), c.size_bytes())) {
    why = "scratch buffers too small for a matmul";
    return false;
  }
  pc::matmul prim(pc::matmul::primitive_desc(pc::matmul::desc(a, w, c), pc_cpu()));
  prim.execute(strm, {{PRIMCACHE_ARG_SRC, pc::memory(a, pc_cpu(), b.src.data())},
                      {PRIMCACHE_ARG_WEIGHTS, pc::memory(w, pc_cpu(), b.weights.data())},
                      {PRIMCACHE_ARG_DST, pc::memory(c, pc_cpu(), b.dst.data())}});
  made.push_back(prim);
  return true;
}

bool pc_network(std::vector<pc::primitive>& made, std::string& why) {
  pc::stream strm(pc_cpu());
  for (const conv_layer& l : resnet50_convs()) {
    if (!pc_conv_run(l, strm, made, why)) return false;
  }
  for (const matmul_layer& l : transformer_matmuls()) {
    if (!pc_matmul_run(l, strm, made, why)) return false;
  }
  strm.wait();
  return true;
}

void pc_cold() {
  pc::set_primitive_cache_capacity(0);
  pc::set_primitive_cache_capacity(1024);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

void BM_FirstRun_primcache(benchmark::State& state, pc::jit_mode mode) {
  const pc::jit_mode saved = pc::get_jit_mode();
  pc::set_jit_mode(mode);
  pc::set_persistent_cache(nullptr);
  std::vector<double> to_specialized;
  std::string why;
  {
    std::vector<pc::primitive> warm;
    if (!pc_network(warm, why)) {
      state.SkipWithError(why.c_str());
      pc::set_jit_mode(saved);
      return;
    }
    for (const pc::primitive& p : warm) p.wait_until_specialized();
  }
  for (auto _ : state) {
    pc_cold();
    std::vector<pc::primitive> made;
    const auto start = std::chrono::steady_clock::now();
    if (!pc_network(made, why)) {
      state.SkipWithError(why.c_str());
      break;
    }
    state.SetIterationTime(ms_since(start) / 1e3);
    // Until the pool has installed every specialized kernel; also keeps one
    // iteration's background compilations out of the next.
    auto all_specialized = [&] {
      return std::all_of(made.begin(), made.end(),
                         [](const pc::primitive& p) { return p.specialized(); });
    };
    // A failed specialization leaves the generic kernel for good: give up
    // after two minutes instead of polling forever.
    while (!all_specialized() && ms_since(start) < 120e3) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (!all_specialized()) {
      state.SkipWithError("a layer's specialized kernel was not installed within 120 s");
      break;
    }
    to_specialized.push_back(ms_since(start));
  }
  if (!to_specialized.empty()) {
    std::sort(to_specialized.begin(), to_specialized.end());
    state.counters["specialized_ms"] = to_specialized[to_specialized.size() / 2];
  }
  state.counters["layers"] =
      static_cast<double>(resnet50_convs().size() + transformer_matmuls().size());
  pc::set_jit_mode(saved);
}

// ---- oneDNN ----

dnnl::engine& dnnl_cpu() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

bool dnnl_network(std::string& why) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::stream strm(dnnl_cpu());
  scratch& b = buffers();
  for (const conv_layer& l : resnet50_convs()) {
    // format_tag::any everywhere, as oneDNN's users do: a blocked source
    // with 3 channels would send the first layer to its reference code.
    dnnl::memory::desc src({1, l.ic, l.in, l.in}, dt::f32, tag::any);
    dnnl::memory::desc wei({l.oc, l.ic, l.k, l.k}, dt::f32, tag::any);
    dnnl::memory::desc bias({l.oc}, dt::f32, tag::a);
    dnnl::memory::desc dst({1, l.oc, l.out(), l.out()}, dt::f32, tag::any);
    dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, wei, bias,
            dst, {l.stride, l.stride}, {l.pad(), l.pad()}, {l.pad(), l.pad()}),
        dnnl_cpu());
    if (!b.fits(pd.src_desc().get_size(), pd.weights_desc().get_size(), pd.dst_desc().get_size())) {
      why = "scratch buffers too small for a convolution";
      return false;
    }
    dnnl::convolution_forward(pd).execute(
        strm, {{DNNL_ARG_SRC, dnnl::memory(pd.src_desc(), dnnl_cpu(), b.src.data())},
               {DNNL_ARG_WEIGHTS, dnnl::memory(pd.weights_desc(), dnnl_cpu(), b.weights.data())},
               {DNNL_ARG_BIAS, dnnl::memory(bias, dnnl_cpu(), b.bias.data())},
               {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), dnnl_cpu(), b.dst.data())}});
  }
  for (const matmul_layer& l : transformer_matmuls()) {
    dnnl::memory::desc a({l.m, l.k}, dt::f32, tag::ab);
    dnnl::memory::desc w({l.k, l.n}, dt::f32, tag::ab);
    dnnl::memory::desc c({l.m, l.n}, dt::f32, tag::ab);
    dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, w, c), dnnl_cpu()))
        .execute(strm, {{DNNL_ARG_SRC, dnnl::memory(a, dnnl_cpu(), b.src.data())},
                        {DNNL_ARG_WEIGHTS, dnnl::memory(w, dnnl_cpu(), b.weights.data())},
                        {DNNL_ARG_DST, dnnl::memory(c, dnnl_cpu(), b.dst.data())}});
  }
  strm.wait();
  return true;
}

void BM_FirstRun_onednn(benchmark::State& state) {
  std::string why;
  if (!dnnl_network(why)) {
    state.SkipWithError(why.c_str());
    return;
  }
  for (auto _ : state) {
    dnnl::set_primitive_cache_capacity(0);
    dnnl::set_primitive_cache_capacity(1024);
    const auto start = std::chrono::steady_clock::now();
    if (!dnnl_network(why)) {
      state.SkipWithError(why.c_str());
      break;
    }
    state.SetIterationTime(ms_since(start) / 1e3);
  }
}

// A few iterations each: one sync run compiles every distinct kernel (about
// a second of CPU time).
[[maybe_unused]] const bool registered = [] {
  benchmark::RegisterBenchmark(
      "BM_FirstRun/sync", [](benchmark::State& s) { BM_FirstRun_primcache(s, pc::jit_mode::sync); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(3);
  benchmark::RegisterBenchmark(
      "BM_FirstRun/tiered",
      [](benchmark::State& s) { BM_FirstRun_primcache(s, pc::jit_mode::tiered); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(3);
  benchmark::RegisterBenchmark("BM_FirstRun/onednn", BM_FirstRun_onednn)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(3);
  return true;
}();

}  // namespace
