// bench_conv.cpp — the f32 forward-inference convolution primitive against
// oneDNN 2.6's convolution_forward, on the ResNet-50 layer shapes at
// minibatch 1, with 1 and 2 threads, in the same binary and the same run.
//
// primcache: nChw16c src and dst, weights in the layout the primitive
// descriptor resolves `any` to (Ohwi16o), so nothing is packed inside the
// timed loop; bias on; executed through the public API.
// oneDNN: format_tag::any for src, weights and dst, as its users do, the
// primitive created once and the weights reordered once, outside the timed
// loop; bias on. Threads: ours through set_num_threads (the runtime's pool); oneDNN's OpenMP
// through omp_set_num_threads, looked up in the process (libdnnl links the OpenMP runtime). Run
// with OMP_WAIT_POLICY=PASSIVE so the OpenMP workers do not spin against ours.
//
//   OMP_WAIT_POLICY=PASSIVE build/.../benchmarks/bench_conv --benchmark_filter=BM_Conv
//
// BM_Conv/primcache_o3 rows: the same primitive compiled under the settings
// the convolution had before (O3, Aggressive, LSR), for comparing kernel
// speed across compile settings in one binary. Both primcache rows create
// their primitive in sync mode, so they measure specialized code (a tiered
// creation would run the generic kernel until the swap, and compile on the
// background pool, outside the compile_probe).
//
// BM_Conv/primcache_generic rows: the shape-generic kernel a tiered
// convolution runs until its specialized kernel is installed
// (kernels/generic_conv_kernel.hpp), on the same tensors and thread pool,
// with the configuration the primitive's heuristic gives.
//
// BM_Conv/{primcache,primcache_generic}/dw_* rows: MobileNet's 3x3
// depthwise layers, the specialized and the generic kernel called directly
// (bm_dw); BM_Conv/onednn/dw_* oneDNN's depthwise convolution of each
// (bm_dw_onednn).
//
// BM_Conv/primcache_blocking/<layer>/<variant>/threads:N rows: bm_primcache's
// primitive with the heuristic's configuration and one of the fields the
// tuner may change beside the tile (a K panel `ic_block:16`, `ic_block:64`;
// an N panel `oc_panel:2`, which walks spatial_outer; a thread partition
// `thr_oc:1`, `thr_oc:2`), given by a config source, and `default` with none
// changed: what each field alone gives on the default tile. A variant the
// descriptor refuses (no K panel below the layer's channels, no partition
// on one thread) is skipped with the reason. Compare with
// --benchmark_enable_random_interleaving and repetitions.
//
// Counter GFLOPS: 2 * N * OC * OH * OW * IC/G * KH * KW per iteration.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "jit/compiler.hpp"
#include "kernels/conv_kernel.hpp"
#include "kernels/generic_conv_kernel.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/tuning.hpp"

namespace {

struct layer {
  const char* name;
  std::int64_t ic, oc, in, k, stride, pad;
  std::int64_t out() const { return (in + 2 * pad - k) / stride + 1; }
  double flops() const { return 2.0 * static_cast<double>(oc * out() * out() * ic * k * k); }
};

const layer layers[] = {
    {"conv1_7x7s2_3to64_224", 3, 64, 224, 7, 2, 3},
    {"conv2_3x3_64to64_56", 64, 64, 56, 3, 1, 1},
    {"conv2_1x1_64to256_56", 64, 256, 56, 1, 1, 0},
    {"conv2_1x1_256to64_56", 256, 64, 56, 1, 1, 0},
    {"conv3_3x3_128to128_28", 128, 128, 28, 3, 1, 1},
    {"conv3_3x3s2_128to128_56", 128, 128, 56, 3, 2, 1},
    {"conv3_1x1_512to128_28", 512, 128, 28, 1, 1, 0},
    {"conv4_3x3_256to256_14", 256, 256, 14, 3, 1, 1},
    {"conv4_1x1_1024to256_14", 1024, 256, 14, 1, 1, 0},
    {"conv5_3x3_512to512_7", 512, 512, 7, 3, 1, 1},
    {"conv5_1x1_2048to512_7", 2048, 512, 7, 1, 1, 0},
};

void fill(float* p, std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (std::size_t i = 0; i < n; ++i) p[i] = u(rng);
}

// 64-byte aligned floats.
struct aligned_floats {
  explicit aligned_floats(std::size_t n) : raw(n + 16) {
    auto a = (reinterpret_cast<std::uintptr_t>(raw.data()) + 63) & ~std::uintptr_t{63};
    data = reinterpret_cast<float*>(a);
  }
  std::vector<float> raw;
  float* data = nullptr;
};

void set_omp_threads(int n) {
  using fn = void (*)(int);
  static auto set = reinterpret_cast<fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set) set(n);
}

