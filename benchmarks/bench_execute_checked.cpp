// What execute()'s argument checks cost: the same primitive executed through
// primitive::execute (every argument checked against the primitive
// descriptor) and through backend::execute_unchecked (the checks
// skipped), with oneDNN 2.6's execute of the same operation beside them.
//
//   BM_Execute/checked/<op>     primitive::execute
//   BM_Execute/unchecked/<op>   the same call without the checks
//   BM_Execute/onednn/<op>      oneDNN's primitive::execute
//
// <op>: eltwise_relu_64KiB (16384 f32, plain) and matmul_64 (64x64x64 f32).
// Goal (issue 7): checked within 5% of unchecked.
#include <benchmark/benchmark.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/runtime.hpp"

namespace {

namespace pc = primcache;

struct pc_case {
  pc::primitive prim;
  std::unordered_map<int, pc::memory> args;
};

pc::engine& pc_cpu() {
  static pc::engine e(pc::engine_kind::cpu, 0);
  return e;
}

pc_case pc_eltwise() {
  pc::memory::desc md({16, 1024}, pc::data_type::f32, pc::format_tag::ab);
  pc::eltwise_forward prim(pc::eltwise_forward::primitive_desc(
      pc::eltwise_forward::desc(pc::prop_kind::forward_inference, pc::algorithm::eltwise_relu, md),
      pc_cpu()));
  return {prim,
          {{PRIMCACHE_ARG_SRC, pc::memory(md, pc_cpu())},
           {PRIMCACHE_ARG_DST, pc::memory(md, pc_cpu())}}};
}

pc_case pc_matmul() {
  pc::memory::desc md({64, 64}, pc::data_type::f32, pc::format_tag::ab);
  pc::matmul prim(pc::matmul::primitive_desc(pc::matmul::desc(md, md, md), pc_cpu()));
  return {prim,
          {{PRIMCACHE_ARG_SRC, pc::memory(md, pc_cpu())},
           {PRIMCACHE_ARG_WEIGHTS, pc::memory(md, pc_cpu())},
           {PRIMCACHE_ARG_DST, pc::memory(md, pc_cpu())}}};
}

template <bool Checked>
void BM_Execute(benchmark::State& state, pc_case (*make)()) {
  pc_case c = make();
  c.prim.wait_until_specialized();  // a tiered creation starts on the generic kernel
  pc::stream strm(pc_cpu());
  for (auto _ : state) {
    if constexpr (Checked) {
      c.prim.execute(strm, c.args);
    } else {
      pc::backend::execute_unchecked(c.prim, strm, c.args);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

struct onednn_case {
  dnnl::primitive prim;
  std::unordered_map<int, dnnl::memory> args;
};

dnnl::engine& onednn_cpu() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

onednn_case onednn_eltwise() {
  dnnl::memory::desc md({16, 1024}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  dnnl::eltwise_forward prim(dnnl::eltwise_forward::primitive_desc(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_relu,
                                  md),
      onednn_cpu()));
  return {prim,
          {{DNNL_ARG_SRC, dnnl::memory(md, onednn_cpu())},
           {DNNL_ARG_DST, dnnl::memory(md, onednn_cpu())}}};
}

onednn_case onednn_matmul() {
  dnnl::memory::desc md({64, 64}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), onednn_cpu()));
  return {prim,
          {{DNNL_ARG_SRC, dnnl::memory(md, onednn_cpu())},
           {DNNL_ARG_WEIGHTS, dnnl::memory(md, onednn_cpu())},
           {DNNL_ARG_DST, dnnl::memory(md, onednn_cpu())}}};
}

void BM_ExecuteOnednn(benchmark::State& state, onednn_case (*make)()) {
  onednn_case c = make();
  dnnl::stream strm(onednn_cpu());
  for (auto _ : state) {
    c.prim.execute(strm, c.args);
    strm.wait();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

// Interleaved registration: checked and unchecked of one op run back to
// back, so drift on a shared machine hits both alike.
const bool registered = [] {
  benchmark::RegisterBenchmark("BM_Execute/checked/eltwise_relu_64KiB", BM_Execute<true>,
                               pc_eltwise);
  benchmark::RegisterBenchmark("BM_Execute/unchecked/eltwise_relu_64KiB", BM_Execute<false>,
                               pc_eltwise);
  benchmark::RegisterBenchmark("BM_Execute/onednn/eltwise_relu_64KiB", BM_ExecuteOnednn,
                               onednn_eltwise);
  benchmark::RegisterBenchmark("BM_Execute/checked/matmul_64", BM_Execute<true>, pc_matmul);
  benchmark::RegisterBenchmark("BM_Execute/unchecked/matmul_64", BM_Execute<false>, pc_matmul);
  benchmark::RegisterBenchmark("BM_Execute/onednn/matmul_64", BM_ExecuteOnednn, onednn_matmul);
  return true;
}();

}  // namespace
