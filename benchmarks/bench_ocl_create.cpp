// bench_ocl_create — what creating an OpenCL primitive costs (a matmul
// 256^3, and the 3x3 64->64 56x56 ResNet-50 convolution in nhwc), each
// figure timed from creation through the first execution until
// stream::wait() returns (PoCL compiles a kernel's work-group function at
// its first run):
//
//   BM_OclCreate/source_build/<op>  primitive cache off: OpenCL C compiled,
//                                   the kernel launched once to capture its
//                                   binary, the binary realized in the
//                                   engine's context
//   BM_OclCreate/from_binary/<op>   the cache holds the impl (binary); a new
//                                   context (made outside the timing)
//                                   realizes it: clCreateProgramWithBinary +
//                                   build + kernel
//   BM_OclCreate/cache_hit/<op>     the cache holds the impl and the engine
//                                   holds its realized program (another
//                                   primitive of the engine is alive): a
//                                   cl_kernel and the run
//
//   build/release/benchmarks/bench_ocl_create
//
// POCL_KERNEL_CACHE=0 (set here unless the caller sets it) keeps PoCL's own
// disk cache out of every figure.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <unordered_map>

#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/runtime.hpp"

namespace {

using namespace primcache;

// One primitive to create: its descriptors, its tensors on an engine, and
// its primitive descriptor.
struct matmul_case {
  static constexpr const char* name = "matmul";
  memory::desc a{{256, 256}, data_type::f32, format_tag::ab};
  memory::desc b{{256, 256}, data_type::f32, format_tag::ab};
  memory::desc c{{256, 256}, data_type::f32, format_tag::ab};
  primitive_desc pd(const engine& eng) const {
    return matmul::primitive_desc(matmul::desc(a, b, c), eng);
  }
  std::unordered_map<int, memory> tensors(const engine& eng) const {
    return {{PRIMCACHE_ARG_SRC, memory(a, eng)},
            {PRIMCACHE_ARG_WEIGHTS, memory(b, eng)},
            {PRIMCACHE_ARG_DST, memory(c, eng)}};
  }
};

struct conv_case {
  static constexpr const char* name = "conv";
  memory::desc src{{1, 64, 56, 56}, data_type::f32, format_tag::nhwc};
  memory::desc wei{{64, 64, 3, 3}, data_type::f32, format_tag::hwio};
  memory::desc bias{{64}, data_type::f32, format_tag::a};
  memory::desc dst{{1, 64, 56, 56}, data_type::f32, format_tag::nhwc};
  primitive_desc pd(const engine& eng) const {
    return convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, src,
                                  wei, bias, dst, {1, 1}, {1, 1}, {1, 1}),
        eng);
  }
  std::unordered_map<int, memory> tensors(const engine& eng) const {
    return {{PRIMCACHE_ARG_SRC, memory(src, eng)},
            {PRIMCACHE_ARG_WEIGHTS, memory(wei, eng)},
            {PRIMCACHE_ARG_BIAS, memory(bias, eng)},
            {PRIMCACHE_ARG_DST, memory(dst, eng)}};
  }
};

template <class Case>
void create_and_run(const Case& c, const engine& eng, stream& strm,
                    const std::unordered_map<int, memory>& args) {
  primitive prim(c.pd(eng));
  prim.execute(strm, args);
  strm.wait();
}

template <class Case>
void bm_source_build(benchmark::State& state) {
  const Case c;
  const int capacity = get_primitive_cache_capacity();
  set_primitive_cache_capacity(0);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const auto args = c.tensors(eng);
  for (auto _ : state) create_and_run(c, eng, strm, args);
  set_primitive_cache_capacity(capacity);
}

template <class Case>
void bm_from_binary(benchmark::State& state) {
  const Case c;
  set_primitive_cache_capacity(1024);
  const engine base(engine_kind::gpu, 0);
  {
    stream strm(base);
    create_and_run(c, base, strm, c.tensors(base));  // the cache now holds the binary
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
      const auto args = c.tensors(eng);
      state.ResumeTiming();
      create_and_run(c, eng, strm, args);
      state.PauseTiming();
    }
    clReleaseContext(ctx);
    state.ResumeTiming();
  }
}

template <class Case>
void bm_cache_hit(benchmark::State& state) {
  const Case c;
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const auto args = c.tensors(eng);
  // Held for the whole run: the engine keeps the realized program.
  primitive keeper(c.pd(eng));
  for (auto _ : state) create_and_run(c, eng, strm, args);
}

template <class Case>
void register_case() {
  const std::string op = Case::name;
  benchmark::RegisterBenchmark(("BM_OclCreate/source_build/" + op).c_str(), bm_source_build<Case>)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(("BM_OclCreate/from_binary/" + op).c_str(), bm_from_binary<Case>)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(("BM_OclCreate/cache_hit/" + op).c_str(), bm_cache_hit<Case>)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  setenv("POCL_KERNEL_CACHE", "0", /*overwrite=*/0);
  register_case<matmul_case>();
  register_case<conv_case>();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