void report(benchmark::State& state, const layer& l) {
  state.counters["GFLOPS"] = benchmark::Counter(
      l.flops() * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

// The convolution bm_primcache and bm_primcache_blocking create: nChw16c
// activations, weights in the layout the primitive descriptor chooses
// (format any), bias.
primcache::convolution_forward::desc blocked_conv_desc(const layer& l) {
  namespace pc = primcache;
  using tag = pc::format_tag;
  return pc::convolution_forward::desc(
      pc::prop_kind::forward_inference, pc::algorithm::convolution_direct,
      pc::memory::desc({1, l.ic, l.in, l.in}, pc::data_type::f32, tag::nChw16c),
      pc::memory::desc({l.oc, l.ic, l.k, l.k}, pc::data_type::f32, tag::any),
      pc::memory::desc({l.oc}, pc::data_type::f32, tag::a),
      pc::memory::desc({1, l.oc, l.out(), l.out()}, pc::data_type::f32, tag::nChw16c),
      {l.stride, l.stride}, {l.pad, l.pad}, {l.pad, l.pad});
}

// Times prim (made from pd) on nChw16c activations filled with fixed
// random values, in the weights layout pd chose: bm_primcache's loop.
void time_primcache_conv(benchmark::State& state, const layer& l,
                         const primcache::convolution_forward::primitive_desc& pd,
                         const primcache::convolution_forward& prim) {
  namespace pc = primcache;
  const pc::engine eng = pd.get_engine();
  const pc::memory::desc src_md = pd.src_desc(), wei_md = pd.weights_desc(),
                         bias_md = pd.bias_desc(), dst_md = pd.dst_desc();
  aligned_floats src(src_md.size_bytes() / 4), wei(wei_md.size_bytes() / 4),
      bias(static_cast<std::size_t>(l.oc)), dst(dst_md.size_bytes() / 4);
  fill(src.data, src_md.size_bytes() / 4, 1);
  fill(wei.data, wei_md.size_bytes() / 4, 2);
  fill(bias.data, static_cast<std::size_t>(l.oc), 3);
  pc::stream strm(eng);
  const pc::primitive::args args = {{PRIMCACHE_ARG_SRC, pc::memory(src_md, eng, src.data)},
                                    {PRIMCACHE_ARG_WEIGHTS, pc::memory(wei_md, eng, wei.data)},
                                    {PRIMCACHE_ARG_BIAS, pc::memory(bias_md, eng, bias.data)},
                                    {PRIMCACHE_ARG_DST, pc::memory(dst_md, eng, dst.data)}};
  prim.execute(strm, args);
  for (auto _ : state) {
    prim.execute(strm, args);
    benchmark::DoNotOptimize(dst.data);
  }
  report(state, l);
}

// Through the public API: a cached convolution_forward primitive with
// nChw16c activations and weights in the layout the primitive descriptor
// chose for format any (so nothing is packed inside the timed loop).
// primcache_o3: the same primitive with its kernel compiled under the
// settings the convolution had before it got its own (LLVM's O3 pipeline,
// Aggressive code generation, loop strength reduction), through a
// compile_probe (jit/compiler.hpp): what the 2% rule compares, same binary.
void bm_primcache(benchmark::State& state, layer l, int nthr, bool previous_settings) {
  namespace pc = primcache;
  pc::set_num_threads(nthr);
  static pc::engine eng(pc::engine_kind::cpu, 0);
  pc::convolution_forward::primitive_desc pd;
  try {
    pd = pc::convolution_forward::primitive_desc(blocked_conv_desc(l), eng);
  } catch (const pc::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.SetLabel(pd.impl_info_str());
  // Both rows compile afresh: they share the primitive's key.
  pc::set_primitive_cache_capacity(0);
  pc::set_primitive_cache_capacity(1024);
  pc::convolution_forward prim;
  const pc::jit_mode mode = pc::get_jit_mode();
  pc::set_jit_mode(pc::jit_mode::sync);
  {
    primcache::cpu_internal::compile_probe probe;
    if (previous_settings) {
      probe.pipeline = "O3";
      probe.codegen_level = 3;
      probe.loop_strength_reduction = true;
    }
    prim = pc::convolution_forward(pd);
  }
  pc::set_jit_mode(mode);
  prim.wait_until_specialized();
  time_primcache_conv(state, l, pd, prim);
}

// bm_primcache's primitive, its configuration the heuristic's with
// `field` set to `value` (none when field is empty), compiled in sync mode.
void bm_primcache_blocking(benchmark::State& state, layer l, int nthr, std::string field,
                           int value) {
  namespace pc = primcache;
  pc::set_num_threads(nthr);
  static pc::engine eng(pc::engine_kind::cpu, 0);
  const pc::convolution_forward::desc d = blocked_conv_desc(l);
  pc::convolution_forward::primitive_desc pd;
  try {
    pd = pc::convolution_forward::primitive_desc(d, eng);
    if (!field.empty()) {
      const pc::backend::primitive_desc_impl& heuristic = pc::backend::impl_of(pd);
      pc::backend::kernel_config cfg;
      for (const auto& f : heuristic.config()->fields()) {
        std::int64_t v = f.name == field ? value : f.value;
        // An N panel walks spatial_outer.
        if (field == "oc_panel" && f.name == "order") v = 1;
        cfg.add(f.name, v);
      }
      if (auto ok = heuristic.validate_config(cfg); !ok) {
        state.SkipWithError(ok.why().message.c_str());
        return;
      }
      pc::backend::set_config_source(
          [cfg](const pc::backend::primitive_desc_impl&)
              -> std::optional<pc::backend::kernel_config> { return cfg; });
      pd = pc::convolution_forward::primitive_desc(d, eng);
      pc::backend::set_config_source({});
      if (!(*pc::backend::impl_of(pd).config() == cfg)) {
        state.SkipWithError("the descriptor did not take the configuration");
        return;
      }
    }
  } catch (const pc::error& e) {
    pc::backend::set_config_source({});
    state.SkipWithError(e.what());
    return;
  }
  state.SetLabel(pc::backend::impl_of(pd).config()->to_json());
  const pc::jit_mode mode = pc::get_jit_mode();
  pc::set_jit_mode(pc::jit_mode::sync);
  const pc::convolution_forward prim(pd);
  pc::set_jit_mode(mode);
  time_primcache_conv(state, l, pd, prim);
}

// The generic kernel on the problem bm_primcache's primitive holds: nChw16c
// activations, Ohwi16o weights (read in place), bias.
void bm_primcache_generic(benchmark::State& state, layer l, int nthr) {
  namespace pc = primcache;
  namespace ci = primcache::cpu_internal;
  using tag = pc::format_tag;
  pc::set_num_threads(nthr);
  const pc::cpu_isa isa = pc::effective_isa();
  ci::conv_problem p;
  p.src = pc::memory_desc({1, l.ic, l.in, l.in}, pc::data_type::f32, tag::nChw16c);
  p.dst = pc::memory_desc({1, l.oc, l.out(), l.out()}, pc::data_type::f32, tag::nChw16c);
  p.bias = pc::memory_desc({l.oc}, pc::data_type::f32, tag::a);
  p.weights = pc::memory_desc({l.oc, l.ic, l.k, l.k}, pc::data_type::f32, tag::oihw);
  p.stride_h = p.stride_w = l.stride;
  p.pad_t = p.pad_l = p.pad_b = p.pad_r = l.pad;
  p.nthr = nthr;
  auto preferred = ci::preferred_weights_desc(p);
  if (!preferred) {
    state.SkipWithError(preferred.why().message.c_str());
    return;
  }
  p.weights = preferred.value();
  auto kernel = ci::generic_conv_kernel::create(p, ci::default_conv_config(p, isa), isa);
  if (!kernel) {
    state.SkipWithError(kernel.why().message.c_str());
    return;
  }
  state.SetLabel("generic:" + std::string(pc::to_string(kernel.value()->isa())));
  aligned_floats src(p.src.size_bytes() / 4), wei(p.weights.size_bytes() / 4),
      bias(static_cast<std::size_t>(l.oc)), dst(p.dst.size_bytes() / 4),
      scratch(kernel.value()->scratchpad_bytes() / 4 + 1);
  fill(src.data, p.src.size_bytes() / 4, 1);
  fill(wei.data, p.weights.size_bytes() / 4, 2);
  fill(bias.data, static_cast<std::size_t>(l.oc), 3);
  ci::conv_args args;
  args.src = src.data;
  args.weights = wei.data;
  args.bias = bias.data;
  args.dst = dst.data;
  kernel.value()->execute(args, scratch.data, pc::default_thread_pool());
  for (auto _ : state) {
    kernel.value()->execute(args, scratch.data, pc::default_thread_pool());
    benchmark::DoNotOptimize(dst.data);
  }
  report(state, l);
}

// Runs oneDNN's convolution of `pd` in the benchmark loop: src and bias
// filled as the other rows fill theirs, the weights filled in the user's
// layout `user_wei_md` and reordered once to the layout pd chose.
void run_onednn_conv(benchmark::State& state, const dnnl::convolution_forward::primitive_desc& pd,
                     const dnnl::memory::desc& user_wei_md) {
  const dnnl::engine eng = pd.get_engine();
  dnnl::stream s(eng);
  dnnl::convolution_forward conv(pd);
  dnnl::memory src(pd.src_desc(), eng), bias(pd.bias_desc(), eng), dst(pd.dst_desc(), eng);
  dnnl::memory user_wei(user_wei_md, eng);
  dnnl::memory wei(pd.weights_desc(), eng);
  fill(static_cast<float*>(src.get_data_handle()), pd.src_desc().get_size() / 4, 1);
  fill(static_cast<float*>(user_wei.get_data_handle()), user_wei_md.get_size() / 4, 2);
  fill(static_cast<float*>(bias.get_data_handle()), pd.bias_desc().get_size() / 4, 3);
  dnnl::reorder(user_wei, wei).execute(s, user_wei, wei);
  s.wait();
  const std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}};
  conv.execute(s, args);
  s.wait();
  for (auto _ : state) {
    conv.execute(s, args);
    s.wait();
  }
}

void bm_onednn(benchmark::State& state, layer l, int nthr) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  set_omp_threads(nthr);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::memory::desc src_md({1, l.ic, l.in, l.in}, dt::f32, tag::any);
  dnnl::memory::desc wei_md({l.oc, l.ic, l.k, l.k}, dt::f32, tag::any);
  dnnl::memory::desc bias_md({l.oc}, dt::f32, tag::x);
  dnnl::memory::desc dst_md({1, l.oc, l.out(), l.out()}, dt::f32, tag::any);
  dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md, wei_md,
      bias_md, dst_md, {l.stride, l.stride}, {0, 0}, {l.pad, l.pad}, {l.pad, l.pad});
  dnnl::convolution_forward::primitive_desc pd(d, eng);
  // Weights: plain oihw from the user.
  run_onednn_conv(state, pd, {{l.oc, l.ic, l.k, l.k}, dt::f32, tag::oihw});
  report(state, l);
}

