// The shape-generic reorder built into the library: bit for bit the
// specialized kernel's results, for its default configuration and its
// variants, at avx2 and avx512_core, over random shapes, layout pairs
// (plain, transposed, channels-last, blocked, strided, offsets), every data
// type pair and scale kind; the reference's (bitwise, as
// reorder_kernel_test) on odd shapes; layouts with padding (blocked dims
// not a multiple of the block, both directions), whose dst padding must be
// zero over a dst filled with garbage; and what it declines (created
// synchronously).
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/generic_reorder_kernel.hpp"
#include "kernels/reorder_kernel.hpp"
#include "naive_reference.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primcache/tensor/memory_desc.hpp"
#include "primcache/tensor/numeric.hpp"
#include "test_isas.hpp"
#include "tiered/generic_code.hpp"

using namespace primcache;
using namespace primcache::cpu_internal;
using cpu_test::test_isas;

namespace {

thread_pool& pool() {
  static thread_pool p(3);
  return p;
}

const data_type all_types[] = {data_type::f32, data_type::bf16, data_type::f16,
                               data_type::s8,  data_type::u8,   data_type::s32};

// Random bytes for the whole buffer, values meaningful for the type (as
// reorder_kernel_test.cpp).
std::vector<std::byte> random_buffer(const memory_desc& md, std::uint32_t seed) {
  std::vector<std::byte> buf(md.size_bytes() + 64);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> val(-300.f, 300.f);
  const float specials[] = {0.f,
                            -0.f,
                            0.5f,
                            -0.5f,
                            2.5f,
                            127.5f,
                            -128.5f,
                            255.5f,
                            1e30f,
                            -1e30f,
                            std::numeric_limits<float>::infinity(),
                            65520.f};
  const std::size_t es = size_of(md.data_type());
  for (std::size_t i = 0; i < md.size_bytes() / es; ++i) {
    const float f = rng() % 8 == 0 ? specials[rng() % std::size(specials)] : val(rng);
    std::byte* p = buf.data() + i * es;
    switch (md.data_type()) {
      case data_type::f32: std::memcpy(p, &f, 4); break;
      case data_type::bf16: {
        const std::uint16_t h = f32_to_bf16(f);
        std::memcpy(p, &h, 2);
        break;
      }
      case data_type::f16: {
        const std::uint16_t h = f32_to_f16(f);
        std::memcpy(p, &h, 2);
        break;
      }
      case data_type::s32: {
        const std::int32_t v = static_cast<std::int32_t>(rng()) >> (rng() % 24);
        std::memcpy(p, &v, 4);
        break;
      }
      default: *p = static_cast<std::byte>(rng()); break;
    }
  }
  return buf;
}

std::vector<float> scales_for(const reorder_problem& p, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> v(-2.f, 2.f);
  std::size_t n = 1;
  if (p.scales == reorder_scales::per_dim) n = static_cast<std::size_t>(p.src.dims()[p.scale_dim]);
  std::vector<float> s(n);
  for (float& x : s) x = v(rng);
  return s;
}

template <class Kernel>
std::vector<std::byte> run(const Kernel& k, const reorder_problem& p, std::uint32_t seed) {
  const auto src = random_buffer(p.src, seed);
  const auto scales = scales_for(p, seed + 1);
  // Gaps of dst (strided layouts) keep this pattern in both runs.
  std::vector<std::byte> dst(p.dst.size_bytes() + 64, std::byte{0x5a});
  k.execute({src.data(), dst.data(), scales.data()}, nullptr, pool());
  return dst;
}

std::string describe(const reorder_problem& p) {
  return p.src.to_string() + " -> " + p.dst.to_string() + " scales " +
         std::to_string(static_cast<int>(p.scales)) + " dim " + std::to_string(p.scale_dim) +
         " nthr " + std::to_string(p.nthr);
}

void check_bits(const reorder_problem& p, cpu_isa isa, std::uint32_t seed, bool variants) {
  INFO(describe(p) + " at " + std::string(to_string(isa)));
  const reorder_config def = default_reorder_config(p, isa);
  auto g = generic_reorder_kernel::create(p, def, isa);
  INFO((g ? std::string() : g.why().message));
  REQUIRE(g);
  const auto generic = run(*g.value(), p, seed);
  // run() fills dst with 0x5a first: its padding must be written as zero.
  CHECK(cpu_test::naive_nonzero_padding_bytes(p.dst, generic) == 0);
  auto k = reorder_kernel::create(p, def, isa);
  REQUIRE(k);
  CHECK(generic == run(*k.value(), p, seed));
  if (!variants) return;
  for (const reorder_config& c : reorder_config_variants(p, isa)) {
    INFO("variant tile " << c.tile << " lanes " << c.vector_lanes << " unroll " << c.unroll
                         << " chunk " << c.chunk << " memcpy " << c.use_memcpy);
    auto gv = generic_reorder_kernel::create(p, c, isa);
    REQUIRE(gv);
    auto kv = reorder_kernel::create(p, c, isa);
    REQUIRE(kv);
    const auto specialized = run(*kv.value(), p, seed);
    CHECK(specialized == run(*gv.value(), p, seed));
    CHECK(specialized == generic);
  }
}

memory_desc layout(std::mt19937& rng, const dims_array& d, int nd, data_type dt) {
  dims_view dims(std::span<const std::int64_t>(d.data(), static_cast<std::size_t>(nd)));
  const unsigned pick = rng() % 6;
  if (nd == 4) {
    if (pick == 0) return memory_desc(dims, dt, format_tag::nhwc);
    if (pick == 1 && d[1] % 16 == 0) return memory_desc(dims, dt, format_tag::nChw16c);
    if (pick == 2 && d[1] % 8 == 0) return memory_desc(dims, dt, format_tag::nChw8c);
  }
  if (nd == 2 && pick < 2) return memory_desc(dims, dt, format_tag::ba);
  if (pick == 3) {  // strided, outermost first or a permutation
    dims_array strides{};
    std::int64_t s = 1;
    for (int i = nd - 1; i >= 0; --i) {
      strides[i] = s;
      s *= d[i] + static_cast<std::int64_t>(rng() % 3);
    }
    return memory_desc(
        dims, dt,
        dims_view(std::span<const std::int64_t>(strides.data(), static_cast<std::size_t>(nd))));
  }
  return memory_desc(dims, dt,
                     nd == 2   ? format_tag::ab
                     : nd == 3 ? format_tag::abc
                     : nd == 4 ? format_tag::abcd
                               : format_tag::abcde);
}

reorder_problem random_problem(std::mt19937& rng) {
  const int nd = 2 + static_cast<int>(rng() % 3);
  dims_array d{};
  for (int i = 0; i < nd; ++i) d[i] = 1 + static_cast<std::int64_t>(rng() % (i == 1 ? 40 : 19));
  if (nd == 4 && rng() % 2 == 0) d[1] = 16 * (1 + static_cast<std::int64_t>(rng() % 3));
  reorder_problem p;
  const data_type st = rng() % 2 ? data_type::f32 : all_types[rng() % 6];
  const data_type dt = rng() % 2 ? st : all_types[rng() % 6];
  p.src = layout(rng, d, nd, st);
  p.dst = layout(rng, d, nd, dt);
  if (rng() % 4 == 0) p.src = p.src.with_offset0(static_cast<std::int64_t>(rng() % 5));
  if (rng() % 4 == 0) p.dst = p.dst.with_offset0(static_cast<std::int64_t>(rng() % 5));
  switch (rng() % 4) {
    case 0: p.scales = reorder_scales::common; break;
    case 1:
      p.scales = reorder_scales::per_dim;
      p.scale_dim = static_cast<int>(rng() % static_cast<unsigned>(nd));
      break;
    default: break;
  }
  p.nthr = 1 + static_cast<int>(rng() % 3);
  return p;
}

// Layouts with padding: activations with channels not a multiple of the
// block (plain, channels-last, 8 and 16 blocks, either side), weights
// blocked 16x16 with O and I not multiples of 16.
reorder_problem random_padded_problem(std::mt19937& rng) {
  reorder_problem p;
  const data_type some[] = {data_type::f32, data_type::bf16, data_type::s8};
  const data_type st = rng() % 3 ? some[rng() % 3] : all_types[rng() % 6];
  const data_type dt = rng() % 3 ? some[rng() % 3] : all_types[rng() % 6];
  std::int64_t c = 1 + static_cast<std::int64_t>(rng() % 50);
  if (c % 8 == 0) ++c;
  memory_desc plain, blocked;
  if (rng() % 3 == 0) {  // weights OIhw16i16o
    const std::int64_t o = 1 + static_cast<std::int64_t>(rng() % 40);
    const std::int64_t i = rng() % 2 ? c : 16 * (1 + static_cast<std::int64_t>(rng() % 2));
    const std::int64_t k = 1 + static_cast<std::int64_t>(rng() % 3);
    const dims_array d{o, i, k, k};
    dims_view dims(std::span<const std::int64_t>(d.data(), 4));
    plain = memory_desc(dims, st, rng() % 2 ? format_tag::oihw : format_tag::ohwi);
    blocked = memory_desc(dims, dt, format_tag::OIhw16i16o);
  } else {
    const dims_array d{1 + static_cast<std::int64_t>(rng() % 2), c,
                       1 + static_cast<std::int64_t>(rng() % 9),
                       1 + static_cast<std::int64_t>(rng() % 19)};
    dims_view dims(std::span<const std::int64_t>(d.data(), 4));
    const format_tag plains[] = {format_tag::nchw, format_tag::nhwc, format_tag::nChw8c};
    const format_tag blocks[] = {format_tag::nChw16c, format_tag::nChw8c};
    plain = memory_desc(dims, st, plains[rng() % 3]);
    blocked = memory_desc(dims, dt, blocks[rng() % 2]);
  }
  if (rng() % 2) {
    p.src = plain;
    p.dst = blocked;
  } else {  // the other direction
    p.src = blocked.with_data_type(st);
    p.dst = plain.with_data_type(dt);
  }
  switch (rng() % 3) {
    case 0: p.scales = reorder_scales::common; break;
    case 1:
      p.scales = reorder_scales::per_dim;
      p.scale_dim = static_cast<int>(rng() % 2);
      break;
    default: break;
  }
  p.nthr = 1 + static_cast<int>(rng() % 3);
  return p;
}

}  // namespace

