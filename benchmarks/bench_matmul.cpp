// bench_matmul — f32 matmul: primcache's matmul primitive against oneDNN 2.6 and
// OpenBLAS (cblas_sgemm), same shapes, same thread count, same binary.
//
//   BM_Matmul/<impl>/<M>x<N>x<K>/threads:<t>    impl: primcache, primcache_generic, onednn,
//                                                openblas
//
// primcache runs the specialized kernel (the primitive waits until it is
// installed: wait_until_specialized). primcache_generic runs the
// shape-generic kernel built into the library, which a tiered primitive runs
// until then; it is called through the backend's kernel interface (the
// public API swaps it out within milliseconds), so it skips the primitive's
// argument checks, a microsecond or two per call.
//
// The GFLOPS column counts 2*M*N*K*batch floating-point operations per
// iteration. Every implementation gets its setup (primitive creation and
// compilation) outside the timed loop; weights are plain
// row-major in every case, so each side packs them inside the timed call as
// it sees fit. Thread counts: 1 and all cores (the runtime's pool for
// primcache, OpenMP for oneDNN, OpenBLAS's own pool). Run with
// OMP_WAIT_POLICY=PASSIVE so idle OpenMP threads do not steal the cores the
// other implementations run on.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/generic_matmul_kernel.hpp"
#include "kernels/matmul_kernel.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/runtime.hpp"

namespace {

struct shape {
  std::int64_t m, n, k;
  std::string name() const {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  }
};

const shape kShapes[] = {{64, 64, 64},    {256, 256, 256},  {1024, 1024, 1024}, {2048, 2048, 2048},
                         {1, 4096, 4096}, {128, 768, 3072}, {384, 1024, 1024},  {49, 2048, 512}};

struct operands {
  explicit operands(const shape& s)
      : a(static_cast<std::size_t>(s.m * s.k)),
        b(static_cast<std::size_t>(s.k * s.n)),
        c(static_cast<std::size_t>(s.m * s.n)) {
    std::mt19937 gen(7);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (float& x : a) x = dist(gen);
    for (float& x : b) x = dist(gen);
  }
  std::vector<float> a, b, c;
};

void set_flops(benchmark::State& state, const shape& s) {
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * s.m * s.n * s.k, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}

// oneDNN runs on the OpenMP runtime it was built with; its thread count is
// set through that runtime, found in the process rather than linked
// directly (the benchmark does not depend on which OpenMP it is).
void set_omp_threads(int n) {
  using fn = void (*)(int);
  static fn set = reinterpret_cast<fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set != nullptr) set(n);
}