// Depthwise rows (issue 11): MobileNet's 3x3 depthwise layers (groups ==
// channels, stride 1 and 2, padding 1), nChw16c src and dst, Goihw16g
// weights (read in place), bias. Both rows run the kernels directly on the
// same problem, tensors and thread pool: BM_Conv/primcache/dw_* the
// specialized kernel (conv_kernel, compiled with the heuristic's
// configuration), BM_Conv/primcache_generic/dw_* the generic kernel's
// depthwise tiles (generic_conv_kernel).
struct dw_layer {
  const char* name;
  std::int64_t c, in, stride;
  std::int64_t out() const { return (in + 2 - 3) / stride + 1; }
  double flops() const { return 2.0 * static_cast<double>(c * out() * out() * 9); }
};

const dw_layer dw_layers[] = {
    {"dw_3x3_32_112", 32, 112, 1}, {"dw_3x3s2_64_112", 64, 112, 2},
    {"dw_3x3_128_56", 128, 56, 1}, {"dw_3x3s2_128_56", 128, 56, 2},
    {"dw_3x3_256_28", 256, 28, 1}, {"dw_3x3s2_256_28", 256, 28, 2},
    {"dw_3x3_512_14", 512, 14, 1}, {"dw_3x3s2_512_14", 512, 14, 2},
    {"dw_3x3_512_7", 512, 7, 1},
};

