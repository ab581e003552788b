#include <catch2/catch.hpp>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
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

// Scalar references, written independently of the kernels' bit tricks.

std::uint16_t bf16_reference(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  std::uint32_t kept = u >> 16;
  std::uint32_t dropped = u & 0xFFFF;
  if (dropped > 0x8000 || (dropped == 0x8000 && (kept & 1))) ++kept;
  return static_cast<std::uint16_t>(kept);
}

// Scales |x| so that one f16 step is 1, rounds that to nearest even
// (nearbyint in the default mode) and assembles the bits.
std::uint16_t f16_reference(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000);
  if (std::isnan(x)) return sign | 0x7E00 | ((u >> 13) & 0x3FF);
  double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return sign | 0x7C00;  // 65520 is the tie between 65504 and 2^16
  if (a < 0x1p-14) {
    return sign | static_cast<std::uint16_t>(std::nearbyint(a * 0x1p24));  // 0x400 is 2^-14
  }
  int e = std::ilogb(a);
  double m = std::nearbyint(std::ldexp(a, 10 - e));  // [1024, 2048]
  if (m == 2048.0) {
    m = 1024.0;
    ++e;
  }
  if (e > 15) return sign | 0x7C00;
  return sign | static_cast<std::uint16_t>(((e + 15) << 10) | (static_cast<int>(m) - 1024));
}

float bf16_to_float_reference(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

float f16_to_float_reference(std::uint16_t h) {
  int e = (h >> 10) & 0x1F;
  int m = h & 0x3FF;
  float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (e == 0x1F) {
    if (m == 0) return sign * INFINITY;
    // A quiet NaN whose payload is the f16 payload, as the hardware widens.
    std::uint32_t bits = (h & 0x8000u) << 16 | 0x7F800000u | static_cast<std::uint32_t>(m) << 13;
    return std::bit_cast<float>(bits);
  }
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
  return sign * std::ldexp(static_cast<float>(1024 + m), e - 25);
}

template <typename Int>
Int saturate_reference(float x) {
  if (std::isnan(x)) return 0;
  double r = std::nearbyint(static_cast<double>(x));
  if (r < std::numeric_limits<Int>::min()) return std::numeric_limits<Int>::min();
  if (r > std::numeric_limits<Int>::max()) return std::numeric_limits<Int>::max();
  return static_cast<Int>(r);
}

std::unique_ptr<ci::jit_module> compile_conversions(cpu_isa isa) {
  auto m = ci::jit_module::compile("conversions", isa, [&](llvm::Module& mod) {
    cpu_test::build_map(mod, isa, "to_bf16", elem::f32, elem::i16, ci::emit_f32_to_bf16);
    cpu_test::build_map(mod, isa, "to_f16", elem::f32, elem::i16, ci::emit_f32_to_f16);
    cpu_test::build_map(mod, isa, "from_bf16", elem::i16, elem::f32, ci::emit_bf16_to_f32);
    cpu_test::build_map(mod, isa, "from_f16", elem::i16, elem::f32, ci::emit_f16_to_f32);
    cpu_test::build_map(mod, isa, "to_s8", elem::f32, elem::i8, ci::emit_f32_to_s8);
    cpu_test::build_map(mod, isa, "to_u8", elem::f32, elem::i8, ci::emit_f32_to_u8);
    cpu_test::build_map(mod, isa, "to_s32", elem::f32, elem::i32, ci::emit_f32_to_s32);
    cpu_test::build_map(mod, isa, "round", elem::f32, elem::f32, ci::emit_round_half_even);
  });
  INFO((m ? std::string() : m.why().message));
  REQUIRE(m.has_value());
  return std::move(m).value();
}

template <typename In, typename Out>
std::vector<Out> run(const ci::jit_module& m, const char* name, const std::vector<In>& in) {
  std::vector<Out> out(in.size());
  m.lookup_function<void(const In*, Out*, std::int64_t)>(name).value()(
      in.data(), out.data(), static_cast<std::int64_t>(in.size()));
  return out;
}

// Counts mismatches between a kernel and a reference over every float whose
// bits are hi << shift | lo for all hi and the given low patterns, in
// batches; remembers the first mismatch.
struct sweep_result {
  std::uint64_t checked = 0;
  std::uint64_t mismatches = 0;
  std::uint32_t first_bad = 0;
};

template <typename Reference>
sweep_result sweep_to_16(const ci::jit_module& m, const char* name, unsigned shift,
                         const std::vector<std::uint32_t>& lows, Reference reference) {
  sweep_result r;
  constexpr std::size_t batch = 1 << 16;
  std::vector<float> in;
  in.reserve(batch);
  auto flush = [&] {
    auto out = run<float, std::uint16_t>(m, name, in);
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (out[i] != reference(in[i])) {
        if (r.mismatches++ == 0) r.first_bad = std::bit_cast<std::uint32_t>(in[i]);
      }
    }
    r.checked += in.size();
    in.clear();
  };
  const std::uint64_t highs = std::uint64_t(1) << (32 - shift);
  for (std::uint64_t hi = 0; hi < highs; ++hi) {
    for (std::uint32_t lo : lows) {
      in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(hi << shift) | lo));
      if (in.size() == batch) flush();
    }
  }
  if (!in.empty()) flush();
  return r;
}

