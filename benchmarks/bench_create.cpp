// Primitive creation: the path a framework takes on every call, with the
// primitive in the cache (hit), from a ready primitive descriptor, and the
// first creation (miss, which compiles). primcache and oneDNN 2.6 in the same
// binary and run, for a matmul and a 3x3 convolution.
//
//   BM_CreateHit/<impl>/<op>        raw dims -> memory descs -> op desc -> pd -> primitive
//   BM_CreateHitFromPd/<impl>/<op>  pd -> primitive
//   BM_CreateMiss/<impl>/<op>       the same path with the cache cleared first;
//                                   impl: primcache_sync (the specialized kernel
//                                   compiled before creation returns),
//                                   primcache_tiered (the generic kernel now, the
//                                   specialized one in the background; matmul
//                                   and convolution: other kinds have no
//                                   generic kernel yet), onednn
//   BM_TimeToSpecialized/primcache_tiered/<op>
//                                   a tiered creation until its specialized
//                                   kernel is installed by the background pool
#include <benchmark/benchmark.h>

#include <chrono>
#include <thread>

#include <oneapi/dnnl/dnnl.hpp>

#include "primcache/runtime/runtime.hpp"

namespace {

namespace pc = primcache;

pc::engine& pc_cpu() {
  static pc::engine e(pc::engine_kind::cpu, 0);
  return e;
}
dnnl::engine& onednn_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// matmul 128x768x3072 (a transformer FFN layer), plain row-major.
constexpr std::int64_t kM = 128, kN = 768, kK = 3072;
// ResNet-50 conv3_x 3x3 128 -> 128 at 28x28, blocked activations.
constexpr std::int64_t kC = 128, kHW = 28;

pc::primitive pc_matmul() {
  using tag = pc::format_tag;
  pc::memory::desc a({kM, kK}, pc::data_type::f32, tag::ab);
  pc::memory::desc b({kK, kN}, pc::data_type::f32, tag::ab);
  pc::memory::desc c({kM, kN}, pc::data_type::f32, tag::ab);
  return pc::matmul(pc::matmul::primitive_desc(pc::matmul::desc(a, b, c), pc_cpu()));
}

pc::convolution_forward::primitive_desc pc_conv_pd() {
  using tag = pc::format_tag;
  pc::memory::desc src({1, kC, kHW, kHW}, pc::data_type::f32, tag::nChw16c);
  pc::memory::desc wei({kC, kC, 3, 3}, pc::data_type::f32, tag::any);
  pc::memory::desc bias({kC}, pc::data_type::f32, tag::a);
  pc::memory::desc dst({1, kC, kHW, kHW}, pc::data_type::f32, tag::nChw16c);
  return pc::convolution_forward::primitive_desc(
      pc::convolution_forward::desc(pc::prop_kind::forward_inference,
                                    pc::algorithm::convolution_direct, src, wei, bias, dst, {1, 1},
                                    {1, 1}, {1, 1}),
      pc_cpu());
}
pc::primitive pc_conv() {
  return pc::convolution_forward(pc_conv_pd());
}

dnnl::primitive dnnl_matmul() {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::memory::desc a({kM, kK}, dt::f32, tag::ab);
  dnnl::memory::desc b({kK, kN}, dt::f32, tag::ab);
  dnnl::memory::desc c({kM, kN}, dt::f32, tag::ab);
  return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), onednn_engine()));
}

dnnl::convolution_forward::primitive_desc dnnl_conv_pd() {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::memory::desc src({1, kC, kHW, kHW}, dt::f32, tag::nChw16c);
  dnnl::memory::desc wei({kC, kC, 3, 3}, dt::f32, tag::any);
  dnnl::memory::desc bias({kC}, dt::f32, tag::a);
  dnnl::memory::desc dst({1, kC, kHW, kHW}, dt::f32, tag::nChw16c);
  return dnnl::convolution_forward::primitive_desc(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, src, wei, bias, dst,
                                      {1, 1}, {1, 1}, {1, 1}),
      onednn_engine());
}
dnnl::primitive dnnl_conv() {
  return dnnl::convolution_forward(dnnl_conv_pd());
}

template <typename Make>
void create_hit(benchmark::State& state, Make make) {
  benchmark::DoNotOptimize(make());  // warm the cache
  for (auto _ : state) benchmark::DoNotOptimize(make());
  state.SetItemsProcessed(state.iterations());
}

void BM_CreateHit_primcache_matmul(benchmark::State& s) {
  create_hit(s, pc_matmul);
}
void BM_CreateHit_onednn_matmul(benchmark::State& s) {
  create_hit(s, dnnl_matmul);
}
void BM_CreateHit_primcache_conv(benchmark::State& s) {
  create_hit(s, pc_conv);
}
void BM_CreateHit_onednn_conv(benchmark::State& s) {
  create_hit(s, dnnl_conv);
}