// Through the public API, as a user runs it: a cached matmul primitive
// executed on a stream (the argument map lookup and scratchpad hand-out are
// part of each iteration).
// With `gelu`, a gelu_erf post-op (BM_MatmulGelu): the epilogue a
// transformer's FFN runs on each tile.
void bm_primcache(benchmark::State& state, shape s, int threads, bool gelu) {
  namespace pc = primcache;
  pc::set_num_threads(threads);
  static pc::engine eng(pc::engine_kind::cpu, 0);
  pc::memory::desc a_md({s.m, s.k}, pc::data_type::f32, pc::format_tag::ab);
  pc::memory::desc b_md({s.k, s.n}, pc::data_type::f32, pc::format_tag::ab);
  pc::memory::desc c_md({s.m, s.n}, pc::data_type::f32, pc::format_tag::ab);
  pc::primitive_attr attr;
  if (gelu) {
    pc::post_ops ops;
    ops.append_eltwise(1.f, pc::algorithm::eltwise_gelu_erf, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  pc::matmul prim;
  try {
    prim = pc::matmul(pc::matmul::primitive_desc(pc::matmul::desc(a_md, b_md, c_md), attr, eng));
  } catch (const pc::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  // A tiered creation starts on the generic kernel: measure the specialized.
  prim.wait_until_specialized();
  operands o(s);
  pc::stream strm(eng);
  const pc::primitive::args args = {{PRIMCACHE_ARG_SRC, pc::memory(a_md, eng, o.a.data())},
                                    {PRIMCACHE_ARG_WEIGHTS, pc::memory(b_md, eng, o.b.data())},
                                    {PRIMCACHE_ARG_DST, pc::memory(c_md, eng, o.c.data())}};
  for (auto _ : state) {
    prim.execute(strm, args);
    benchmark::DoNotOptimize(o.c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, s);
}

// The generic kernel a tiered primitive runs before the swap, on the
// runtime's pool, with the configuration the primitive would give it.
void bm_primcache_generic(benchmark::State& state, shape s, int threads) {
  namespace pc = primcache;
  namespace ci = primcache::cpu_internal;
  pc::set_num_threads(threads);
  const pc::cpu_isa isa = pc::effective_isa();
  ci::matmul_problem p = ci::matmul_problem::dense(1, s.m, s.n, s.k);
  p.nthr = threads;
  auto kernel = ci::generic_matmul_kernel::create(p, ci::default_matmul_config(p, isa), isa);
  if (!kernel) {
    state.SkipWithError(kernel.why().message.c_str());
    return;
  }
  operands o(s);
  std::vector<std::byte> scratch(kernel.value()->scratchpad_bytes() + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(scratch.data()) + 63) &
                                          ~std::uintptr_t{63});
  ci::matmul_args args;
  args.src = o.a.data();
  args.weights = o.b.data();
  args.dst = o.c.data();
  for (auto _ : state) {
    kernel.value()->execute(args, aligned, pc::default_thread_pool());
    benchmark::DoNotOptimize(o.c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, s);
}

void bm_onednn(benchmark::State& state, shape s, int threads, bool gelu) {
  set_omp_threads(threads);
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  dnnl::memory::desc a_md({s.m, s.k}, dt::f32, tag::ab);
  dnnl::memory::desc b_md({s.k, s.n}, dt::f32, tag::ab);
  dnnl::memory::desc c_md({s.m, s.n}, dt::f32, tag::ab);
  dnnl::primitive_attr attr;
  if (gelu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, eng);
  dnnl::matmul prim(pd);
  operands o(s);
  dnnl::memory a(a_md, eng, o.a.data());
  dnnl::memory b(b_md, eng, o.b.data());
  dnnl::memory c(c_md, eng, o.c.data());
  for (auto _ : state) {
    prim.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    strm.wait();
    benchmark::DoNotOptimize(o.c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, s);
  state.SetLabel(pd.impl_info_str());
}

void bm_openblas(benchmark::State& state, shape s, int threads) {
  openblas_set_num_threads(threads);
  operands o(s);
  const auto m = static_cast<blasint>(s.m);
  const auto n = static_cast<blasint>(s.n);
  const auto k = static_cast<blasint>(s.k);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.f, o.a.data(), k, o.b.data(),
                n, 0.f, o.c.data(), n);
    benchmark::DoNotOptimize(o.c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, s);
}

void register_all() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  std::vector<int> threads = {1};
  if (cores > 1) threads.push_back(cores);
  for (const shape& s : kShapes) {
    for (int t : threads) {
      const std::string suffix = "/" + s.name() + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(("BM_Matmul/primcache" + suffix).c_str(), bm_primcache, s, t,
                                   false)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("BM_Matmul/primcache_generic" + suffix).c_str(),
                                   bm_primcache_generic, s, t)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("BM_Matmul/onednn" + suffix).c_str(), bm_onednn, s, t, false)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("BM_Matmul/openblas" + suffix).c_str(), bm_openblas, s, t)
          ->UseRealTime();
    }
  }
  // A gelu_erf post-op on primcached's default workload's shape and a
  // transformer FFN's.
  for (const shape& s : {shape{128, 128, 512}, shape{128, 768, 3072}}) {
    for (int t : threads) {
      const std::string suffix = "/" + s.name() + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(("BM_MatmulGelu/primcache" + suffix).c_str(), bm_primcache, s, t,
                                   true)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("BM_MatmulGelu/onednn" + suffix).c_str(), bm_onednn, s, t, true)
          ->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
