#include <catch2/catch.hpp>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include <llvm/IR/Module.h>

#include "jit/ir_math.hpp"
#include "jit/jit_module.hpp"
#include "kernels.hpp"
#include "primcache/cpu/cpu.hpp"

namespace {

using primcache::cpu_isa;
namespace ci = primcache::cpu_internal;
using cpu_test::elem;
using map_fn = void(const float* x, float* y, std::int64_t n);

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

double gelu_tanh_reference(double x) {
  if (x == -kInf) return -0.0;
  // x * sigmoid(2u): free of the cancellation in 0.5 x (1 + tanh u).
  double v = 2.0 * std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-v));
}

struct math_function {
  const char* name;
  llvm::Value* (*emit)(llvm::IRBuilderBase&, llvm::Value*);
  double (*reference)(double);
  double max_ulp;  // the bound the tests hold the implementation to
};

const std::vector<math_function>& math_functions() {
  static const std::vector<math_function> fns = {
      {"exp", ci::emit_exp, [](double x) { return std::exp(x); }, 1.5},
      {"tanh", ci::emit_tanh, [](double x) { return std::tanh(x); }, 2.0},
      {"sigmoid", ci::emit_sigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 3.0},
      {"erf", ci::emit_erf, [](double x) { return std::erf(x); }, 3.0},
      {"gelu_erf", ci::emit_gelu_erf,
       [](double x) { return x == -kInf ? -0.0 : 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }, 6.0},
      {"gelu_tanh", ci::emit_gelu_tanh, gelu_tanh_reference, 4.0},
  };
  return fns;
}

// The error of `got` against the exact `want`, in units of the float
// spacing at `want` (2^-149 in the subnormal range). NaN and infinities
// must match exactly; an overflow to infinity is exact when `want` is
// beyond FLT_MAX.
double ulp_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : kInf;
  if (std::isnan(got)) return kInf;
  if (std::isinf(got)) {
    bool same_sign = (got > 0) == (want > 0);
    return same_sign && std::fabs(want) >= FLT_MAX ? 0.0 : kInf;
  }
  if (std::isinf(want)) return kInf;
  double a = std::fabs(want);
  int e = a < FLT_MIN ? -126 : std::ilogb(a);
  double ulp = std::ldexp(1.0, e - 23);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

std::vector<float> special_inputs() {
  const float denorm = std::numeric_limits<float>::denorm_min();
  std::vector<float> v = {
      0.0f,     -0.0f,    kNaN,      -kNaN,     INFINITY,    -INFINITY, FLT_MIN,    -FLT_MIN,
      denorm,   -denorm,  FLT_MAX,   -FLT_MAX,  1.0f,        -1.0f,     0.625f,     -0.625f,
      0.5f,     2.0f,     88.72283f, 88.72284f, 88.7228394f, 89.0f,     -87.33654f, -88.0f,
      -103.27f, -103.28f, -103.97f,  -104.0f,   -104.1f,     -150.0f,   1.4142135f, -1.4142135f,
      9.0f,     -9.0f,    3.92f,     -13.0f,    -14.5f,      1e-20f,    -1e-20f,    1e20f,
      -1e20f,   1e30f,    -1e30f,    4e19f,     -4e19f};
  // Around the bounds past which the gelus take their known results
  // instead of computing their tails (ir_math.cpp, gelu_known_lanes).
  for (float bound : {6.0f, -11.0f, -14.5f}) {
    v.push_back(std::nextafter(bound, -INFINITY));
    v.push_back(bound);
    v.push_back(std::nextafter(bound, INFINITY));
  }
  return v;
}

// Specials, a dense uniform grid over [-16, 16], and a sweep of bit patterns
// that visits every binade of both signs.
std::vector<float> accuracy_inputs(std::uint32_t stride) {
  std::vector<float> v = special_inputs();
  for (int i = -(1 << 19); i <= (1 << 19); ++i) v.push_back(static_cast<float>(i) / 32768.0f);
  for (std::uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += stride) {
    v.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  }
  return v;
}

std::unique_ptr<ci::jit_module> compile_math(cpu_isa isa) {
  auto m = ci::jit_module::compile("math", isa, [&](llvm::Module& mod) {
    for (const auto& f : math_functions()) {
      cpu_test::build_map(mod, isa, f.name, elem::f32, elem::f32, f.emit);
    }
  });
  INFO((m ? std::string() : m.why().message));
  REQUIRE(m.has_value());
  return std::move(m).value();
}

struct accuracy {
  double max_ulp = 0.0;
  float worst_input = 0.0f;
  float worst_output = 0.0f;
};

