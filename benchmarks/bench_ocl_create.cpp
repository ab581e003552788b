// bench_ocl_create — what creating an OpenCL matmul costs, each figure timed
// from creation through the first execution until stream::wait() returns
// (PoCL compiles a kernel's work-group function at its first run):
//
//   BM_OclCreate/source_build  primitive cache off: OpenCL C compiled, the
//                              kernel launched once to capture its binary,
//                              the binary realized in the engine's context
//   BM_OclCreate/from_binary   the cache holds the impl (binary); a new
//                              context (made outside the timing) realizes it:
//                              clCreateProgramWithBinary + build + kernel
//   BM_OclCreate/cache_hit     the cache holds the impl and the engine holds
//                              its realized program (another primitive of the
//                              engine is alive): a cl_kernel and the run
//
//   build/release/benchmarks/bench_ocl_create
//
// POCL_KERNEL_CACHE=0 (set here unless the caller sets it) keeps PoCL's own
// disk cache out of every figure.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/runtime.hpp"

namespace {

using namespace primcache;

const memory::desc kA({256, 256}, data_type::f32, format_tag::ab);
const memory::desc kB({256, 256}, data_type::f32, format_tag::ab);
const memory::desc kC({256, 256}, data_type::f32, format_tag::ab);

void create_and_run(const engine& eng, stream& strm, const memory& a, const memory& b,
                    const memory& c) {
  matmul prim(matmul::primitive_desc(matmul::desc(kA, kB, kC), eng));
  prim.execute(strm, {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, b}, {PRIMCACHE_ARG_DST, c}});
  strm.wait();
}

void bm_source_build(benchmark::State& state) {
  const int capacity = get_primitive_cache_capacity();
  set_primitive_cache_capacity(0);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  memory a(kA, eng), b(kB, eng), c(kC, eng);
  for (auto _ : state) create_and_run(eng, strm, a, b, c);
  set_primitive_cache_capacity(capacity);
}

void bm_from_binary(benchmark::State& state) {
  set_primitive_cache_capacity(1024);
  const engine base(engine_kind::gpu, 0);
  {
    stream strm(base);
    memory a(kA, base), b(kB, base), c(kC, base);
    create_and_run(base, strm, a, b, c);  // the cache now holds the binary
  }
  cl_device_id dev = ocl_interop::get_device(base);
  for (auto _ : state) {
    state.PauseTiming();
    cl_int err = CL_SUCCESS;
    cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) {
      state.SkipWithError("clCreateContext failed");
      break;
    }
    {
      engine eng = ocl_interop::make_engine(dev, ctx);
      stream strm(eng);
      memory a(kA, eng), b(kB, eng), c(kC, eng);
      state.ResumeTiming();
      create_and_run(eng, strm, a, b, c);
      state.PauseTiming();
    }
    clReleaseContext(ctx);
    state.ResumeTiming();
  }
}

void bm_cache_hit(benchmark::State& state) {
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  memory a(kA, eng), b(kB, eng), c(kC, eng);
  // Held for the whole run: the engine keeps the realized program.
  matmul keeper(matmul::primitive_desc(matmul::desc(kA, kB, kC), eng));
  for (auto _ : state) create_and_run(eng, strm, a, b, c);
}

}  // namespace

int main(int argc, char** argv) {
  setenv("POCL_KERNEL_CACHE", "0", /*overwrite=*/0);
  benchmark::RegisterBenchmark("BM_OclCreate/source_build", bm_source_build)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_OclCreate/from_binary", bm_from_binary)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_OclCreate/cache_hit", bm_cache_hit)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
