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
//   bench_ocl_matmul --benchmark_filter='BM_OclMatmul/' --benchmark_repetitions=5
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
// On a GPU whose FP32 lanes per compute unit are known (NVIDIA by compute
// capability, AMD), the BM_OclMatmul rows also report `peak_fraction`, the
// share of the device's FP32 peak reached (compute units x clock x lanes x
// 2 for a fused multiply-add), and the run's context prints the peak:
// issue 9's GPU goal is 50% of it on the large square shapes. CPU devices
// (PoCL) report no fraction.
//
// BM_OclMatmul/primcache rows also report the kernel's own device time
// from the stream's profiling events: device_us per product and
// device_GFLOPS. CLBlast's rows do not: its Gemm may run several kernels
// (copies, transposes) and returns the event of the last one only, so the
// comparison stays on wall time.
//
// PoCL's own kernel cache is disabled (POCL_KERNEL_CACHE=0) unless the
// caller sets it. PRIMCACHE_OCL_DEVICE picks the device.
#include <benchmark/benchmark.h>

#include <CL/cl_ext.h>
#include <clblast.h>

#include <cstdlib>
#include <cstring>
#include <optional>
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

// FP32 lanes per streaming multiprocessor of an NVIDIA compute capability;
// 0 when not known.
int nvidia_fp32_lanes(cl_uint major, cl_uint minor) {
  switch (major) {
    case 3: return 192;
    case 5: return 128;
    case 6: return minor == 0 ? 64 : 128;
    case 7: return 64;
    case 8: return minor == 0 ? 64 : 128;
    case 9: return 128;
    default: return 0;
  }
}

// The device's FP32 peak in GFLOPS: compute units x clock x lanes per unit
// x 2 (an FMA is two operations); 0 for CPU devices and GPUs whose lanes
// per unit are not known.
double fp32_peak_gflops(cl_device_id dev) {
  cl_device_type type = 0;
  cl_uint units = 0, mhz = 0;
  if (clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, nullptr) != CL_SUCCESS ||
      (type & CL_DEVICE_TYPE_GPU) == 0 ||
      clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr) !=
          CL_SUCCESS ||
      clGetDeviceInfo(dev, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof mhz, &mhz, nullptr) !=
          CL_SUCCESS) {
    return 0;
  }
  char vendor[256] = {};
  clGetDeviceInfo(dev, CL_DEVICE_VENDOR, sizeof vendor - 1, vendor, nullptr);
  int lanes = 0;
  if (std::strstr(vendor, "NVIDIA") != nullptr) {
    cl_uint major = 0, minor = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, sizeof major, &major,
                        nullptr) == CL_SUCCESS &&
        clGetDeviceInfo(dev, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV, sizeof minor, &minor,
                        nullptr) == CL_SUCCESS) {
      lanes = nvidia_fp32_lanes(major, minor);
    }
  } else if (std::strstr(vendor, "Advanced Micro Devices") != nullptr ||
             std::strstr(vendor, "AMD") != nullptr) {
    lanes = 64;  // GCN and RDNA: 64 FP32 lanes per compute unit
  }
  return 2.0 * units * (mhz * 1e-3) * lanes;
}

double device_peak_gflops() {
  static const double peak = [] {
    try {
      return fp32_peak_gflops(ocl_interop::get_device(engine(engine_kind::gpu, 0)));
    } catch (const error&) {
      return 0.0;  // no OpenCL device: the benchmarks report it themselves
    }
  }();
  return peak;
}

void set_flops(benchmark::State& state, const shape& s) {
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * s.m * s.n * s.k, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
  if (const double peak = device_peak_gflops(); peak > 0) {
    // A rate of (flops per iteration / peak flops): the share of the peak.
    state.counters["peak_fraction"] = benchmark::Counter(
        2.0 * s.m * s.n * s.k / (peak * 1e9), benchmark::Counter::kIsIterationInvariantRate);
  }
}

// From the stream's profiling events (stream::profiled_ns): the kernels'
// own time on the device per iteration (device_us) and the GFLOPS it
// gives (device_GFLOPS), without the enqueue and the wait that the wall
// time holds. Nothing when the stream cannot profile.
void set_device_time(benchmark::State& state, stream& strm, bool profiled, double flops) {
  if (!profiled || state.iterations() == 0) return;
  const std::optional<std::int64_t> ns = strm.profiled_ns();
  strm.stop_profiling();
  if (!ns || *ns <= 0) return;
  const double iterations = static_cast<double>(state.iterations());
  state.counters["device_us"] = static_cast<double>(*ns) * 1e-3 / iterations;
  state.counters["device_GFLOPS"] = flops * iterations / static_cast<double>(*ns);
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
  const bool profiled = strm.reset_profiling();
  for (auto _ : state) {
    prim.execute(strm, args);
    strm.wait();
  }
  set_flops(state, s);
  set_device_time(state, strm, profiled, 2.0 * s.m * s.n * s.k);
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
  if (const double peak = device_peak_gflops(); peak > 0) {
    benchmark::AddCustomContext("fp32_peak_gflops", std::to_string(peak));
  }
  if (!bench_ocl::take_tune_flag(argc, argv)) return 1;
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
