// Reorder throughput: primcache's reorder primitive, oneDNN 2.6's reorder
// and a memcpy of the same number of bytes (the hand-written baseline), in
// one binary and one run. Counters: bytes_per_second counts the bytes read
// plus the bytes written.
//
// BM_Reorder/primcache creates its primitive in sync mode, so it measures
// the specialized kernel. BM_Reorder/primcache_generic: the shape-generic
// walk a tiered reorder runs until its specialized kernel is installed
// (kernels/generic_reorder_kernel.hpp), on the same problem, tensors and
// thread pool, with the configuration the primitive's heuristic gives.
// BM_Eltwise/primcache and BM_Eltwise/primcache_generic: the same pair for
// the eltwise (kernels/generic_eltwise_kernel.hpp), which shares the walk,
// on values drawn from N(0, 1).
// The last six reorder cases and the last eltwise case have padding
// (channels not a multiple of the block: dst's padding written as zero).
// BM_EltwiseGelu/{primcache,onednn}/{erf,tanh}/{narrow,wide}: the two
// gelus over 128x3072 f32 values drawn from a normal distribution of
// standard deviation 1 (narrow: normalized activations) or 8 (wide: sums
// like a matmul's over a few hundred products, whose tails past +-10
// reach the functions' subnormal ranges), against oneDNN's gelus.
//
//   OMP_WAIT_POLICY=PASSIVE build/<dir>/benchmarks/bench_reorder
//
// Arguments: the thread count (1 or 2), the same for both libraries (ours
// via set_num_threads (the runtime's pool), oneDNN's OpenMP via
// omp_set_num_threads, looked up in the OpenMP runtime libdnnl loads).
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/eltwise_config.hpp"
#include "kernels/generic_eltwise_kernel.hpp"
#include "kernels/generic_reorder_kernel.hpp"
#include "kernels/reorder_config.hpp"
#include "primcache/runtime/runtime.hpp"