void BM_CreateHitFromPd_primcache_conv(benchmark::State& s) {
  auto pd = pc_conv_pd();
  create_hit(s, [&] { return pc::convolution_forward(pd); });
}
void BM_CreateHitFromPd_onednn_conv(benchmark::State& s) {
  auto pd = dnnl_conv_pd();
  create_hit(s, [&] { return dnnl::convolution_forward(pd); });
}

// Each iteration clears the cache (outside the timing) and creates afresh.
template <typename Make, typename Clear>
void create_miss(benchmark::State& state, Make make, Clear clear) {
  for (auto _ : state) {
    state.PauseTiming();
    clear();
    state.ResumeTiming();
    benchmark::DoNotOptimize(make());
  }
  state.SetItemsProcessed(state.iterations());
}
void pc_clear() {
  pc::set_primitive_cache_capacity(0);
  pc::set_primitive_cache_capacity(1024);
}
void dnnl_clear() {
  dnnl::set_primitive_cache_capacity(0);
  dnnl::set_primitive_cache_capacity(1024);
}
// Each iteration's primitive waits for its specialized kernel outside the
// timing, so no background compilation of an earlier iteration competes
// with the next creation.
template <typename Make>
void create_miss_in_mode(benchmark::State& state, pc::jit_mode mode, Make make) {
  const pc::jit_mode saved = pc::get_jit_mode();
  pc::set_jit_mode(mode);
  // The generic kernels' code is linked into the JIT on first use (once per
  // process): not a creation's cost.
  make().wait_until_specialized();
  for (auto _ : state) {
    state.PauseTiming();
    pc_clear();
    state.ResumeTiming();
    pc::primitive p = make();
    state.PauseTiming();
    p.wait_until_specialized();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations());
  pc::set_jit_mode(saved);
}
void BM_CreateMiss_primcache_sync_matmul(benchmark::State& s) {
  create_miss_in_mode(s, pc::jit_mode::sync, pc_matmul);
}
void BM_CreateMiss_primcache_tiered_matmul(benchmark::State& s) {
  create_miss_in_mode(s, pc::jit_mode::tiered, pc_matmul);
}
// From a tiered creation's start until the pool has installed the
// specialized kernel (polled every 50 us: waiting with
// wait_until_specialized would compile on this thread instead).
void BM_TimeToSpecialized_matmul(benchmark::State& state) {
  const pc::jit_mode saved = pc::get_jit_mode();
  pc::set_jit_mode(pc::jit_mode::tiered);
  pc_matmul().wait_until_specialized();
  for (auto _ : state) {
    state.PauseTiming();
    pc_clear();
    state.ResumeTiming();
    pc::primitive p = pc_matmul();
    while (!p.specialized()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  state.SetItemsProcessed(state.iterations());
  pc::set_jit_mode(saved);
}
void BM_CreateMiss_onednn_matmul(benchmark::State& s) {
  create_miss(s, dnnl_matmul, dnnl_clear);
}
void BM_CreateMiss_primcache_sync_conv(benchmark::State& s) {
  create_miss_in_mode(s, pc::jit_mode::sync, pc_conv);
}
void BM_CreateMiss_primcache_tiered_conv(benchmark::State& s) {
  create_miss_in_mode(s, pc::jit_mode::tiered, pc_conv);
}
void BM_TimeToSpecialized_conv(benchmark::State& state) {
  const pc::jit_mode saved = pc::get_jit_mode();
  pc::set_jit_mode(pc::jit_mode::tiered);
  pc_conv().wait_until_specialized();
  for (auto _ : state) {
    state.PauseTiming();
    pc_clear();
    state.ResumeTiming();
    pc::primitive p = pc_conv();
    while (!p.specialized()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  state.SetItemsProcessed(state.iterations());
  pc::set_jit_mode(saved);
}
void BM_CreateMiss_onednn_conv(benchmark::State& s) {
  create_miss(s, dnnl_conv, dnnl_clear);
}

// An eltwise (gelu_erf) and a reorder (nchw to nhwc) of ResNet-50's
// conv2_x activations, 1x64x56x56 f32: the walks' tiered creation.
pc::primitive pc_eltwise() {
  pc::memory::desc md({1, 64, 56, 56}, pc::data_type::f32, pc::format_tag::nchw);
  return pc::eltwise_forward(pc::eltwise_forward::primitive_desc(
      pc::eltwise_forward::desc(pc::prop_kind::forward_inference, pc::algorithm::eltwise_gelu_erf,
                                md),
      pc_cpu()));
}
pc::primitive pc_reorder() {
  pc::memory::desc from({1, 64, 56, 56}, pc::data_type::f32, pc::format_tag::nchw);
  pc::memory::desc to({1, 64, 56, 56}, pc::data_type::f32, pc::format_tag::nhwc);
  return pc::reorder(pc::reorder::primitive_desc(pc_cpu(), from, pc_cpu(), to));
}
dnnl::primitive dnnl_eltwise() {
  using tag = dnnl::memory::format_tag;
  dnnl::memory::desc md({1, 64, 56, 56}, dnnl::memory::data_type::f32, tag::nchw);
  return dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference,
                                  dnnl::algorithm::eltwise_gelu_erf, md),
      onednn_engine()));
}
dnnl::primitive dnnl_reorder() {
  using tag = dnnl::memory::format_tag;
  dnnl::memory::desc from({1, 64, 56, 56}, dnnl::memory::data_type::f32, tag::nchw);
  dnnl::memory::desc to({1, 64, 56, 56}, dnnl::memory::data_type::f32, tag::nhwc);
  return dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), from, onednn_engine(), to));
}
void BM_CreateMiss_primcache_sync_eltwise(benchmark::State& s) {
  create_miss_in_mode(s, pc::jit_mode::sync, pc_eltwise);
}
void BM_CreateMiss_primcache_tiered_eltwise(benchmark::State& s) {
  create_miss_in_mode(s, pc::jit_mode::tiered, pc_eltwise);
}
void BM_CreateMiss_onednn_eltwise(benchmark::State& s) {
  create_miss(s, dnnl_eltwise, dnnl_clear);
}
void BM_CreateMiss_primcache_sync_reorder(benchmark::State& s) {
  create_miss_in_mode(s, pc::jit_mode::sync, pc_reorder);
}
void BM_CreateMiss_primcache_tiered_reorder(benchmark::State& s) {
  create_miss_in_mode(s, pc::jit_mode::tiered, pc_reorder);
}
void BM_CreateMiss_onednn_reorder(benchmark::State& s) {
  create_miss(s, dnnl_reorder, dnnl_clear);
}

}  // namespace