TEST_CASE("the generic reorder is built into the library at avx2 and avx512_core",
          "[cpu][generic][reorder]") {
  for (cpu_isa isa : test_isas()) {
    auto code = generic_isa_for(generic_kernel::reorder, isa);
    REQUIRE(code);
    CHECK(code.value() == isa);
  }
}

TEST_CASE("generic reorders of random shapes equal the specialized kernel bit for bit",
          "[cpu][generic][reorder]") {
  std::mt19937 rng(17);
  for (cpu_isa isa : test_isas()) {
    for (int trial = 0; trial < 80; ++trial) {
      const reorder_problem p = random_problem(rng);
      INFO("trial " << trial);
      check_bits(p, isa, 500 + static_cast<std::uint32_t>(trial), trial % 6 == 0);
    }
  }
}

TEST_CASE("the generic reorder: every data type pair and scale kind, odd shapes, bitwise reference",
          "[cpu][generic][reorder]") {
  const cpu_isa isa = test_isas().back();
  std::uint32_t seed = 1;
  for (data_type st : all_types) {
    for (data_type dt : all_types) {
      for (int form = 0; form < 3; ++form) {
        reorder_problem p;
        // A plain copy, a transposition (tiles and edges), blocking.
        const std::int64_t c = form == 2 ? 32 : 19;
        p.src = memory_desc({2, c, 5, 21}, st, format_tag::nchw);
        p.dst = memory_desc({2, c, 5, 21}, dt,
                            form == 0   ? format_tag::nchw
                            : form == 1 ? format_tag::nhwc
                                        : format_tag::nChw16c);
        p.scales = static_cast<reorder_scales>(seed % 3);
        p.scale_dim = 1;
        p.nthr = 2;
        check_bits(p, isa, ++seed, false);
        auto g = generic_reorder_kernel::create(p, default_reorder_config(p, isa), isa);
        REQUIRE(g);
        const auto src = random_buffer(p.src, seed);
        const auto scales = scales_for(p, seed + 1);
        std::vector<std::byte> got(p.dst.size_bytes(), std::byte{0x11}), want = got;
        g.value()->execute({src.data(), got.data(), scales.data()}, nullptr, pool());
        cpu_test::naive_reorder(p, {src.data(), want.data(), scales.data()});
        INFO(describe(p));
        CHECK(got == want);
      }
    }
  }
}