// The kernels per ISA; AVX-512 only where the host has it.
cpu_isa conversion_isa() {
  auto isa = GENERATE(cpu_isa::x86_64, cpu_isa::avx2, cpu_isa::avx512_core);
  return isa;
}

}  // namespace

TEST_CASE("bf16 and f16 widen to float exactly, for every 16-bit pattern", "[cpu][convert]") {
  cpu_isa isa = conversion_isa();
  if (primcache::detected_isa() < isa) return;
  INFO("isa " << primcache::to_string(isa));
  auto m = compile_conversions(isa);
  std::vector<std::uint16_t> all(1 << 16);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  auto bf = run<std::uint16_t, float>(*m, "from_bf16", all);
  auto hf = run<std::uint16_t, float>(*m, "from_f16", all);
  int bf_bad = 0, hf_bad = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    std::uint32_t want_bf = std::bit_cast<std::uint32_t>(bf16_to_float_reference(all[i]));
    std::uint32_t want_hf = std::bit_cast<std::uint32_t>(f16_to_float_reference(all[i]));
    bf_bad += std::bit_cast<std::uint32_t>(bf[i]) != want_bf;
    hf_bad += std::bit_cast<std::uint32_t>(hf[i]) != want_hf;
  }
  CHECK(bf_bad == 0);
  CHECK(hf_bad == 0);
}

TEST_CASE("float narrows to bf16 and f16 rounding to nearest even at every boundary",
          "[cpu][convert]") {
  cpu_isa isa = conversion_isa();
  if (primcache::detected_isa() < isa) return;
  INFO("isa " << primcache::to_string(isa));
  auto m = compile_conversions(isa);

  SECTION("bf16: every sign, exponent and kept mantissa, with each rounding case below") {
    // Below the kept 16 bits: exact, just above zero, just below / at /
    // just above the tie, quarter points, all ones.
    std::vector<std::uint32_t> lows = {0x0000, 0x0001, 0x4000, 0x7FFF,
                                       0x8000, 0x8001, 0xC000, 0xFFFF};
    auto r = sweep_to_16(*m, "to_bf16", 16, lows, bf16_reference);
    INFO("first mismatch at bits 0x" << std::hex << r.first_bad);
    CHECK(r.checked == (std::uint64_t(1) << 16) * lows.size());
    CHECK(r.mismatches == 0);
  }
  SECTION("f16: every float's top 19 bits, with each rounding case in the low 13") {
    // f16 keeps 10 of float's 23 mantissa bits; subnormal results keep fewer,
    // whose rounding bits lie in the top 19, which are swept exhaustively.
    std::vector<std::uint32_t> lows = {0x0000, 0x0001, 0x0800, 0x0FFF, 0x1000, 0x1001, 0x1FFF};
    auto r = sweep_to_16(*m, "to_f16", 13, lows, f16_reference);
    INFO("first mismatch at bits 0x" << std::hex << r.first_bad);
    CHECK(r.checked == (std::uint64_t(1) << 19) * lows.size());
    CHECK(r.mismatches == 0);
  }
}

