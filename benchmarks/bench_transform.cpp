// Data transforms (libs/transform) on 64 MiB tensors: a cached plan executed
// into a kept destination (BM_Transform/primcache), oneDNN 2.6's reorder of
// the same tensors (BM_Transform/onednn) and a copy of the same number of
// bytes split across the same number of threads, the faster of memcpy and a
// non-temporal streaming copy (BM_Memcpy), in one binary and one run.
// bytes_per_second counts bytes read plus bytes written. BM_Memcpy's
// shaped_GBps counter is a streaming copy with the transform's own split of
// bytes read and written (bf16 -> f32 reads one third, writes two thirds).
//
//   OMP_WAIT_POLICY=PASSIVE build/<dir>/benchmarks/bench_transform
//
// Argument: the thread count (1 or 2), the same for everyone (ours through
// set_num_threads, oneDNN's OpenMP through omp_set_num_threads).
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <emmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "primcache/runtime/runtime.hpp"
#include "primcache/transform/transform_registry.hpp"

namespace {

namespace pc = primcache;

struct transform_case {
  std::string name;
  std::vector<std::int64_t> dims;
  const char* from;  // kernel types, library jit
  const char* to;
};

const std::vector<transform_case>& cases() {
  // 16 Mi elements: 64 MiB of f32.
  static const std::vector<transform_case> c = {
      {"f32_nchw_to_nhwc_1x256x256x256",
       {1, 256, 256, 256},
       "cpu/f32/abcd/jit",
       "cpu/f32/acdb/jit"},
      {"f32_nhwc_to_nchw_1x256x256x256",
       {1, 256, 256, 256},
       "cpu/f32/acdb/jit",
       "cpu/f32/abcd/jit"},
      {"f32_nchw_to_nChw16c_1x256x256x256",
       {1, 256, 256, 256},
       "cpu/f32/abcd/jit",
       "cpu/f32/aBcd16b/jit"},
      {"f32_to_bf16_16M", {16 * 1024 * 1024}, "cpu/f32/a/jit", "cpu/bf16/a/jit"},
      {"bf16_to_f32_16M", {16 * 1024 * 1024}, "cpu/bf16/a/jit", "cpu/f32/a/jit"},
      {"f32_to_s8_16M", {16 * 1024 * 1024}, "cpu/f32/a/jit", "cpu/s8/a/jit"},
  };
  return c;
}

std::int64_t bytes_moved(const transform_case& c) {
  const auto a = pc::kernel_type::parse(c.from), b = pc::kernel_type::parse(c.to);
  std::int64_t n = 1;
  for (auto d : c.dims) n *= d;
  return n * static_cast<std::int64_t>(pc::size_of(a.data_type) + pc::size_of(b.data_type));
}

void bm_primcache(benchmark::State& state, const transform_case& c) {
  pc::set_num_threads(static_cast<int>(state.range(0)));
  static pc::engine eng(pc::engine_kind::cpu, 0);
  const auto from = pc::kernel_type::parse(c.from), to = pc::kernel_type::parse(c.to);
  pc::memory src(from.layout.desc_for(c.dims, from.data_type), eng);
  pc::memory dst(to.layout.desc_for(c.dims, to.data_type), eng);
  std::memset(src.get_data_handle(), 1, src.get_desc().size_bytes());
  std::memset(dst.get_data_handle(), 0, dst.get_desc().size_bytes());
  try {
    pc::execute_plan(*pc::plan_transform(from, to), src, dst);  // compiles the reorder
  } catch (const pc::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) {
    // A plan-cache hit and a primitive-cache hit per call, as an executor pays.
    pc::execute_plan(*pc::plan_transform(from, to), src, dst);
  }
  state.SetBytesProcessed(state.iterations() * bytes_moved(c));
}

dnnl::memory::data_type dnnl_dt(pc::data_type dt) {
  switch (dt) {
    case pc::data_type::bf16: return dnnl::memory::data_type::bf16;
    case pc::data_type::s8: return dnnl::memory::data_type::s8;
    default: return dnnl::memory::data_type::f32;
  }
}

dnnl::memory::format_tag dnnl_tag(const pc::layout& l) {
  switch (l.tag()) {
    case pc::format_tag::acdb: return dnnl::memory::format_tag::nhwc;
    case pc::format_tag::aBcd16b: return dnnl::memory::format_tag::nChw16c;
    case pc::format_tag::a: return dnnl::memory::format_tag::a;
    default: return dnnl::memory::format_tag::nchw;
  }
}

void set_omp_threads(int n) {
  using fn = void (*)(int);
  static fn set = reinterpret_cast<fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set) set(n);
}

