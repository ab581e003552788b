// jit_profile — where a specialized compilation goes, for the matmul and the
// 3x3 convolution of bench_create's BM_CreateMiss. A measuring tool, not a
// benchmark: it creates each primitive from a cleared cache N times under a
// compile_probe (jit/compiler.hpp) and prints the median of each phase, in
// milliseconds of the creating thread's CPU time (IR
// construction, verification, the IR pipeline, code generation, linking),
// the IR's size before and after the pipeline and the object's size.
//
//   jit_profile [--iterations=N] [--kernel=matmul|conv|both|conv1|none] [--pipeline=TEXT]
//               [--codegen-level=0..3] [--fast-isel] [--time-passes]
//               [--lsr=0|1] [--dump=PREFIX] [--llvm=OPTION]...
//               [--layer=IC,OC,IN,K,STRIDE,PAD] [--dw=C,IN,STRIDE]
//
// --pipeline takes PassBuilder text, "O1".."O3" (the default pipelines) or ""
// (no IR pass); without it each kernel's own settings run. --lsr turns loop
// strength reduction on or off for every kernel. --time-passes
// turns on LLVM's pass timing (the IR passes through the new pass manager's
// instrumentation, code generation's through the legacy pass manager) and
// prints LLVM's report, summed over every compilation, at the end.
// --kernel=conv1 profiles bench_conv's 7x7 first layer instead; --layer
// adds a convolution as bench_conv creates it (nChw16c, square, bias;
// --kernel=none profiles it alone); --dw likewise adds a 3x3 depthwise
// convolution as bench_conv's BM_CreateMiss/*/dw_* rows create it (C
// channels, groups C, padding 1; --dw=128,56,1 is dw_3x3_128_56). --dump
// writes the first creation's IR after the pipeline and its object to
// PREFIX<label>.<kernel>.ll / .o; --llvm passes an option to LLVM's own
// command line (-disable-lsr, -enable-misched=false, ...), for experiments.
#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <llvm/IR/PassTimingInfo.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "jit/compiler.hpp"
#include "jit/process_jit.hpp"
#include "jit/target.hpp"
#include "kernels/conv_generator.hpp"
#include "primcache/runtime/runtime.hpp"