// Every float, 2^32 of them per format: a minute of work, run on request.
TEST_CASE("float narrows to bf16 and f16 like the reference for all 2^32 floats",
          "[.][cpu][convert][exhaustive]") {
  for (cpu_isa isa : {cpu_isa::avx2, cpu_isa::avx512_core}) {
    if (primcache::detected_isa() < isa) continue;
    INFO("isa " << primcache::to_string(isa));
    auto m = compile_conversions(isa);
    auto bf = sweep_to_16(*m, "to_bf16", 0, {0}, bf16_reference);
    CHECK(bf.checked == std::uint64_t(1) << 32);
    CHECK(bf.mismatches == 0);
    auto hf = sweep_to_16(*m, "to_f16", 0, {0}, f16_reference);
    CHECK(hf.checked == std::uint64_t(1) << 32);
    CHECK(hf.mismatches == 0);
  }
}

TEST_CASE("bf16 and f16 round trips return every non-NaN value unchanged", "[cpu][convert]") {
  auto m = compile_conversions(primcache::effective_isa());
  std::vector<std::uint16_t> all;
  for (std::uint32_t i = 0; i < (1u << 16); ++i) {
    if (!std::isnan(bf16_to_float_reference(static_cast<std::uint16_t>(i)))) {
      all.push_back(static_cast<std::uint16_t>(i));
    }
  }
  CHECK(run<float, std::uint16_t>(*m, "to_bf16", run<std::uint16_t, float>(*m, "from_bf16", all)) ==
        all);
  all.clear();
  for (std::uint32_t i = 0; i < (1u << 16); ++i) {
    if (((i >> 10) & 0x1F) != 0x1F || (i & 0x3FF) == 0)
      all.push_back(static_cast<std::uint16_t>(i));
  }
  CHECK(run<float, std::uint16_t>(*m, "to_f16", run<std::uint16_t, float>(*m, "from_f16", all)) ==
        all);
}

TEST_CASE("float converts to s8, u8 and s32 rounding to nearest even and saturating",
          "[cpu][convert]") {
  cpu_isa isa = conversion_isa();
  if (primcache::detected_isa() < isa) return;
  INFO("isa " << primcache::to_string(isa));
  auto m = compile_conversions(isa);

  std::vector<float> x = {0.0f,          -0.0f,          0.5f,
                          1.5f,          2.5f,           -0.5f,
                          -1.5f,         -2.5f,          127.5f,
                          128.5f,        -128.5f,        -129.0f,
                          254.5f,        255.5f,         256.0f,
                          INFINITY,      -INFINITY,      std::numeric_limits<float>::quiet_NaN(),
                          1e10f,         -1e10f,         2147483520.0f,
                          2147483648.0f, -2147483648.0f, -2147483904.0f,
                          8388607.5f,    4194303.5f,     -4194302.5f,
                          16777217.0f,   FLT_MAX,        -FLT_MAX,
                          1e-30f,        -1e-30f};
  for (int i = -1200; i <= 1200; ++i) x.push_back(static_cast<float>(i) * 0.25f);
  // NaNs whose payload's low bits are set: a conversion that reads the
  // integer from the mantissa must not read it from theirs.
  for (std::uint32_t nan_bits : {0x7FC00001u, 0x7FC000FFu, 0xFFC00081u, 0x7F800001u, 0xFF8000FEu,
                                 0x7FFFFFFFu, 0xFFFFFFFFu}) {
    x.push_back(std::bit_cast<float>(nan_bits));
  }
  for (std::uint32_t bits = 0; bits < 0xFFFF0000u; bits += 65521) {
    x.push_back(std::bit_cast<float>(bits));
  }

  auto s8 = run<float, std::int8_t>(*m, "to_s8", x);
  auto u8 = run<float, std::uint8_t>(*m, "to_u8", x);
  auto s32 = run<float, std::int32_t>(*m, "to_s32", x);
  auto rounded = run<float, float>(*m, "round", x);
  int bad_s8 = 0, bad_u8 = 0, bad_s32 = 0, bad_round = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    bad_s8 += s8[i] != saturate_reference<std::int8_t>(x[i]);
    bad_u8 += u8[i] != saturate_reference<std::uint8_t>(x[i]);
    bad_s32 += s32[i] != saturate_reference<std::int32_t>(x[i]);
    float want = std::nearbyint(x[i]);
    bad_round += std::bit_cast<std::uint32_t>(rounded[i]) != std::bit_cast<std::uint32_t>(want) &&
                 !(std::isnan(want) && std::isnan(rounded[i]));
  }
  CHECK(bad_s8 == 0);
  CHECK(bad_u8 == 0);
  CHECK(bad_s32 == 0);
  CHECK(bad_round == 0);
}