TEST_CASE("generic reorders of padded layouts equal the specialized kernel bit for bit",
          "[cpu][generic][reorder][kernel_sweep]") {
  std::mt19937 rng(29);
  for (cpu_isa isa : test_isas()) {
    for (int trial = 0; trial < 70; ++trial) {
      const reorder_problem p = random_padded_problem(rng);
      INFO("trial " << trial);
      check_bits(p, isa, 900 + static_cast<std::uint32_t>(trial), trial % 5 == 0);
    }
  }
}

TEST_CASE(
    "the generic reorder: the first layer's input, nchw to nChw16c and nChw8c with 3, 17 "
    "and 50 channels, f32, bf16 and s8 with scales, both directions",
    "[cpu][generic][reorder][kernel_sweep]") {
  std::uint32_t seed = 40;
  for (cpu_isa isa : test_isas()) {
    for (std::int64_t c : {3, 17, 50}) {
      for (format_tag blocked : {format_tag::nChw16c, format_tag::nChw8c}) {
        for (data_type dt : {data_type::f32, data_type::bf16, data_type::s8}) {
          for (bool to_blocked : {true, false}) {
            reorder_problem p;
            const memory_desc plain({2, c, 7, 13}, data_type::f32, format_tag::nchw);
            const memory_desc blk({2, c, 7, 13}, dt, blocked);
            p.src = to_blocked ? plain : blk;
            p.dst = to_blocked ? blk : plain;
            p.scales = seed % 2 ? reorder_scales::per_dim : reorder_scales::common;
            p.scale_dim = 1;
            p.nthr = 2;
            check_bits(p, isa, ++seed, c == 17);
          }
        }
      }
    }
  }
}