void bm_onednn(benchmark::State& state, const transform_case& c) {
  set_omp_threads(static_cast<int>(state.range(0)));
  const auto from = pc::kernel_type::parse(c.from), to = pc::kernel_type::parse(c.to);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  dnnl::memory::dims dims(c.dims.begin(), c.dims.end());
  dnnl::memory src({dims, dnnl_dt(from.data_type), dnnl_tag(from.layout)}, eng);
  dnnl::memory dst({dims, dnnl_dt(to.data_type), dnnl_tag(to.layout)}, eng);
  std::memset(src.get_data_handle(), 1, src.get_desc().get_size());
  std::memset(dst.get_data_handle(), 0, dst.get_desc().get_size());
  dnnl::reorder r(src, dst);
  for (auto _ : state) {
    r.execute(strm, src, dst);
    strm.wait();
  }
  state.SetBytesProcessed(state.iterations() * bytes_moved(c));
}

// Copies n bytes with non-temporal stores (they bypass the caches, so the
// destination is not read first): unaligned 16-byte loads, aligned streaming
// stores, the ragged ends by memcpy.
void stream_copy(char* dst, const char* src, std::size_t n) {
  const std::size_t head =
      std::min(n, (16 - reinterpret_cast<std::uintptr_t>(dst) % 16) % std::size_t{16});
  std::memcpy(dst, src, head);
  std::size_t i = head;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  _mm_sfence();
  std::memcpy(dst + i, src + i, n - i);
}

// Reads src_bytes and writes dst_bytes (one a power-of-two multiple of the
// other, both multiples of 64) with non-temporal stores: a copy shaped like
// a transform that widens (each src line stored dst/src times) or narrows
// (src/dst src lines folded into each dst line), whose bytes read and
// written are the transform's own.
void shaped_copy(char* dst, std::size_t dst_bytes, const char* src, std::size_t src_bytes) {
  auto load = [](const char* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  auto store = [](char* p, __m128i v) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), v); };
  if (dst_bytes >= src_bytes) {
    const std::size_t k = dst_bytes / src_bytes;
    for (std::size_t i = 0; i + 64 <= src_bytes; i += 64) {
      const __m128i a = load(src + i), b = load(src + i + 16), c = load(src + i + 32),
                    d = load(src + i + 48);
      for (std::size_t r = 0; r < k; ++r) {
        char* o = dst + i * k + r * 64;
        store(o, a);
        store(o + 16, b);
        store(o + 32, c);
        store(o + 48, d);
      }
    }
  } else {
    const std::size_t k = src_bytes / dst_bytes;
    for (std::size_t o = 0; o + 64 <= dst_bytes; o += 64) {
      const char* in = src + o * k;
      __m128i a = load(in), b = load(in + 16), c = load(in + 32), d = load(in + 48);
      for (std::size_t r = 1; r < k; ++r) {
        a = _mm_xor_si128(a, load(in + r * 64));
        b = _mm_xor_si128(b, load(in + r * 64 + 16));
        c = _mm_xor_si128(c, load(in + r * 64 + 32));
        d = _mm_xor_si128(d, load(in + r * 64 + 48));
      }
      store(dst + o, a);
      store(dst + o + 16, b);
      store(dst + o + 32, c);
      store(dst + o + 48, d);
    }
  }
  _mm_sfence();
}