namespace {

using primcache::data_type;
using primcache::format_tag;

struct reorder_case {
  std::string name;
  std::vector<std::int64_t> dims;
  data_type src_dt;
  format_tag src_tag;
  data_type dst_dt;
  format_tag dst_tag;
  bool scale;
};

const std::vector<reorder_case>& cases() {
  static const std::vector<reorder_case> c = {
      {"f32_nchw_to_nhwc_1x64x56x56",
       {1, 64, 56, 56},
       data_type::f32,
       format_tag::nchw,
       data_type::f32,
       format_tag::nhwc,
       false},
      {"f32_nhwc_to_nchw_1x64x56x56",
       {1, 64, 56, 56},
       data_type::f32,
       format_tag::nhwc,
       data_type::f32,
       format_tag::nchw,
       false},
      {"f32_nchw_to_nhwc_1x256x56x56",
       {1, 256, 56, 56},
       data_type::f32,
       format_tag::nchw,
       data_type::f32,
       format_tag::nhwc,
       false},
      {"f32_nhwc_to_nchw_1x256x56x56",
       {1, 256, 56, 56},
       data_type::f32,
       format_tag::nhwc,
       data_type::f32,
       format_tag::nchw,
       false},
      {"f32_nchw_to_nChw16c_1x64x56x56",
       {1, 64, 56, 56},
       data_type::f32,
       format_tag::nchw,
       data_type::f32,
       format_tag::nChw16c,
       false},
      {"f32_to_bf16_16M",
       {16 * 1024 * 1024},
       data_type::f32,
       format_tag::a,
       data_type::bf16,
       format_tag::a,
       false},
      {"f32_to_s8_scaled_16M",
       {16 * 1024 * 1024},
       data_type::f32,
       format_tag::a,
       data_type::s8,
       format_tag::a,
       true},
      {"f32_copy_16M",
       {16 * 1024 * 1024},
       data_type::f32,
       format_tag::a,
       data_type::f32,
       format_tag::a,
       false},
      // Padded: channels not a multiple of the block (a first layer's input).
      {"f32_nchw_to_nChw16c_1x3x224x224",
       {1, 3, 224, 224},
       data_type::f32,
       format_tag::nchw,
       data_type::f32,
       format_tag::nChw16c,
       false},
      {"f32_nChw16c_to_nchw_1x17x56x56",
       {1, 17, 56, 56},
       data_type::f32,
       format_tag::nChw16c,
       data_type::f32,
       format_tag::nchw,
       false},
      {"f32_to_bf16_nchw_to_nChw8c_1x50x56x56",
       {1, 50, 56, 56},
       data_type::f32,
       format_tag::nchw,
       data_type::bf16,
       format_tag::nChw8c,
       false},
      // Padded in both layouts: the blocks and the pixels after them walked
      // as one loop (a conversion between a layer's blocked activations).
      {"f32_to_bf16_nChw8c_to_nChw8c_1x20x56x56",
       {1, 20, 56, 56},
       data_type::f32,
       format_tag::nChw8c,
       data_type::bf16,
       format_tag::nChw8c,
       false},
      // Padded, blocks of another size: vectors clipped to their real lanes.
      {"f32_nChw8c_to_nChw16c_1x20x56x56",
       {1, 20, 56, 56},
       data_type::f32,
       format_tag::nChw8c,
       data_type::f32,
       format_tag::nChw16c,
       false},
      // The other way round: src continues the block, dst does not.
      {"f32_nChw16c_to_nChw8c_1x20x56x56",
       {1, 20, 56, 56},
       data_type::f32,
       format_tag::nChw16c,
       data_type::f32,
       format_tag::nChw8c,
       false},
  };
  return c;
}

std::int64_t bytes_moved(const reorder_case& c) {
  std::int64_t n = 1;
  for (auto d : c.dims) n *= d;
  return n * static_cast<std::int64_t>(primcache::size_of(c.src_dt) + primcache::size_of(c.dst_dt));
}

std::vector<char> filled(std::size_t bytes) {
  std::vector<char> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<char>((i * 131) % 97);
  return v;
}

// `n` f32 values drawn from N(0, spread), fixed seed: the eltwises' inputs.
// (filled()'s byte pattern, read as floats, is mostly subnormal or huge
// numbers, whose microcode assists a function's time would measure.)
std::vector<float> normal_values(std::size_t n, float spread) {
  std::vector<float> v(n);
  std::mt19937 gen(11);
  std::normal_distribution<float> dist(0.f, spread);
  for (float& x : v) x = dist(gen);
  return v;
}

// Through the public API: a cached reorder primitive (output scale 0.5 in
// the attributes for the scaled cases), executed on a stream.
void bm_primcache(benchmark::State& state, const reorder_case& c) {
  namespace pc = primcache;
  pc::set_num_threads(static_cast<int>(state.range(0)));
  static pc::engine eng(pc::engine_kind::cpu, 0);
  const pc::memory::desc src_md(c.dims, c.src_dt, c.src_tag);
  const pc::memory::desc dst_md(c.dims, c.dst_dt, c.dst_tag);
  pc::primitive_attr attr;
  if (c.scale) attr.set_output_scales(0, {0.5f});
  auto src = filled(src_md.size_bytes());
  std::vector<char> dst(dst_md.size_bytes());
  pc::memory src_mem(src_md, eng, src.data()), dst_mem(dst_md, eng, dst.data());
  pc::reorder prim;
  try {
    pc::set_jit_mode(pc::jit_mode::sync);  // the specialized kernel
    prim = pc::reorder(src_mem, dst_mem, attr);
  } catch (const pc::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  pc::stream strm(eng);
  for (auto _ : state) {
    prim.execute(strm, src_mem, dst_mem);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes_moved(c));
}

// The generic walk on the problem bm_primcache's primitive holds.
void bm_primcache_generic(benchmark::State& state, const reorder_case& c) {
  namespace pc = primcache;
  namespace ci = primcache::cpu_internal;
  const int nthr = static_cast<int>(state.range(0));
  pc::set_num_threads(nthr);
  const pc::cpu_isa isa = pc::effective_isa();
  ci::reorder_problem p;
  p.src = pc::memory_desc(c.dims, c.src_dt, c.src_tag);
  p.dst = pc::memory_desc(c.dims, c.dst_dt, c.dst_tag);
  p.scales = c.scale ? ci::reorder_scales::common : ci::reorder_scales::none;
  p.nthr = nthr;
  auto kernel = ci::generic_reorder_kernel::create(p, ci::default_reorder_config(p, isa), isa);
  if (!kernel) {
    state.SkipWithError(kernel.why().message.c_str());
    return;
  }
  state.SetLabel("generic:" + std::string(pc::to_string(kernel.value()->isa())));
  auto src = filled(p.src.size_bytes());
  std::vector<char> dst(p.dst.size_bytes());
  const float scale = 0.5f;
  const ci::reorder_args args{src.data(), dst.data(), &scale};
  for (auto _ : state) {
    kernel.value()->execute(args, nullptr, pc::default_thread_pool());
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes_moved(c));
}

struct eltwise_case {
  std::string name;
  std::vector<std::int64_t> dims;
  format_tag tag;
  primcache::algorithm alg;
  bool binary;  // a dst-shaped binary add after the algorithm
};

const std::vector<eltwise_case>& eltwise_cases() {
  using primcache::algorithm;
  static const std::vector<eltwise_case> c = {
      {"relu_nchw_1x256x56x56", {1, 256, 56, 56}, format_tag::nchw, algorithm::eltwise_relu, false},
      {"gelu_erf_nc_128x3072", {128, 3072}, format_tag::ab, algorithm::eltwise_gelu_erf, false},
      {"tanh_nChw16c_1x64x56x56",
       {1, 64, 56, 56},
       format_tag::nChw16c,
       algorithm::eltwise_tanh,
       false},
      {"relu_add_nhwc_1x64x56x56",
       {1, 64, 56, 56},
       format_tag::nhwc,
       algorithm::eltwise_relu,
       true},
      // Padded: 20 channels in blocks of 8.
      {"relu_nChw8c_1x20x56x56",
       {1, 20, 56, 56},
       format_tag::nChw8c,
       algorithm::eltwise_relu,
       false},
  };
  return c;
}

std::int64_t eltwise_bytes(const eltwise_case& c) {
  std::int64_t n = 1;
  for (auto d : c.dims) n *= d;
  return n * 4 * (c.binary ? 3 : 2);
}

void bm_eltwise(benchmark::State& state, const eltwise_case& c) {
  namespace pc = primcache;
  pc::set_num_threads(static_cast<int>(state.range(0)));
  static pc::engine eng(pc::engine_kind::cpu, 0);
  const pc::memory::desc md(c.dims, data_type::f32, c.tag);
  pc::primitive_attr attr;
  if (c.binary) {
    pc::post_ops ops;
    ops.append_binary(pc::algorithm::binary_add, md);
    attr.set_post_ops(ops);
  }
  auto src = normal_values(md.size_bytes() / sizeof(float), 1.f);
  auto addend = normal_values(md.size_bytes() / sizeof(float), 1.f);
  std::vector<char> dst(md.size_bytes());
  pc::memory src_mem(md, eng, src.data()), dst_mem(md, eng, dst.data()),
      addend_mem(md, eng, addend.data());
  pc::eltwise_forward prim;
  try {
    pc::set_jit_mode(pc::jit_mode::sync);  // the specialized kernel
    prim = pc::eltwise_forward(pc::eltwise_forward::primitive_desc(
        pc::eltwise_forward::desc(pc::prop_kind::forward_inference, c.alg, md), attr, eng));
  } catch (const pc::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  pc::stream strm(eng);
  std::unordered_map<int, pc::memory> args = {{PRIMCACHE_ARG_SRC, src_mem},
                                              {PRIMCACHE_ARG_DST, dst_mem}};
  if (c.binary) args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(0) | PRIMCACHE_ARG_SRC_1] = addend_mem;
  for (auto _ : state) {
    prim.execute(strm, args);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * eltwise_bytes(c));
}

void bm_eltwise_generic(benchmark::State& state, const eltwise_case& c) {
  namespace pc = primcache;
  namespace ci = primcache::cpu_internal;
  const int nthr = static_cast<int>(state.range(0));
  pc::set_num_threads(nthr);
  const pc::cpu_isa isa = pc::effective_isa();
  ci::eltwise_problem p;
  p.src = p.dst = pc::memory_desc(c.dims, data_type::f32, c.tag);
  switch (c.alg) {
    case pc::algorithm::eltwise_gelu_erf: p.op.alg = ci::eltwise_alg::gelu_erf; break;
    case pc::algorithm::eltwise_tanh: p.op.alg = ci::eltwise_alg::tanh; break;
    default: p.op.alg = ci::eltwise_alg::relu; break;
  }
  if (c.binary) {
    ci::post_op op;
    op.what = ci::post_op::kind::binary_add;
    p.post_ops.push_back(op);
  }
  p.nthr = nthr;
  auto kernel = ci::generic_eltwise_kernel::create(p, ci::default_eltwise_config(p, isa), isa);
  if (!kernel) {
    state.SkipWithError(kernel.why().message.c_str());
    return;
  }
  state.SetLabel("generic:" + std::string(pc::to_string(kernel.value()->isa())));
  auto src = normal_values(p.src.size_bytes() / sizeof(float), 1.f);
  auto addend = normal_values(p.src.size_bytes() / sizeof(float), 1.f);
  std::vector<char> dst(p.dst.size_bytes());
  const float* operands[] = {addend.data()};
  const ci::eltwise_args args{src.data(), dst.data(), operands};
  for (auto _ : state) {
    kernel.value()->execute(args, nullptr, pc::default_thread_pool());
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * eltwise_bytes(c));
}

dnnl::memory::data_type dnnl_dt(data_type dt) {
  switch (dt) {
    case data_type::bf16: return dnnl::memory::data_type::bf16;
    case data_type::f16: return dnnl::memory::data_type::f16;
    case data_type::s8: return dnnl::memory::data_type::s8;
    case data_type::u8: return dnnl::memory::data_type::u8;
    case data_type::s32: return dnnl::memory::data_type::s32;
    default: return dnnl::memory::data_type::f32;
  }
}

dnnl::memory::format_tag dnnl_tag(format_tag t) {
  switch (t) {
    case format_tag::nhwc: return dnnl::memory::format_tag::nhwc;
    case format_tag::nChw16c: return dnnl::memory::format_tag::nChw16c;
    case format_tag::a: return dnnl::memory::format_tag::a;
    default: return dnnl::memory::format_tag::nchw;
  }
}

// oneDNN's OpenMP runtime comes with libdnnl; found at run time, so this
// program needs no OpenMP flags of its own.
void set_omp_threads(int n) {
  using fn = void (*)(int);
  static fn set = reinterpret_cast<fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set) set(n);
}

struct gelu_case {
  std::string name;
  primcache::algorithm alg;
  dnnl::algorithm onednn_alg;
  float spread;  // the inputs' standard deviation
};

const std::vector<gelu_case>& gelu_cases() {
  using primcache::algorithm;
  static const std::vector<gelu_case> c = {
      {"erf/narrow", algorithm::eltwise_gelu_erf, dnnl::algorithm::eltwise_gelu_erf, 1.f},
      {"erf/wide", algorithm::eltwise_gelu_erf, dnnl::algorithm::eltwise_gelu_erf, 8.f},
      {"tanh/narrow", algorithm::eltwise_gelu_tanh, dnnl::algorithm::eltwise_gelu_tanh, 1.f},
      {"tanh/wide", algorithm::eltwise_gelu_tanh, dnnl::algorithm::eltwise_gelu_tanh, 8.f},
  };
  return c;
}

constexpr std::int64_t kGeluRows = 128, kGeluCols = 3072;

std::vector<float> gelu_inputs(float spread) {
  return normal_values(static_cast<std::size_t>(kGeluRows * kGeluCols), spread);
}

void bm_gelu_primcache(benchmark::State& state, const gelu_case& c) {
  namespace pc = primcache;
  pc::set_num_threads(static_cast<int>(state.range(0)));
  static pc::engine eng(pc::engine_kind::cpu, 0);
  const pc::memory::desc md({kGeluRows, kGeluCols}, data_type::f32, format_tag::ab);
  auto src = gelu_inputs(c.spread);
  std::vector<float> dst(src.size());
  pc::memory src_mem(md, eng, src.data()), dst_mem(md, eng, dst.data());
  pc::eltwise_forward prim;
  try {
    pc::set_jit_mode(pc::jit_mode::sync);  // the specialized kernel
    prim = pc::eltwise_forward(pc::eltwise_forward::primitive_desc(
        pc::eltwise_forward::desc(pc::prop_kind::forward_inference, c.alg, md), eng));
  } catch (const pc::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  pc::stream strm(eng);
  const std::unordered_map<int, pc::memory> args = {{PRIMCACHE_ARG_SRC, src_mem},
                                                    {PRIMCACHE_ARG_DST, dst_mem}};
  for (auto _ : state) {
    prim.execute(strm, args);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetItemsProcessed(state.iterations() * kGeluRows * kGeluCols);
}

void bm_gelu_onednn(benchmark::State& state, const gelu_case& c) {
  set_omp_threads(static_cast<int>(state.range(0)));
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const dnnl::memory::desc md({kGeluRows, kGeluCols}, dnnl::memory::data_type::f32,
                              dnnl::memory::format_tag::ab);
  auto src_values = gelu_inputs(c.spread);
  dnnl::memory src(md, eng, src_values.data()), dst(md, eng);
  dnnl::eltwise_forward prim(dnnl::eltwise_forward::primitive_desc(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, c.onednn_alg, md), eng));
  for (auto _ : state) {
    prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    strm.wait();
  }
  state.SetItemsProcessed(state.iterations() * kGeluRows * kGeluCols);
}

void bm_onednn(benchmark::State& state, const reorder_case& c) {
  set_omp_threads(static_cast<int>(state.range(0)));
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  dnnl::memory::dims dims(c.dims.begin(), c.dims.end());
  dnnl::memory src({dims, dnnl_dt(c.src_dt), dnnl_tag(c.src_tag)}, eng);
  dnnl::memory dst({dims, dnnl_dt(c.dst_dt), dnnl_tag(c.dst_tag)}, eng);
  std::memset(src.get_data_handle(), 1, src.get_desc().get_size());
  dnnl::primitive_attr attr;
  if (c.scale) attr.set_output_scales(0, {0.5f});
  dnnl::reorder r(dnnl::reorder::primitive_desc(src, dst, attr));
  for (auto _ : state) {
    r.execute(strm, src, dst);
    strm.wait();
  }
  state.SetBytesProcessed(state.iterations() * bytes_moved(c));
}

void bm_memcpy(benchmark::State& state, const reorder_case& c) {
  const std::int64_t bytes = bytes_moved(c) / 2;  // read + write of this many
  auto src = filled(static_cast<std::size_t>(bytes));
  std::vector<char> dst(static_cast<std::size_t>(bytes));
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), static_cast<std::size_t>(bytes));
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes * 2);
}

int register_all() {
  for (const auto& c : cases()) {
    benchmark::RegisterBenchmark(("BM_Reorder/primcache/" + c.name).c_str(), bm_primcache, c)
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_Reorder/primcache_generic/" + c.name).c_str(),
                                 bm_primcache_generic, c)
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_Reorder/onednn/" + c.name).c_str(), bm_onednn, c)
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_Reorder/memcpy/" + c.name).c_str(), bm_memcpy, c)
        ->Arg(1)
        ->UseRealTime();
  }
  for (const auto& c : eltwise_cases()) {
    benchmark::RegisterBenchmark(("BM_Eltwise/primcache/" + c.name).c_str(), bm_eltwise, c)
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_Eltwise/primcache_generic/" + c.name).c_str(),
                                 bm_eltwise_generic, c)
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime();
  }
  for (const auto& c : gelu_cases()) {
    benchmark::RegisterBenchmark(("BM_EltwiseGelu/primcache/" + c.name).c_str(), bm_gelu_primcache,
                                 c)
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_EltwiseGelu/onednn/" + c.name).c_str(), bm_gelu_onednn, c)
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime();
  }
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
