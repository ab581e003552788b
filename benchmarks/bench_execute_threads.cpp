// Executions from several user threads at once: each thread executes its own
// primitive (same descriptor, own memory, own stream) through the public API,
// all on the default thread pool, sized 2 (set_num_threads(2), unless
// PRIMCACHE_NUM_THREADS is set) before any primitive is created.
//
//   BM_ExecuteThreads/<op>/real_time/threads:N   N caller threads; items_per_second
//                                                is executions per second, all
//                                                callers together
//
// <op>: eltwise_relu_64KiB (16384 f32, 16x1024 plain), matmul_64 (64x64x64
// f32), matmul_512 (512x512x512 f32, a primitive that uses every pool thread).
// Goal (issue 7): for the small ops, threads:2 reaches 1.8x threads:1's
// items_per_second; matmul_512 no slower than before regions could share the
// pool. The CPU kernels pick their thread count per primitive: the 64^3
// matmul runs on one thread; the eltwise asks the pool for 2 shares when the
// pool has 2 threads (see docs/runtime.md, "Thread pool").
//
// This file also holds the binary's main(); bench_execute_checked.cpp adds
// BM_Execute/checked|unchecked.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "primcache/runtime/runtime.hpp"

namespace {

namespace pc = primcache;

pc::engine& cpu_engine() {
  static pc::engine e(pc::engine_kind::cpu, 0);
  return e;
}

struct exec_case {
  pc::primitive prim;
  std::unordered_map<int, pc::memory> args;
};

void fill(pc::memory& m, std::size_t count, float scale) {
  auto* p = static_cast<float*>(m.get_data_handle());
  for (std::size_t i = 0; i < count; ++i) {
    p[i] = scale * static_cast<float>(static_cast<int>(i % 17) - 8);
  }
}

exec_case eltwise_case() {
  pc::memory::desc md({16, 1024}, pc::data_type::f32, pc::format_tag::ab);
  pc::eltwise_forward prim(pc::eltwise_forward::primitive_desc(
      pc::eltwise_forward::desc(pc::prop_kind::forward_inference, pc::algorithm::eltwise_relu, md),
      cpu_engine()));
  pc::memory src(md, cpu_engine());
  pc::memory dst(md, cpu_engine());
  fill(src, 16 * 1024, 0.5f);
  return {prim, {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}}};
}

exec_case matmul_case(std::int64_t n) {
  pc::memory::desc md({n, n}, pc::data_type::f32, pc::format_tag::ab);
  pc::matmul prim(pc::matmul::primitive_desc(pc::matmul::desc(md, md, md), cpu_engine()));
  pc::memory a(md, cpu_engine());
  pc::memory b(md, cpu_engine());
  pc::memory c(md, cpu_engine());
  fill(a, static_cast<std::size_t>(n * n), 0.25f);
  fill(b, static_cast<std::size_t>(n * n), 0.125f);
  return {prim, {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, b}, {PRIMCACHE_ARG_DST, c}}};
}

// Each benchmark thread makes its own primitive object and memories (the
// impl comes from the primitive cache, shared), then executes it.
template <exec_case (*Make)()>
void BM_ExecuteThreads(benchmark::State& state) {
  exec_case c = Make();
  c.prim.wait_until_specialized();  // a tiered creation starts on the generic kernel
  pc::stream strm(cpu_engine());
  c.prim.execute(strm, c.args);  // warm: first touch of the memories
  for (auto _ : state) {
    c.prim.execute(strm, c.args);
  }
  state.SetItemsProcessed(state.iterations());
}

exec_case matmul_64() {
  return matmul_case(64);
}
exec_case matmul_512() {
  return matmul_case(512);
}

const bool registered = [] {
  benchmark::RegisterBenchmark("BM_ExecuteThreads/eltwise_relu_64KiB",
                               BM_ExecuteThreads<eltwise_case>)
      ->Threads(1)
      ->Threads(2)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_ExecuteThreads/matmul_64", BM_ExecuteThreads<matmul_64>)
      ->Threads(1)
      ->Threads(2)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_ExecuteThreads/matmul_512", BM_ExecuteThreads<matmul_512>)
      ->Threads(1)
      ->Threads(2)
      ->UseRealTime();
  return true;
}();

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("PRIMCACHE_NUM_THREADS") == nullptr) pc::set_num_threads(2);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