accuracy measure(const ci::jit_module& m, const math_function& f, const std::vector<float>& x,
                 float lo = -INFINITY, float hi = INFINITY) {
  std::vector<float> y(x.size());
  m.lookup_function<map_fn>(f.name).value()(x.data(), y.data(),
                                            static_cast<std::int64_t>(x.size()));
  accuracy a;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!(x[i] >= lo && x[i] <= hi) && !std::isnan(x[i])) continue;
    double e = ulp_error(y[i], f.reference(static_cast<double>(x[i])));
    if (e > a.max_ulp || std::isnan(e)) {
      a = {e, x[i], y[i]};
    }
  }
  return a;
}

}  // namespace

TEST_CASE("IR math matches double-precision references within the stated ulp bounds",
          "[cpu][math]") {
  auto isa = GENERATE(cpu_isa::x86_64, cpu_isa::avx2, cpu_isa::avx512_core);
  if (primcache::detected_isa() < isa) {
    WARN("host lacks " << primcache::to_string(isa) << ": its math is not run");
    return;
  }
  auto m = compile_math(isa);
  const auto inputs = accuracy_inputs(4093);
  for (const auto& f : math_functions()) {
    accuracy a = measure(*m, f, inputs);
    INFO(primcache::to_string(isa) << " " << f.name << ": " << a.max_ulp << " ulp at x = "
                                   << a.worst_input << " (got " << a.worst_output << ")");
    CHECK(a.max_ulp <= f.max_ulp);
  }
}

TEST_CASE("IR math: special values give the mathematical limits", "[cpu][math]") {
  auto m = compile_math(primcache::effective_isa());
  auto run = [&](const char* name, float x) {
    float y = 0;
    m->lookup_function<map_fn>(name).value()(&x, &y, 1);
    return y;
  };
  CHECK(run("exp", -INFINITY) == 0.0f);
  CHECK(run("exp", INFINITY) == INFINITY);
  CHECK(run("exp", 0.0f) == 1.0f);
  CHECK(run("exp", 100.0f) == INFINITY);
  CHECK(run("exp", -200.0f) == 0.0f);
  CHECK(run("exp", -100.0f) > 0.0f);  // subnormal, not flushed
  CHECK(run("tanh", INFINITY) == 1.0f);
  CHECK(run("tanh", -INFINITY) == -1.0f);
  CHECK(std::signbit(run("tanh", -0.0f)));
  CHECK(run("sigmoid", INFINITY) == 1.0f);
  CHECK(run("sigmoid", -INFINITY) == 0.0f);
  CHECK(run("sigmoid", 0.0f) == 0.5f);
  CHECK(run("erf", INFINITY) == 1.0f);
  CHECK(run("erf", -INFINITY) == -1.0f);
  CHECK(run("gelu_erf", INFINITY) == INFINITY);
  CHECK(run("gelu_erf", -INFINITY) == 0.0f);
  CHECK(run("gelu_tanh", INFINITY) == INFINITY);
  CHECK(run("gelu_tanh", -INFINITY) == 0.0f);
  for (const auto& f : math_functions()) {
    INFO(f.name);
    CHECK(std::isnan(run(f.name, kNaN)));
  }
}

TEST_CASE("math kernels rebuilt from their captured object give bitwise identical results",
          "[cpu][math][object]") {
  const cpu_isa isa = primcache::effective_isa();
  auto original = compile_math(isa);
  auto reloaded = ci::jit_module::load("math_reloaded", original->object());
  REQUIRE(reloaded.has_value());
  const auto x = accuracy_inputs(65521);
  for (const auto& f : math_functions()) {
    std::vector<float> a(x.size()), b(x.size());
    auto n = static_cast<std::int64_t>(x.size());
    original->lookup_function<map_fn>(f.name).value()(x.data(), a.data(), n);
    reloaded.value()->lookup_function<map_fn>(f.name).value()(x.data(), b.data(), n);
    INFO(f.name);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  }
}

// Not run by default: the table docs/cpu.md quotes, over 34 million inputs.
TEST_CASE("IR math accuracy report", "[.][cpu][math][report]") {
  for (cpu_isa isa : {cpu_isa::x86_64, cpu_isa::avx2, cpu_isa::avx512_core}) {
    if (primcache::detected_isa() < isa) continue;
    auto m = compile_math(isa);
    const auto inputs = accuracy_inputs(127);
    for (const auto& f : math_functions()) {
      accuracy a = measure(*m, f, inputs);
      std::cout << primcache::to_string(isa) << "\t" << f.name << "\tmax " << a.max_ulp
                << " ulp at x = " << a.worst_input << "\n";
      CHECK(a.max_ulp <= f.max_ulp);
    }
  }
}
