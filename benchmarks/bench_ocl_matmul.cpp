// bench_ocl_matmul — the OpenCL backend's f32 matmul against CLBlast's Gemm
// (the tuned OpenCL BLAS), same shapes as bench_matmul, same device, same
// in-order queue, in one binary. Each iteration enqueues one product and
// waits for the queue (clFinish), so the figure is the device time plus the
// enqueue, for both.
//
//   build/release/benchmarks/bench_ocl_matmul --benchmark_filter=256x256
//
// The primcache/CLBlast ratio (docs/PERFORMANCE.md, "OpenCL matmul against
// CLBlast") is taken within one run, the two interleaved, as medians:
//
//   bench_ocl_matmul --benchmark_filter='BM_OclMatmul/' --benchmark_repetitions=5 \
//       --benchmark_enable_random_interleaving=true --benchmark_min_time=0.3
//
// BM_OclMatmulConstWeights/<mode>/<shape>: the small-M shapes of issue 12
// with the weights marked constant (primitive_attr::set_constant_weights):
// cached (the gpu constant cache unlimited: packed once, then hits),
// uncached (the same matmul without the attribute), disabled (the
// attribute with the gpu cache at capacity 0: the primitive reuses the
// buffer it packed, no pack per call).
//
// --tune-max-nconfigs=N with PRIMCACHE_TUNE=1 and PRIMCACHE_TUNE_TABLE
// fills a tune table, which later runs read (bench_ocl_tune_flag.hpp).
//
// PoCL's own kernel cache is disabled (POCL_KERNEL_CACHE=0) unless the
// caller sets it. PRIMCACHE_OCL_DEVICE picks the device.
#include <benchmark/benchmark.h>

#include <clblast.h>

#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench_ocl_tune_flag.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/runtime.hpp"

namespace {

using namespace primcache;

struct shape {
  std::int64_t m, n, k;
  std::string name() const {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  }
};

const shape kShapes[] = {{64, 64, 64},    {256, 256, 256},  {1024, 1024, 1024}, {2048, 2048, 2048},
                         {1, 4096, 4096}, {128, 768, 3072}, {384, 1024, 1024},  {49, 2048, 512}};

void set_flops(benchmark::State& state, const shape& s) {
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * s.m * s.n * s.k, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}

void fill(const memory& m, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto* p = static_cast<float*>(m.map_data());
  for (std::size_t i = 0; i < m.get_desc().size_bytes() / sizeof(float); ++i) p[i] = dist(gen);
  m.unmap_data(p);
}

struct operands {
  explicit operands(const shape& s, const engine& eng)
      : a_md({s.m, s.k}, data_type::f32, format_tag::ab),
        b_md({s.k, s.n}, data_type::f32, format_tag::ab),
        c_md({s.m, s.n}, data_type::f32, format_tag::ab),
        a(a_md, eng),
        b(b_md, eng),
        c(c_md, eng) {
    fill(a, 1);
    fill(b, 2);
  }
  memory::desc a_md, b_md, c_md;
  memory a, b, c;
};

void bm_primcache(benchmark::State& state, shape s) {
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  operands ops(s, eng);
  matmul prim(matmul::primitive_desc(matmul::desc(ops.a_md, ops.b_md, ops.c_md), eng));
  const std::unordered_map<int, memory> args = {
      {PRIMCACHE_ARG_SRC, ops.a}, {PRIMCACHE_ARG_WEIGHTS, ops.b}, {PRIMCACHE_ARG_DST, ops.c}};
  prim.execute(strm, args);  // warm: the first run may page in the kernel
  strm.wait();
  for (auto _ : state) {
    prim.execute(strm, args);
    strm.wait();
  }
  set_flops(state, s);
}

void bm_clblast(benchmark::State& state, shape s) {
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  operands ops(s, eng);
  cl_command_queue q = ocl_interop::get_queue(strm);
  auto gemm = [&] {
    const auto st = clblast::Gemm<float>(clblast::Layout::kRowMajor, clblast::Transpose::kNo,
                                         clblast::Transpose::kNo, s.m, s.n, s.k, 1.f,
                                         static_cast<cl_mem>(ops.a.get_data_handle()), 0, s.k,
                                         static_cast<cl_mem>(ops.b.get_data_handle()), 0, s.n, 0.f,
                                         static_cast<cl_mem>(ops.c.get_data_handle()), 0, s.n, &q);
    if (st != clblast::StatusCode::kSuccess) {
      throw std::runtime_error("clblast::Gemm failed: " + std::to_string(static_cast<int>(st)));
    }
  };
  gemm();  // CLBlast compiles its kernels at the first call
  strm.wait();
  for (auto _ : state) {
    gemm();
    strm.wait();
  }
  set_flops(state, s);
}

enum class const_mode { cached, uncached, disabled };

void bm_const_weights(benchmark::State& state, shape s, const_mode mode) {
  set_constant_tensor_cache_capacity(
      engine_kind::gpu, mode == const_mode::disabled ? 0 : constant_tensor_cache_unlimited);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  operands ops(s, eng);
  primitive_attr attr;
  attr.set_constant_weights(mode != const_mode::uncached);
  matmul prim(matmul::primitive_desc(matmul::desc(ops.a_md, ops.b_md, ops.c_md), attr, eng));
  const std::unordered_map<int, memory> args = {
      {PRIMCACHE_ARG_SRC, ops.a}, {PRIMCACHE_ARG_WEIGHTS, ops.b}, {PRIMCACHE_ARG_DST, ops.c}};
  prim.execute(strm, args);  // warm: packs the weights (constant modes)
  strm.wait();
  const auto packs = ocl_interop::get_program_counts().weights_packs;
  for (auto _ : state) {
    prim.execute(strm, args);
    strm.wait();
  }
  state.counters["packs"] =
      static_cast<double>(ocl_interop::get_program_counts().weights_packs - packs);
  set_flops(state, s);
  set_constant_tensor_cache_capacity(engine_kind::gpu, constant_tensor_cache_unlimited);
}

}  // namespace

int main(int argc, char** argv) {
  setenv("POCL_KERNEL_CACHE", "0", /*overwrite=*/0);
  for (const shape& s : kShapes) {
    benchmark::RegisterBenchmark(("BM_OclMatmul/primcache/" + s.name()).c_str(), bm_primcache, s)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_OclMatmul/clblast/" + s.name()).c_str(), bm_clblast, s)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (const shape& s : {shape{1, 4096, 4096}, shape{49, 2048, 512}, shape{128, 768, 3072}}) {
    for (auto [name, mode] :
         {std::pair{"cached", const_mode::cached}, std::pair{"uncached", const_mode::uncached},
          std::pair{"disabled", const_mode::disabled}}) {
      const const_mode m = mode;
      benchmark::RegisterBenchmark(
          ("BM_OclMatmulConstWeights/" + std::string(name) + "/" + s.name()).c_str(),
          [s, m](benchmark::State& state) { bm_const_weights(state, s, m); })
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