// The memory-bandwidth limit the transforms are held to: a copy of
// bytes_moved / 2 bytes (so that bytes read plus written equal the
// transform's), split across the threads, each iteration timed once with
// memcpy and once with streaming stores; the iteration's time is the faster
// of the two (counters memcpy_GBps and stream_GBps give each on its own).
// Counter shaped_GBps (not part of the iteration's time): shaped_copy with
// the transform's own split of bytes read and written (the same as the
// copy's for f32 -> f32; a third read, two thirds written for bf16 -> f32),
// the limit for a transform whose speed is set by what it writes.
void bm_memcpy(benchmark::State& state, const transform_case& c) {
  const auto threads = static_cast<std::size_t>(state.range(0));
  const auto bytes = static_cast<std::size_t>(bytes_moved(c) / 2);
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const std::size_t part = (bytes + threads - 1) / threads;
  std::int64_t elems = 1;
  for (auto d : c.dims) elems *= d;
  const auto from = pc::kernel_type::parse(c.from), to = pc::kernel_type::parse(c.to);
  const auto src_bytes = static_cast<std::size_t>(elems) * pc::size_of(from.data_type);
  const auto dst_bytes = static_cast<std::size_t>(elems) * pc::size_of(to.data_type);
  std::vector<char> shaped_src(src_bytes, 1), shaped_dst(dst_bytes, 0);
  auto shaped = [&] {
    // Whole lines per thread, in the same proportion on both sides.
    const std::size_t lines = std::min(src_bytes, dst_bytes) / 64;
    const std::size_t per = (lines + threads - 1) / threads;
    const std::size_t ks = src_bytes / (lines * 64), kd = dst_bytes / (lines * 64);
    auto run = [&](std::size_t t) {
      const std::size_t lo = std::min(lines, t * per), hi = std::min(lines, lo + per);
      if (lo >= hi) return;
      shaped_copy(shaped_dst.data() + lo * 64 * kd, (hi - lo) * 64 * kd,
                  shaped_src.data() + lo * 64 * ks, (hi - lo) * 64 * ks);
    };
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(run, t);
    run(0);
    for (auto& t : pool) t.join();
    benchmark::DoNotOptimize(shaped_dst.data());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto timed = [&](bool streaming) {
    auto copy = [&](std::size_t t) {
      const std::size_t lo = t * part, hi = std::min(bytes, lo + part);
      if (lo >= hi) return;
      if (streaming) {
        stream_copy(dst.data() + lo, src.data() + lo, hi - lo);
      } else {
        std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
      }
    };
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(copy, t);
    copy(0);
    for (auto& t : pool) t.join();
    benchmark::DoNotOptimize(dst.data());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double memcpy_s = 0, stream_s = 0, shaped_s = 0;
  for (auto _ : state) {
    const double m = timed(false), s = timed(true);
    memcpy_s += m;
    stream_s += s;
    state.SetIterationTime(std::min(m, s));
    shaped_s += shaped();  // manual time: not in the iteration's time
  }
  const double moved = static_cast<double>(state.iterations()) * static_cast<double>(bytes) * 2;
  if (memcpy_s > 0) state.counters["memcpy_GBps"] = moved / memcpy_s / 1e9;
  if (stream_s > 0) state.counters["stream_GBps"] = moved / stream_s / 1e9;
  if (shaped_s > 0) {
    state.counters["shaped_GBps"] = static_cast<double>(state.iterations()) *
                                    static_cast<double>(src_bytes + dst_bytes) / shaped_s / 1e9;
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes) * 2);
}

int register_all() {
  for (const auto& c : cases()) {
    using bench_fn = void (*)(benchmark::State&, const transform_case&);
    const std::pair<std::string, bench_fn> runs[] = {{"BM_Transform/primcache/", bm_primcache},
                                                     {"BM_Transform/onednn/", bm_onednn},
                                                     {"BM_Memcpy/", bm_memcpy}};
    for (const auto& [who, fn] : runs) {
      auto* b = benchmark::RegisterBenchmark((who + c.name).c_str(), fn, c)
                    ->Arg(1)
                    ->Arg(2)
                    ->Unit(benchmark::kMillisecond);
      if (fn == bm_memcpy) {
        b->UseManualTime();
      } else {
        b->UseRealTime();
      }
    }
  }
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