TEST_CASE("the generic reorder declines what it cannot walk", "[cpu][generic][reorder]") {
  const cpu_isa isa = test_isas().back();
  reorder_problem p;
  SECTION("more padded dimensions than it checks") {
    // a and b blocked in src, b and c in dst, none a multiple of 16.
    p.src = memory_desc({17, 18, 19, 2, 3}, data_type::f32, format_tag::ABcde16a16b);
    p.dst = memory_desc({17, 18, 19, 2, 3}, data_type::f32, format_tag::aBCde16b16c);
    auto g = generic_reorder_kernel::create(p, default_reorder_config(p, isa), isa);
    REQUIRE_FALSE(g);
    CHECK(g.why().code == status::unimplemented);
    CHECK(g.why().message.find("pads more than 2 dimensions") != std::string::npos);
  }
  SECTION("an ISA below avx2") {
    p.src = p.dst = memory_desc({4, 8}, data_type::f32, format_tag::ab);
    auto g = generic_reorder_kernel::create(p, default_reorder_config(p, isa), cpu_isa::sse41);
    REQUIRE_FALSE(g);
    CHECK(g.why().code == status::unimplemented);
  }
  SECTION("an invalid problem") {
    p.src = memory_desc({4, 8}, data_type::f32, format_tag::ab);
    p.dst = memory_desc({4, 9}, data_type::f32, format_tag::ab);
    auto g = generic_reorder_kernel::create(p, default_reorder_config(p, isa), isa);
    REQUIRE_FALSE(g);
  }
}