BENCHMARK(BM_CreateHit_primcache_matmul)->Name("BM_CreateHit/primcache/matmul");
BENCHMARK(BM_CreateHit_onednn_matmul)->Name("BM_CreateHit/onednn/matmul");
BENCHMARK(BM_CreateHit_primcache_conv)->Name("BM_CreateHit/primcache/conv3x3");
BENCHMARK(BM_CreateHit_onednn_conv)->Name("BM_CreateHit/onednn/conv3x3");
BENCHMARK(BM_CreateHitFromPd_primcache_conv)->Name("BM_CreateHitFromPd/primcache/conv3x3");
BENCHMARK(BM_CreateHitFromPd_onednn_conv)->Name("BM_CreateHitFromPd/onednn/conv3x3");
BENCHMARK(BM_CreateMiss_primcache_sync_matmul)
    ->Name("BM_CreateMiss/primcache_sync/matmul")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_CreateMiss_primcache_tiered_matmul)
    ->Name("BM_CreateMiss/primcache_tiered/matmul")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_TimeToSpecialized_matmul)
    ->Name("BM_TimeToSpecialized/primcache_tiered/matmul")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_CreateMiss_onednn_matmul)
    ->Name("BM_CreateMiss/onednn/matmul")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_CreateMiss_primcache_sync_conv)
    ->Name("BM_CreateMiss/primcache_sync/conv3x3")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_CreateMiss_primcache_tiered_conv)
    ->Name("BM_CreateMiss/primcache_tiered/conv3x3")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_TimeToSpecialized_conv)
    ->Name("BM_TimeToSpecialized/primcache_tiered/conv3x3")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_CreateMiss_onednn_conv)
    ->Name("BM_CreateMiss/onednn/conv3x3")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

BENCHMARK(BM_CreateMiss_primcache_sync_eltwise)
    ->Name("BM_CreateMiss/primcache_sync/eltwise_gelu")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_CreateMiss_primcache_tiered_eltwise)
    ->Name("BM_CreateMiss/primcache_tiered/eltwise_gelu")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_CreateMiss_onednn_eltwise)
    ->Name("BM_CreateMiss/onednn/eltwise_gelu")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_CreateMiss_primcache_sync_reorder)
    ->Name("BM_CreateMiss/primcache_sync/reorder_nchw_nhwc")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_CreateMiss_primcache_tiered_reorder)
    ->Name("BM_CreateMiss/primcache_tiered/reorder_nchw_nhwc")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_CreateMiss_onednn_reorder)
    ->Name("BM_CreateMiss/onednn/reorder_nchw_nhwc")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

BENCHMARK_MAIN();