namespace {

namespace pc = primcache;
namespace ci = primcache::cpu_internal;

constexpr std::int64_t kM = 128, kN = 768, kK = 3072;
constexpr std::int64_t kC = 128, kHW = 28;

pc::engine& cpu() {
  static pc::engine e(pc::engine_kind::cpu, 0);
  return e;
}

pc::primitive make_matmul() {
  using tag = pc::format_tag;
  pc::memory::desc a({kM, kK}, pc::data_type::f32, tag::ab);
  pc::memory::desc b({kK, kN}, pc::data_type::f32, tag::ab);
  pc::memory::desc c({kM, kN}, pc::data_type::f32, tag::ab);
  return pc::matmul(pc::matmul::primitive_desc(pc::matmul::desc(a, b, c), cpu()));
}

// A convolution as bench_conv creates it: nChw16c activations, weights
// `any`, bias, square kernel, stride and padding.
pc::primitive make_conv_layer(std::int64_t ic, std::int64_t oc, std::int64_t in, std::int64_t k,
                              std::int64_t stride, std::int64_t pad) {
  using tag = pc::format_tag;
  const std::int64_t out = (in + 2 * pad - k) / stride + 1;
  pc::memory::desc src({1, ic, in, in}, pc::data_type::f32, tag::nChw16c);
  pc::memory::desc wei({oc, ic, k, k}, pc::data_type::f32, tag::any);
  pc::memory::desc bias({oc}, pc::data_type::f32, tag::a);
  pc::memory::desc dst({1, oc, out, out}, pc::data_type::f32, tag::nChw16c);
  return pc::convolution_forward(pc::convolution_forward::primitive_desc(
      pc::convolution_forward::desc(pc::prop_kind::forward_inference,
                                    pc::algorithm::convolution_direct, src, wei, bias, dst,
                                    {stride, stride}, {pad, pad}, {pad, pad}),
      cpu()));
}

// A 3x3 depthwise convolution as bench_conv's BM_CreateMiss dw rows create
// it: nChw16c activations, weights `any`, bias, padding 1.
pc::primitive make_dw_layer(std::int64_t c, std::int64_t in, std::int64_t stride) {
  using tag = pc::format_tag;
  const std::int64_t out = (in + 2 - 3) / stride + 1;
  pc::memory::desc src({1, c, in, in}, pc::data_type::f32, tag::nChw16c);
  pc::memory::desc wei({c, 1, 1, 3, 3}, pc::data_type::f32, tag::any);
  pc::memory::desc bias({c}, pc::data_type::f32, tag::a);
  pc::memory::desc dst({1, c, out, out}, pc::data_type::f32, tag::nChw16c);
  return pc::convolution_forward(pc::convolution_forward::primitive_desc(
      pc::convolution_forward::desc(pc::prop_kind::forward_inference,
                                    pc::algorithm::convolution_direct, src, wei, bias, dst,
                                    {stride, stride}, {1, 1}, {1, 1}),
      cpu()));
}

// bench_create's convolution: 3x3 128 -> 128 at 28x28.
pc::primitive make_conv() {
  return make_conv_layer(kC, kC, kHW, 3, 1, 1);
}

// bench_conv's first layer: 7x7 stride 2, 3 -> 64 channels at 224x224.
pc::primitive make_conv1() {
  return make_conv_layer(3, 64, 224, 7, 2, 3);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

struct options {
  int iterations = 11;
  std::string kernel = "both";
  bool time_passes = false;
  std::string dump;  // file prefix for each kernel's optimized IR and object
  // --layer=IC,OC,IN,K,STRIDE,PAD: a bench_conv-style layer instead.
  std::array<std::int64_t, 6> layer{};
  bool has_layer = false;
  // --dw=C,IN,STRIDE: a 3x3 depthwise layer.
  std::array<std::int64_t, 3> dw{};
  bool has_dw = false;
};

// The overrides each creation's compile_probe gets.
struct settings_t {
  std::optional<std::string> pipeline;
  std::optional<int> codegen_level;
  std::optional<bool> fast_isel;
  std::optional<bool> loop_strength_reduction;
};

void profile(const char* label, const std::function<pc::primitive()>& make, const options& opt,
             const settings_t& settings) {
  std::vector<double> wall, total, build, verify, optimize, codegen, link;
  std::size_t before = 0, after = 0, bytes = 0;
  std::string names;
  for (int i = 0; i < opt.iterations; ++i) {
    pc::set_primitive_cache_capacity(0);
    pc::set_primitive_cache_capacity(1024);
    ci::compile_probe probe;
    probe.pipeline = settings.pipeline;
    probe.codegen_level = settings.codegen_level;
    probe.fast_isel = settings.fast_isel;
    probe.loop_strength_reduction = settings.loop_strength_reduction;
    probe.keep_code = !opt.dump.empty() && i == 0;
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ci::compile_probe::thread_cpu_ms();
    pc::primitive p = make();
    total.push_back(ci::compile_probe::thread_cpu_ms() - cpu_start);
    wall.push_back(ms(std::chrono::steady_clock::now() - start));
    double b = 0, v = 0, o = 0, c = 0, l = 0;
    before = after = bytes = 0;
    names.clear();
    for (const ci::compile_profile& cp : probe.profiles) {
      b += cp.build_ms;
      v += cp.verify_ms;
      o += cp.optimize_ms;
      c += cp.codegen_ms;
      l += cp.link_ms;
      before += cp.instructions_before;
      after += cp.instructions_after;
      bytes += cp.object_bytes;
      names.append(names.empty() ? "" : ",").append(cp.name);
    }
    if (probe.keep_code) {
      for (const ci::compile_profile& cp : probe.profiles) {
        const std::string base = opt.dump + label + "." + cp.name;
        if (std::FILE* f = std::fopen((base + ".ll").c_str(), "w")) {
          std::fwrite(cp.ir.data(), 1, cp.ir.size(), f);
          std::fclose(f);
        }
        if (std::FILE* f = std::fopen((base + ".o").c_str(), "wb")) {
          std::fwrite(cp.object.data(), 1, cp.object.size(), f);
          std::fclose(f);
        }
      }
    }
    build.push_back(b);
    verify.push_back(v);
    optimize.push_back(o);
    codegen.push_back(c);
    link.push_back(l);
  }
  std::printf(
      "%-8s kernels=%s  median of %d (ms of CPU): creation %.2f (wall %.2f) | IR build %.2f  "
      "verify %.2f  "
      "optimize %.2f  codegen %.2f  link %.2f | IR instructions %zu -> %zu, object %zu bytes\n",
      label, names.c_str(), opt.iterations, median(total), median(wall), median(build),
      median(verify), median(optimize), median(codegen), median(link), before, after, bytes);
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  settings_t settings;
  std::vector<std::string> llvm_args;  // LLVM's own options (cl::opt), for experiments
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&](std::string_view flag) { return std::string(a.substr(flag.size())); };
    if (a.starts_with("--iterations=")) {
      opt.iterations = std::max(1, std::atoi(value("--iterations=").c_str()));
    } else if (a.starts_with("--kernel=")) {
      opt.kernel = value("--kernel=");
    } else if (a.starts_with("--pipeline=")) {
      settings.pipeline = value("--pipeline=");
    } else if (a.starts_with("--codegen-level=")) {
      settings.codegen_level = std::clamp(std::atoi(value("--codegen-level=").c_str()), 0, 3);
    } else if (a == "--fast-isel") {
      settings.fast_isel = true;
    } else if (a.starts_with("--lsr=")) {
      settings.loop_strength_reduction = value("--lsr=") != "0";
    } else if (a == "--time-passes") {
      opt.time_passes = true;
    } else if (a.starts_with("--dump=")) {
      opt.dump = value("--dump=");
    } else if (a.starts_with("--layer=")) {
      const std::string v = value("--layer=");
      if (std::sscanf(v.c_str(),
                      "%" SCNd64 ",%" SCNd64 ",%" SCNd64 ",%" SCNd64 ",%" SCNd64 ",%" SCNd64,
                      &opt.layer[0], &opt.layer[1], &opt.layer[2], &opt.layer[3], &opt.layer[4],
                      &opt.layer[5]) != 6) {
        std::fprintf(stderr, "jit_profile: --layer takes IC,OC,IN,K,STRIDE,PAD\n");
        return 2;
      }
      opt.has_layer = true;
    } else if (a.starts_with("--dw=")) {
      const std::string v = value("--dw=");
      if (std::sscanf(v.c_str(), "%" SCNd64 ",%" SCNd64 ",%" SCNd64, &opt.dw[0], &opt.dw[1],
                      &opt.dw[2]) != 3) {
        std::fprintf(stderr, "jit_profile: --dw takes C,IN,STRIDE\n");
        return 2;
      }
      opt.has_dw = true;
    } else if (a.starts_with("--llvm=")) {
      llvm_args.push_back(value("--llvm="));
    } else {
      std::fprintf(stderr, "jit_profile: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (opt.time_passes) llvm_args.insert(llvm_args.begin(), "-time-passes");
  if (!llvm_args.empty()) {
    std::vector<const char*> llvm_argv{"jit_profile"};
    for (const std::string& a : llvm_args) llvm_argv.push_back(a.c_str());
    if (!llvm::cl::ParseCommandLineOptions(static_cast<int>(llvm_argv.size()), llvm_argv.data(), "",
                                           &llvm::errs())) {
      return 2;
    }
  }
  // The settings each kernel compiles under: the matmul's by its name, the
  // convolution's stated by its generator (no IR pass; None, the depthwise
  // one at Default).
  const std::pair<const char*, ci::compile_settings> kernels[] = {
      {"matmul_f32", ci::default_compile_settings("matmul_f32")},
      {"conv_fwd_f32", ci::conv_compile_settings},
      {"conv_fwd_f32 (depthwise)", ci::dw_conv_compile_settings}};
  for (const auto& [kernel, kernel_settings] : kernels) {
    const std::string pipeline = settings.pipeline ? "\"" + *settings.pipeline + "\""
                                 : *kernel_settings.pipeline != 0
                                     ? std::string(kernel_settings.pipeline)
                                     : std::string("none");
    const bool lsr =
        settings.loop_strength_reduction.value_or(kernel_settings.loop_strength_reduction);
    std::printf("%s: pipeline %s; codegen level %d; loop strength reduction %s%s\n", kernel,
                pipeline.c_str(), settings.codegen_level.value_or(kernel_settings.codegen_level),
                lsr ? "on" : "off", settings.fast_isel ? ", FastISel" : "");
  }

  // What the pool of target machines saves per compilation: creating one.
  if (auto jit = ci::process_jit(); !jit) return 1;
  std::vector<double> tm_ms;
  for (int i = 0; i < opt.iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto tm = ci::target_machine_builder(pc::effective_isa()).value().createTargetMachine();
    if (!tm) return 1;
    tm_ms.push_back(ms(std::chrono::steady_clock::now() - start));
  }
  std::printf("target machine creation (%s): median %.3f ms\n",
              std::string(pc::to_string(pc::effective_isa())).c_str(), median(tm_ms));

  if (opt.kernel == "matmul" || opt.kernel == "both") profile("matmul", make_matmul, opt, settings);
  if (opt.kernel == "conv" || opt.kernel == "both") profile("conv3x3", make_conv, opt, settings);
  if (opt.kernel == "conv1") profile("conv1", make_conv1, opt, settings);
  if (opt.has_layer) {
    const auto& l = opt.layer;
    profile(
        "layer", [&] { return make_conv_layer(l[0], l[1], l[2], l[3], l[4], l[5]); }, opt,
        settings);
  }
  if (opt.has_dw) {
    const auto& l = opt.dw;
    profile(
        "dw", [&] { return make_dw_layer(l[0], l[1], l[2]); }, opt, settings);
  }
  if (opt.time_passes) llvm::reportAndResetTimings(&llvm::outs());
  return 0;
}
