#include <algorithm>
#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/runtime/primitive_cache.hpp"
#include "primcache/runtime/reorder.hpp"
#include "primcache/tensor/numeric.hpp"
#include "primcache/transform/transform_registry.hpp"

using namespace primcache;

namespace {

// Element i of a buffer of type dt, as a double.
double load(const void* base, data_type dt, std::int64_t i) {
  switch (dt) {
    case data_type::f32: return static_cast<const float*>(base)[i];
    case data_type::bf16: return bf16_to_f32(static_cast<const std::uint16_t*>(base)[i]);
    case data_type::f16: return f16_to_f32(static_cast<const std::uint16_t*>(base)[i]);
    case data_type::s8: return static_cast<const std::int8_t*>(base)[i];
    case data_type::u8: return static_cast<const std::uint8_t*>(base)[i];
    case data_type::s32: return static_cast<const std::int32_t*>(base)[i];
    default: FAIL("no such type"); return 0;
  }
}
// Stores v, which the caller made representable in dt.
void store(void* base, data_type dt, std::int64_t i, double v) {
  const auto f = static_cast<float>(v);
  switch (dt) {
    case data_type::f32: static_cast<float*>(base)[i] = f; break;
    case data_type::bf16: static_cast<std::uint16_t*>(base)[i] = f32_to_bf16(f); break;
    case data_type::f16: static_cast<std::uint16_t*>(base)[i] = f32_to_f16(f); break;
    case data_type::s8: static_cast<std::int8_t*>(base)[i] = static_cast<std::int8_t>(v); break;
    case data_type::u8: static_cast<std::uint8_t*>(base)[i] = static_cast<std::uint8_t>(v); break;
    case data_type::s32: static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(v); break;
    default: FAIL("no such type");
  }
}

// Calls f(index) for every logical index of dims, in row-major order.
template <typename F>
void for_each_index(std::span<const std::int64_t> dims, F&& f) {
  std::vector<std::int64_t> idx(dims.size(), 0);
  const std::int64_t n =
      std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
  for (std::int64_t k = 0; k < n; ++k) {
    f(static_cast<const std::vector<std::int64_t>&>(idx));
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
}

std::vector<std::int64_t> dims_for(int ndims) {
  // Channel-like dimensions not multiples of 8 or 16, so blocked layouts pad.
  switch (ndims) {
    case 1: return {37};
    case 2: return {19, 21};
    case 3: return {3, 18, 5};
    case 4: return {2, 19, 3, 5};
    case 5: return {2, 17, 3, 2, 3};
    default: return {2, 3, 17, 2, 2, 3};
  }
}

constexpr std::array<data_type, 6> all_types = {data_type::f32, data_type::bf16, data_type::f16,
                                                data_type::s8,  data_type::u8,   data_type::s32};

double lowest(data_type dt) {
  switch (dt) {
    case data_type::s8: return -128;
    case data_type::u8: return 0;
    case data_type::s32: return -1e6;
    default: return -256;  // integers exact in bf16 (8 bits) and f16
  }
}
double highest(data_type dt) {
  switch (dt) {
    case data_type::s8: return 127;
    case data_type::u8: return 255;
    case data_type::s32: return 1e6;
    default: return 256;
  }
}
int mantissa_bits(data_type dt) {
  return dt == data_type::bf16 ? 8 : dt == data_type::f16 ? 11 : 24;
}

}  // namespace

TEST_CASE("every layout pair round-trips exactly", "[transform][execute][layout]") {
  const engine cpu(engine_kind::cpu, 0);
  const int ndims = GENERATE(1, 2, 3, 4, 5, 6);
  const auto dims = dims_for(ndims);
  std::vector<format_tag> tags;
  for (int t = static_cast<int>(format_tag::a); t <= static_cast<int>(format_tag::aBCde16c16b);
       ++t) {
    if (ndims_of(static_cast<format_tag>(t)) == ndims) tags.push_back(static_cast<format_tag>(t));
  }
  REQUIRE(!tags.empty());
  const library lib = library::jit();
  for (format_tag from_tag : tags) {
    const kernel_type from{place::cpu(), data_type::f32, layout(from_tag), lib};
    memory src(layout(from_tag).desc_for(dims, data_type::f32), cpu);
    auto* s = static_cast<float*>(src.get_data_handle());
    std::memset(s, 0, src.get_desc().size_bytes());
    float v = 1;
    for_each_index(
        dims, [&](const std::vector<std::int64_t>& i) { s[src.get_desc().offset_of(i)] = v++; });
    for (format_tag to_tag : tags) {
      const kernel_type to{place::cpu(), data_type::f32, layout(to_tag), lib};
      INFO(from.to_string() << " -> " << to.to_string());
      const memory out = transform(src, from, to);
      REQUIRE(kernel_type::of(out, lib) == to);
      const auto* o = static_cast<const float*>(out.get_data_handle());
      bool same = true;
      for_each_index(dims, [&](const std::vector<std::int64_t>& i) {
        same = same && o[out.get_desc().offset_of(i)] == s[src.get_desc().offset_of(i)];
      });
      CHECK(same);
      const memory back = transform(out, to, from);
      const auto* b = static_cast<const float*>(back.get_data_handle());
      for_each_index(dims, [&](const std::vector<std::int64_t>& i) {
        same = same && b[back.get_desc().offset_of(i)] == s[src.get_desc().offset_of(i)];
      });
      CHECK(same);
    }
  }
}

TEST_CASE("every data-type pair round-trips", "[transform][execute][data_type]") {
  const engine cpu(engine_kind::cpu, 0);
  const data_type a = GENERATE(from_range(all_types.begin(), all_types.end()));
  const data_type b = GENERATE(from_range(all_types.begin(), all_types.end()));
  const std::vector<std::int64_t> dims = {3, 40, 7};
  const kernel_type ta{place::cpu(), a, layout(format_tag::abc), library::jit()};
  // Through another layout too, so the fused reorder is exercised.
  const kernel_type tb{place::cpu(), b, layout(format_tag::acb), library::jit()};
  INFO(ta.to_string() << " -> " << tb.to_string() << " -> back");
  memory src(ta.layout.desc_for(dims, a), cpu);
  const std::int64_t n = src.get_desc().nelems();
  const bool both_float = !is_integral(a) && !is_integral(b);
  std::mt19937 rng(42);
  std::vector<double> values(static_cast<std::size_t>(n));
  if (both_float) {
    // Values first rounded to a, so a holds them exactly.
    std::uniform_real_distribution<float> dist(-4.f, 4.f);
    for (std::int64_t i = 0; i < n; ++i) {
      store(src.get_data_handle(), a, i, dist(rng));
      values[i] = load(src.get_data_handle(), a, i);
    }
  } else {
    // Integers both types hold exactly: the round trip is lossless.
    const double lo = std::max(lowest(a), lowest(b)), hi = std::min(highest(a), highest(b));
    for (std::int64_t i = 0; i < n; ++i) {
      values[i] = lo + static_cast<double>(i % static_cast<std::int64_t>(hi - lo + 1));
      store(src.get_data_handle(), a, i, values[i]);
    }
  }
  const auto plan = plan_transform(ta, tb);
  REQUIRE(plan->steps.size() == 1);
  CHECK(plan->steps[0].kind ==
        (a == b ? transform_kind::layout : transform_kind::layout_and_data_type));
  const memory mid = execute_plan(*plan, src);
  const memory back = transform(mid, tb, ta);
  // bf16 -> f16 -> bf16 and f16 -> bf16 -> f16 lose to the narrower of the two.
  const double rel =
      both_float ? std::ldexp(1.0, -std::min(mantissa_bits(a), mantissa_bits(b))) : 0.0;
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double got = load(back.get_data_handle(), a, i);
    if (std::fabs(got - values[i]) > rel * std::fabs(values[i]) + (both_float ? 1e-7 : 0.0)) {
      if (bad++ < 3) UNSCOPED_INFO("element " << i << ": " << values[i] << " came back " << got);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("quantized data converts with its scale", "[transform][execute][scale]") {
  const engine cpu(engine_kind::cpu, 0);
  const std::vector<std::int64_t> dims = {2, 19, 3, 5};
  const kernel_type f32{place::cpu(), data_type::f32, layout(format_tag::abcd), library::jit()};
  memory src(f32.layout.desc_for(dims, data_type::f32), cpu);
  const std::int64_t n = src.get_desc().nelems();
  auto* x = static_cast<float*>(src.get_data_handle());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-7.f, 7.f);
  for (std::int64_t i = 0; i < n; ++i) x[i] = dist(rng);
  x[0] = 100.f;  // saturates in s8 at scale 0.05 (6.35 is the largest)
  x[1] = -100.f;

  SECTION("f32 -> s8 (scale 0.05, blocked) -> f32: within half a step, saturated at the ends") {
    kernel_type q{place::cpu(), data_type::s8, layout(format_tag::aBcd16b), library::jit(), 0.05f};
    const memory mid = transform(src, f32, q);
    const memory back = transform(mid, q, f32);
    const auto* y = static_cast<const float*>(back.get_data_handle());
    CHECK(y[0] == Approx(127 * 0.05));
    CHECK(y[1] == Approx(-128 * 0.05));
    std::int64_t bad = 0;
    for (std::int64_t i = 2; i < n; ++i) {
      const double want = std::clamp(static_cast<double>(x[i]), -128 * 0.05, 127 * 0.05);
      if (std::fabs(y[i] - want) > 0.025 + 1e-6 && bad++ < 3) {
        UNSCOPED_INFO("element " << i << ": " << x[i] << " came back " << y[i]);
      }
    }
    CHECK(bad == 0);
  }
  SECTION("u8 requantized from scale 0.1 to 0.2: q' = round_half_even(q / 2)") {
    kernel_type a{place::cpu(), data_type::u8, layout(format_tag::abcd), library::jit(), 0.1f};
    kernel_type b = a;
    b.scale = 0.2f;
    memory qa(a.layout.desc_for(dims, data_type::u8), cpu);
    auto* q = static_cast<std::uint8_t*>(qa.get_data_handle());
    for (std::int64_t i = 0; i < n; ++i) q[i] = static_cast<std::uint8_t>(i % 256);
    const auto plan = plan_transform(a, b);
    REQUIRE(plan->steps.size() == 1);
    const memory qb = execute_plan(*plan, qa);
    const auto* r = static_cast<const std::uint8_t*>(qb.get_data_handle());
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto want = static_cast<int>(std::nearbyint((i % 256) / 2.0));
      if (r[i] != want && bad++ < 3) {
        UNSCOPED_INFO("element " << i << ": " << (i % 256) << " became " << int(r[i]));
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("a user transform runs in place of the built-in one", "[transform][execute]") {
  const engine cpu(engine_kind::cpu, 0);
  auto& reg = transform_registry::global();
  // A library of this test's own, so no other test's plans change.
  const kernel_type a = kernel_type::parse("cpu/f32/ab/user-test");
  const kernel_type b = kernel_type::parse("cpu/f32/ba/user-test");
  std::atomic<int> calls{0};
  reg.add(a, b, "transpose_by_hand", [&calls](const memory& src, const memory& dst, const stream&) {
    ++calls;
    const auto& md = src.get_desc();
    const auto* s = static_cast<const float*>(src.get_data_handle());
    auto* d = static_cast<float*>(dst.get_data_handle());
    for (std::int64_t i = 0; i < md.dims()[0]; ++i)
      for (std::int64_t j = 0; j < md.dims()[1]; ++j)
        d[dst.get_desc().offset_of({i, j})] = s[md.offset_of({i, j})] * 2;
  });
  memory src(a.layout.desc_for({4, 6}, data_type::f32), cpu);
  auto* s = static_cast<float*>(src.get_data_handle());
  for (int i = 0; i < 24; ++i) s[i] = static_cast<float>(i);
  const memory out = transform(src, a, b);
  CHECK(calls == 1);
  // The user's function (which doubles) ran, not the reorder.
  CHECK(static_cast<const float*>(out.get_data_handle())[out.get_desc().offset_of({1, 2})] ==
        2 * s[src.get_desc().offset_of({1, 2})]);
  REQUIRE(reg.remove(a, b));
  const memory plain = transform(src, a, b);
  CHECK(calls == 1);
  CHECK(static_cast<const float*>(plain.get_data_handle())[plain.get_desc().offset_of({1, 2})] ==
        s[src.get_desc().offset_of({1, 2})]);
}

TEST_CASE("executing a plan checks its input", "[transform][execute]") {
  const engine cpu(engine_kind::cpu, 0);
  const auto plan = plan_transform(kernel_type::parse("cpu/f32/abcd/jit"),
                                   kernel_type::parse("cpu/f32/acdb/jit"));
  SECTION("another layout") {
    memory m(memory_desc({1, 2, 3, 4}, data_type::f32, format_tag::acdb), cpu);
    CHECK_THROWS_WITH(execute_plan(*plan, m), Catch::Contains("is not of the plan's kernel type"));
  }
  SECTION("another data type") {
    memory m(memory_desc({1, 2, 3, 4}, data_type::s8, format_tag::abcd), cpu);
    CHECK_THROWS_WITH(execute_plan(*plan, m), Catch::Contains("cpu/f32/abcd/jit"));
  }
  SECTION("another rank") {
    memory m(memory_desc({6, 4}, data_type::f32, format_tag::ab), cpu);
    CHECK_THROWS_WITH(execute_plan(*plan, m), Catch::Contains("execute_plan: the source") &&
                                                  Catch::Contains("is not of the plan's kernel "
                                                                  "type cpu/f32/abcd/jit"));
  }
  SECTION("an empty memory") {
    CHECK_THROWS_AS(execute_plan(*plan, memory()), error);
  }
  SECTION("an identity plan returns the input itself") {
    memory m(memory_desc({1, 2, 3, 4}, data_type::f32, format_tag::abcd), cpu);
    const auto same = plan_transform(kernel_type::of(m, library::jit()),
                                     kernel_type::of(m, library::reference()));
    CHECK(execute_plan(*same, m).get_data_handle() == m.get_data_handle());
  }
}

TEST_CASE("transforms reuse the primitive cache's reorders", "[transform][execute]") {
  const engine cpu(engine_kind::cpu, 0);
  const kernel_type a = kernel_type::parse("cpu/f32/abcd/jit");
  const kernel_type b = kernel_type::parse("cpu/bf16/aBcd8b/jit");
  memory src(a.layout.desc_for({2, 9, 4, 4}, data_type::f32), cpu);
  std::memset(src.get_data_handle(), 0, src.get_desc().size_bytes());
  (void)transform(src, a, b);
  const int primitives = get_primitive_cache_size();
  const auto before = transform_registry::global().plan_cache_stats();
  (void)transform(src, a, b);
  const auto after = transform_registry::global().plan_cache_stats();
  CHECK(after.hits == before.hits + 1);
  CHECK(after.misses == before.misses);
  // The second run found its reorder in the primitive cache: nothing new.
  CHECK(get_primitive_cache_size() == primitives);
}

TEST_CASE("a plan writes into the caller's memory", "[transform][execute]") {
  const engine cpu(engine_kind::cpu, 0);
  const kernel_type a = kernel_type::parse("cpu/f32/abcd/jit");
  const kernel_type b = kernel_type::parse("cpu/bf16/acdb/jit");
  const std::vector<std::int64_t> dims = {2, 5, 3, 4};
  memory src(a.layout.desc_for(dims, a.data_type), cpu);
  auto* s = static_cast<float*>(src.get_data_handle());
  for (int i = 0; i < 120; ++i) s[i] = static_cast<float>(i) * 0.25f;
  const auto plan = plan_transform(a, b);
  SECTION("the same bytes as a fresh result") {
    memory dst(b.layout.desc_for(dims, b.data_type), cpu);
    execute_plan(*plan, src, dst);
    const memory fresh = execute_plan(*plan, src);
    CHECK(std::memcmp(dst.get_data_handle(), fresh.get_data_handle(),
                      dst.get_desc().size_bytes()) == 0);
  }
  SECTION("a plan that moves nothing copies") {
    const auto relabel = plan_transform(a, kernel_type::parse("cpu/f32/abcd/reference"));
    memory dst(a.layout.desc_for(dims, a.data_type), cpu);
    execute_plan(*relabel, src, dst);
    CHECK(std::memcmp(dst.get_data_handle(), s, 120 * sizeof(float)) == 0);
  }
  SECTION("a destination of another kernel type is refused") {
    memory wrong(a.layout.desc_for(dims, b.data_type), cpu);
    CHECK_THROWS_WITH(execute_plan(*plan, src, wrong),
                      Catch::Contains("destination") && Catch::Contains("cpu/bf16/acdb/jit"));
    CHECK_THROWS_AS(execute_plan(*plan, src, memory()), error);
  }
}
