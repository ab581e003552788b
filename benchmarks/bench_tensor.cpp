// Memory descriptors on the primitive-creation hit path: building one from
// dims, a data type and a format tag, and writing one into a key. primcache
// and oneDNN 2.6 in the same binary and run.
//
//   BM_MemoryDesc/<impl>/<case>      dims + data type + tag -> descriptor
//   BM_MemoryDescKey/primcache/<case> descriptor -> key_writer -> finished key
//
// Both peers get their dims from storage that outlives the loop (a
// std::vector for oneDNN, whose API takes one), so neither pays to build
// the dims list inside the timing.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "primcache/keyhash/key.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace {

namespace pc = primcache;
using dnnl_tag = dnnl::memory::format_tag;
using dnnl_dt = dnnl::memory::data_type;

struct desc_case {
  const char* name;
  std::vector<std::int64_t> dims;
  pc::format_tag pc_tag;
  dnnl_tag onednn_tag;
};

// A transformer FFN activation, a ResNet-50 stage-1 activation (plain and
// blocked), and 3x3 convolution weights (plain and left to the primitive).
const desc_case cases[] = {
    {"ab_128x3072", {128, 3072}, pc::format_tag::ab, dnnl_tag::ab},
    {"nchw_1x64x56x56", {1, 64, 56, 56}, pc::format_tag::nchw, dnnl_tag::nchw},
    {"nChw16c_1x128x28x28", {1, 128, 28, 28}, pc::format_tag::nChw16c, dnnl_tag::nChw16c},
    {"oihw_128x128x3x3", {128, 128, 3, 3}, pc::format_tag::oihw, dnnl_tag::oihw},
    {"any_128x128x3x3", {128, 128, 3, 3}, pc::format_tag::any, dnnl_tag::any},
};

void primcache_desc(benchmark::State& state, const desc_case& c) {
  for (auto _ : state) {
    pc::memory_desc md(c.dims, pc::data_type::f32, c.pc_tag);
    benchmark::DoNotOptimize(md);
  }
  state.SetItemsProcessed(state.iterations());
}

void onednn_desc(benchmark::State& state, const desc_case& c) {
  for (auto _ : state) {
    dnnl::memory::desc md(c.dims, dnnl_dt::f32, c.onednn_tag);
    benchmark::DoNotOptimize(md);
  }
  state.SetItemsProcessed(state.iterations());
}

void primcache_key(benchmark::State& state, const desc_case& c) {
  const pc::memory_desc md(c.dims, pc::data_type::f32, c.pc_tag);
  for (auto _ : state) {
    pc::key_writer w;
    md.write_key(w);
    pc::key k = w.finish();
    benchmark::DoNotOptimize(k);
  }
  state.SetItemsProcessed(state.iterations());
}

// A key writer alone, finished empty: what BM_MemoryDescKey pays besides
// write_key.
void key_baseline(benchmark::State& state) {
  for (auto _ : state) {
    pc::key_writer w;
    pc::key k = w.finish();
    benchmark::DoNotOptimize(k);
  }
  state.SetItemsProcessed(state.iterations());
}

const int registered = [] {
  for (const desc_case& c : cases) {
    const std::string name = c.name;
    benchmark::RegisterBenchmark(("BM_MemoryDesc/primcache/" + name).c_str(), primcache_desc, c);
    benchmark::RegisterBenchmark(("BM_MemoryDesc/onednn/" + name).c_str(), onednn_desc, c);
  }
  for (const desc_case& c : cases) {
    benchmark::RegisterBenchmark(("BM_MemoryDescKey/primcache/" + std::string(c.name)).c_str(),
                                 primcache_key, c);
  }
  benchmark::RegisterBenchmark("BM_MemoryDescKey/baseline/empty_key", key_baseline);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