template <class Kernel>
void run_dw(benchmark::State& state, const dw_layer& l,
            const primcache::cpu_internal::conv_problem& p, const Kernel& kernel) {
  namespace pc = primcache;
  namespace ci = primcache::cpu_internal;
  aligned_floats src(p.src.size_bytes() / 4), wei(p.weights.size_bytes() / 4),
      bias(static_cast<std::size_t>(l.c)), dst(p.dst.size_bytes() / 4),
      scratch(kernel.scratchpad_bytes() / 4 + 1);
  fill(src.data, p.src.size_bytes() / 4, 1);
  fill(wei.data, p.weights.size_bytes() / 4, 2);
  fill(bias.data, static_cast<std::size_t>(l.c), 3);
  ci::conv_args args;
  args.src = src.data;
  args.weights = wei.data;
  args.bias = bias.data;
  args.dst = dst.data;
  kernel.execute(args, scratch.data, pc::default_thread_pool());
  for (auto _ : state) {
    kernel.execute(args, scratch.data, pc::default_thread_pool());
    benchmark::DoNotOptimize(dst.data);
  }
  state.counters["GFLOPS"] = benchmark::Counter(
      l.flops() * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void bm_dw(benchmark::State& state, dw_layer l, int nthr, bool generic) {
  namespace pc = primcache;
  namespace ci = primcache::cpu_internal;
  using tag = pc::format_tag;
  pc::set_num_threads(nthr);
  const pc::cpu_isa isa = pc::effective_isa();
  ci::conv_problem p;
  p.src = pc::memory_desc({1, l.c, l.in, l.in}, pc::data_type::f32, tag::nChw16c);
  p.dst = pc::memory_desc({1, l.c, l.out(), l.out()}, pc::data_type::f32, tag::nChw16c);
  p.bias = pc::memory_desc({l.c}, pc::data_type::f32, tag::a);
  p.weights = pc::memory_desc({l.c, 1, 1, 3, 3}, pc::data_type::f32, tag::goihw);
  p.stride_h = p.stride_w = l.stride;
  p.pad_t = p.pad_l = p.pad_b = p.pad_r = 1;
  p.groups = l.c;
  p.nthr = nthr;
  auto preferred = ci::preferred_weights_desc(p);
  if (!preferred) {
    state.SkipWithError(preferred.why().message.c_str());
    return;
  }
  p.weights = preferred.value();
  const ci::conv_config cfg = ci::default_conv_config(p, isa);
  if (generic) {
    auto kernel = ci::generic_conv_kernel::create(p, cfg, isa);
    if (!kernel) {
      state.SkipWithError(kernel.why().message.c_str());
      return;
    }
    const ci::conv_config& t = kernel.value()->tile();
    state.SetLabel("generic:" + std::string(pc::to_string(kernel.value()->isa())) + " " +
                   std::to_string(t.ow_block) + "x" + std::to_string(t.oc_blocks));
    run_dw(state, l, p, *kernel.value());
  } else {
    auto kernel = ci::conv_kernel::create(p, cfg, isa);
    if (!kernel) {
      state.SkipWithError(kernel.why().message.c_str());
      return;
    }
    state.SetLabel("specialized:" + std::string(pc::to_string(isa)) + " " +
                   std::to_string(cfg.ow_block) + "x" + std::to_string(cfg.oc_blocks));
    run_dw(state, l, p, *kernel.value());
  }
}

// BM_Conv/onednn/dw_*: oneDNN 2.6's depthwise convolution of the same
// layer, the peer of the rows above: nChw16c src and dst as theirs, weights
// in the layout oneDNN picks (`any`, reordered once from goihw), bias, its
// OpenMP threads set to nthr.
void bm_dw_onednn(benchmark::State& state, dw_layer l, int nthr) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  set_omp_threads(nthr);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  const dnnl::memory::desc src_md({1, l.c, l.in, l.in}, dt::f32, tag::nChw16c);
  const dnnl::memory::desc wei_md({l.c, 1, 1, 3, 3}, dt::f32, tag::any);
  const dnnl::memory::desc bias_md({l.c}, dt::f32, tag::x);
  const dnnl::memory::desc dst_md({1, l.c, l.out(), l.out()}, dt::f32, tag::nChw16c);
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, src_md, wei_md, bias_md,
                                      dst_md, {l.stride, l.stride}, {1, 1}, {1, 1}),
      eng);
  run_onednn_conv(state, pd, {{l.c, 1, 1, 3, 3}, dt::f32, tag::goihw});
  state.SetLabel(pd.impl_info_str());
  state.counters["GFLOPS"] = benchmark::Counter(
      l.flops() * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

// BM_CreateMiss/primcache_{sync,tiered}/dw_3x3_128_56: creating a depthwise
// convolution that misses the cache through the public API (as
// bench_create's BM_CreateMiss rows, which have no depthwise shape): sync
// compiles the specialized kernel; tiered returns with the generic kernel's
// depthwise tiles. Each iteration's primitive waits for its specialized
// kernel outside the timing.
void bm_dw_create_miss(benchmark::State& state, primcache::jit_mode mode) {
  namespace pc = primcache;
  using tag = pc::format_tag;
  static pc::engine eng(pc::engine_kind::cpu, 0);
  const pc::memory::desc src_md({1, 128, 56, 56}, pc::data_type::f32, tag::nChw16c);
  const pc::memory::desc wei_md({128, 1, 1, 3, 3}, pc::data_type::f32, tag::any);
  const pc::memory::desc bias_md({128}, pc::data_type::f32, tag::a);
  const pc::memory::desc dst_md({1, 128, 56, 56}, pc::data_type::f32, tag::nChw16c);
  const pc::convolution_forward::primitive_desc pd(
      pc::convolution_forward::desc(pc::prop_kind::forward_inference,
                                    pc::algorithm::convolution_direct, src_md, wei_md, bias_md,
                                    dst_md, {1, 1}, {1, 1}, {1, 1}),
      eng);
  const pc::jit_mode saved = pc::get_jit_mode();
  pc::set_jit_mode(mode);
  // The generic code is linked into the JIT on first use (once per
  // process): not a creation's cost.
  pc::convolution_forward(pd).wait_until_specialized();
  for (auto _ : state) {
    state.PauseTiming();
    pc::set_primitive_cache_capacity(0);
    pc::set_primitive_cache_capacity(1024);
    state.ResumeTiming();
    pc::convolution_forward p(pd);
    state.PauseTiming();
    p.wait_until_specialized();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations());
  pc::set_jit_mode(saved);
}

// BM_CreateMiss/onednn/dw_3x3_128_56: oneDNN 2.6 creating the same
// depthwise convolution (nChw16c activations, weights `any`, bias) from a
// primitive descriptor made once, its primitive cache cleared before each
// iteration (outside the timing): what the primcache rows above time.
void bm_dw_create_miss_onednn(benchmark::State& state) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  const dnnl::memory::desc src_md({1, 128, 56, 56}, dt::f32, tag::nChw16c);
  const dnnl::memory::desc wei_md({128, 1, 1, 3, 3}, dt::f32, tag::any);
  const dnnl::memory::desc bias_md({128}, dt::f32, tag::x);
  const dnnl::memory::desc dst_md({1, 128, 56, 56}, dt::f32, tag::nChw16c);
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, src_md, wei_md, bias_md,
                                      dst_md, {1, 1}, {1, 1}, {1, 1}),
      eng);
  state.SetLabel(pd.impl_info_str());
  for (auto _ : state) {
    state.PauseTiming();
    dnnl::set_primitive_cache_capacity(0);
    dnnl::set_primitive_cache_capacity(1024);
    state.ResumeTiming();
    dnnl::convolution_forward p(pd);
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(state.iterations());
}

// BM_Conv/primcache_nhwc and BM_Conv/primcache_via_matmul rows (issue 13):
// the 1x1 stride-1 layers with nhwc src and dst, oihw weights marked
// constant (each implementation packs them once into the constant tensor
// cache, outside the timed loop), bias on: the direct convolution
// ("jit:conv") against "jit:conv:via_matmul" (one nested matmul, M = H*W,
// K = IC, N = OC) on the same op — the choice tuning makes between the two.
// via_matmul is reached as tuning leaves it: a tune-table entry naming it
// for the direct convolution's problem (removed once the primitive is
// made). Both compiled in sync mode (specialized code).
void bm_primcache_nhwc(benchmark::State& state, layer l, int nthr, bool via_matmul) {
  namespace pc = primcache;
  pc::set_num_threads(nthr);
  static pc::engine eng(pc::engine_kind::cpu, 0);
  using tag = pc::format_tag;
  pc::memory::desc src_md({1, l.ic, l.in, l.in}, pc::data_type::f32, tag::nhwc);
  pc::memory::desc wei_md({l.oc, l.ic, 1, 1}, pc::data_type::f32, tag::oihw);
  pc::memory::desc bias_md({l.oc}, pc::data_type::f32, tag::a);
  pc::memory::desc dst_md({1, l.oc, l.out(), l.out()}, pc::data_type::f32, tag::nhwc);
  pc::primitive_attr attr;
  attr.set_constant_weights(true);
  const pc::convolution_forward::desc d(pc::prop_kind::forward_inference,
                                        pc::algorithm::convolution_direct, src_md, wei_md, bias_md,
                                        dst_md, {1, 1}, {0, 0}, {0, 0});
  pc::convolution_forward::primitive_desc pd;
  std::vector<std::byte> entry_key;
  const std::string device = pc::tune_device_of(eng);
  try {
    pd = pc::convolution_forward::primitive_desc(d, attr, eng);
    if (via_matmul) {
      const auto& direct = pc::backend::impl_of(pd);
      const auto k = direct.problem_key().bytes();
      entry_key.assign(k.begin(), k.end());
      pc::global_tune_table().put(device, direct.problem_key(),
                                  pc::tune_entry{"jit:conv:via_matmul", "{}", 1, 1, "bench_conv"});
      pc::backend::set_config_source({});  // the cached descriptor is made again
      pd = pc::convolution_forward::primitive_desc(d, attr, eng);
    }
  } catch (const pc::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  const std::string name = pc::backend::impl_of(pd).name();
  if (via_matmul && name != "jit:conv:via_matmul") {
    state.SkipWithError(("the op was made by " + name).c_str());
    return;
  }
  state.SetLabel(name);
  aligned_floats src(src_md.size_bytes() / 4), wei(wei_md.size_bytes() / 4),
      bias(static_cast<std::size_t>(l.oc)), dst(dst_md.size_bytes() / 4);
  fill(src.data, src_md.size_bytes() / 4, 1);
  fill(wei.data, wei_md.size_bytes() / 4, 2);
  fill(bias.data, static_cast<std::size_t>(l.oc), 3);
  const pc::jit_mode mode = pc::get_jit_mode();
  pc::set_jit_mode(pc::jit_mode::sync);
  pc::convolution_forward prim(pd);
  pc::set_jit_mode(mode);
  if (via_matmul) {
    pc::global_tune_table().erase(device, entry_key);
    pc::backend::set_config_source({});
  }
  pc::stream strm(eng);
  const pc::primitive::args args = {{PRIMCACHE_ARG_SRC, pc::memory(src_md, eng, src.data)},
                                    {PRIMCACHE_ARG_WEIGHTS, pc::memory(wei_md, eng, wei.data)},
                                    {PRIMCACHE_ARG_BIAS, pc::memory(bias_md, eng, bias.data)},
                                    {PRIMCACHE_ARG_DST, pc::memory(dst_md, eng, dst.data)}};
  prim.execute(strm, args);  // packs the constant weights
  for (auto _ : state) {
    prim.execute(strm, args);
    benchmark::DoNotOptimize(dst.data);
  }
  report(state, l);
}

int register_all() {
  for (int nthr : {1, 2}) {
    for (const layer& l : layers) {
      const std::string suffix = std::string(l.name) + "/threads:" + std::to_string(nthr);
      benchmark::RegisterBenchmark(("BM_Conv/primcache/" + suffix).c_str(), bm_primcache, l, nthr,
                                   false)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("BM_Conv/primcache_o3/" + suffix).c_str(), bm_primcache, l,
                                   nthr, true)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("BM_Conv/primcache_generic/" + suffix).c_str(),
                                   bm_primcache_generic, l, nthr)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("BM_Conv/onednn/" + suffix).c_str(), bm_onednn, l, nthr)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (int nthr : {1, 2}) {
    for (const dw_layer& l : dw_layers) {
      const std::string suffix = std::string(l.name) + "/threads:" + std::to_string(nthr);
      for (bool generic : {false, true}) {
        benchmark::RegisterBenchmark(
            ((generic ? "BM_Conv/primcache_generic/" : "BM_Conv/primcache/") + suffix).c_str(),
            bm_dw, l, nthr, generic)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
      benchmark::RegisterBenchmark(("BM_Conv/onednn/" + suffix).c_str(), bm_dw_onednn, l, nthr)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (int nthr : {1, 2}) {
    for (const layer& l : layers) {
      if (l.k != 1 || l.stride != 1 || l.pad != 0) continue;
      const std::string suffix = std::string(l.name) + "/threads:" + std::to_string(nthr);
      for (bool via : {false, true}) {
        benchmark::RegisterBenchmark(
            ((via ? "BM_Conv/primcache_via_matmul/" : "BM_Conv/primcache_nhwc/") + suffix).c_str(),
            bm_primcache_nhwc, l, nthr, via)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  for (int nthr : {1, 2}) {
    for (const layer& l : layers) {
      const std::pair<const char*, int> variants[] = {{"", 0},          {"ic_block", 16},
                                                      {"ic_block", 64}, {"oc_panel", 2},
                                                      {"thr_oc", 1},    {"thr_oc", 2}};
      for (const auto& [field, value] : variants) {
        const std::string variant =
            *field ? std::string(field) + ":" + std::to_string(value) : "default";
        benchmark::RegisterBenchmark(("BM_Conv/primcache_blocking/" + std::string(l.name) + "/" +
                                      variant + "/threads:" + std::to_string(nthr))
                                         .c_str(),
                                     bm_primcache_blocking, l, nthr, std::string(field), value)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  benchmark::RegisterBenchmark("BM_CreateMiss/primcache_sync/dw_3x3_128_56", bm_dw_create_miss,
                               primcache::jit_mode::sync)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(10);
  benchmark::RegisterBenchmark("BM_CreateMiss/primcache_tiered/dw_3x3_128_56", bm_dw_create_miss,
                               primcache::jit_mode::tiered)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(10);
  benchmark::RegisterBenchmark("BM_CreateMiss/onednn/dw_3x3_128_56", bm_dw_create_miss_onednn)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(10);
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
