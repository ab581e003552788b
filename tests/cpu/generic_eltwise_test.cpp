// The shape-generic eltwise kernel built into the library: bit for bit the
// specialized kernel's results (what makes the tiered swap invisible), for
// its default configuration and its variants, at avx2 and avx512_core, over
// random shapes, layouts (plain, channels-last, blocked, blocked with
// padding whose dst padding must be zero, strided, with an offset),
// f32/bf16 pairs, every algorithm and post-op and binary
// broadcast; the reference's within rounding on odd shapes; and what it
// declines (created synchronously).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/eltwise_kernel.hpp"
#include "kernels/generic_eltwise_kernel.hpp"
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

// Buffer values, physical: mostly in [-4, 4], with specials mixed in.
std::vector<std::byte> random_buffer(const memory_desc& md, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> val(-4.f, 4.f);
  const float specials[] = {0.f,
                            -0.f,
                            1e-30f,
                            1e30f,
                            -1e30f,
                            88.f,
                            -88.f,
                            100.f,
                            -100.f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  const std::size_t es = size_of(md.data_type());
  std::vector<std::byte> buf(md.size_bytes());
  for (std::size_t i = 0; i < buf.size() / es; ++i) {
    const float x = rng() % 12 == 0 ? specials[rng() % std::size(specials)] : val(rng);
    if (md.data_type() == data_type::f32) {
      std::memcpy(buf.data() + 4 * i, &x, 4);
    } else {
      const std::uint16_t h = f32_to_bf16(x);
      std::memcpy(buf.data() + 2 * i, &h, 2);
    }
  }
  return buf;
}

struct operands {
  std::vector<std::vector<float>> values;
  std::vector<const float*> pointers;
};

operands operands_for(const eltwise_problem& p, std::uint32_t seed) {
  operands o;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> val(-2.f, 2.f);
  for (const post_op& op : p.post_ops) {
    if (op.what != post_op::kind::binary_add) continue;
    const std::size_t n = op.binary.broadcast == binary_broadcast::scalar ? 1
                          : op.binary.broadcast == binary_broadcast::per_channel
                              ? static_cast<std::size_t>(p.dst.padded_dims()[1])
                              : p.dst.size_bytes() / size_of(p.dst.data_type()) +
                                    static_cast<std::size_t>(p.dst.offset0());
    const auto idx = static_cast<std::size_t>(op.binary.arg_index);
    if (o.values.size() <= idx) o.values.resize(idx + 1);
    o.values[idx].resize(n);
    for (float& v : o.values[idx]) v = val(rng);
  }
  for (const auto& v : o.values) o.pointers.push_back(v.data());
  return o;
}

eltwise_op random_op(std::mt19937& rng) {
  eltwise_op op;
  op.alg = static_cast<eltwise_alg>(rng() % 8);
  std::uniform_real_distribution<float> v(-1.5f, 1.5f);
  op.alpha = rng() % 3 == 0 ? 0.f : v(rng);
  op.beta = v(rng);
  if (op.alg == eltwise_alg::clip && op.alpha > op.beta) std::swap(op.alpha, op.beta);
  return op;
}

post_op_chain random_chain(std::mt19937& rng, bool blocked_channel_ok) {
  post_op_chain chain;
  const int n = static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) {
    post_op op;
    if (rng() % 2 == 0) {
      op.what = post_op::kind::eltwise;
      op.eltwise = random_op(rng);
      op.eltwise.scale = rng() % 2 == 0 ? 1.f : 0.75f;
    } else {
      op.what = post_op::kind::binary_add;
      op.binary.arg_index = i;
      op.binary.broadcast = static_cast<binary_broadcast>(rng() % 3);
      if (!blocked_channel_ok && op.binary.broadcast == binary_broadcast::per_channel) {
        op.binary.broadcast = binary_broadcast::scalar;
      }
    }
    chain.push_back(op);
  }
  return chain;
}

struct run_result {
  std::vector<std::byte> dst;
};

template <class Kernel>
std::vector<std::byte> run(const Kernel& k, const eltwise_problem& p, std::uint32_t seed) {
  const auto src = random_buffer(p.src, seed);
  auto ops = operands_for(p, seed + 7);
  std::vector<std::byte> dst(p.dst.size_bytes(), std::byte{0x5a});
  k.execute({src.data(), dst.data(), ops.pointers.data()}, nullptr, pool());
  return dst;
}

std::string describe(const eltwise_problem& p) {
  std::string s = p.src.to_string() + " -> " + p.dst.to_string() + " alg " +
                  std::to_string(static_cast<int>(p.op.alg)) + " alpha " +
                  std::to_string(p.op.alpha) + " post-ops";
  for (const post_op& op : p.post_ops) {
    s += op.what == post_op::kind::eltwise
             ? " e" + std::to_string(static_cast<int>(op.eltwise.alg))
             : " b" + std::to_string(static_cast<int>(op.binary.broadcast));
  }
  return s + " nthr " + std::to_string(p.nthr);
}

// The generic kernel against the specialized default and variants, bytes.
void check_bits(const eltwise_problem& p, cpu_isa isa, std::uint32_t seed, bool variants) {
  INFO(describe(p) + " at " + std::string(to_string(isa)));
  const eltwise_config def = default_eltwise_config(p, isa);
  auto g = generic_eltwise_kernel::create(p, def, isa);
  INFO((g ? std::string() : g.why().message));
  REQUIRE(g);
  const auto generic = run(*g.value(), p, seed);
  // run() fills dst with 0x5a first: its padding must be written as zero.
  CHECK(cpu_test::naive_nonzero_padding_bytes(p.dst, generic) == 0);
  auto k = eltwise_kernel::create(p, def, isa);
  REQUIRE(k);
  CHECK(generic == run(*k.value(), p, seed));
  if (!variants) return;
  for (const eltwise_config& c : eltwise_config_variants(p, isa)) {
    INFO("variant lanes " << c.vector_lanes << " unroll " << c.unroll << " chunk " << c.chunk);
    auto gv = generic_eltwise_kernel::create(p, c, isa);
    REQUIRE(gv);
    auto kv = eltwise_kernel::create(p, c, isa);
    REQUIRE(kv);
    const auto specialized = run(*kv.value(), p, seed);
    CHECK(specialized == run(*gv.value(), p, seed));
    CHECK(specialized == generic);
  }
}

memory_desc random_layout(std::mt19937& rng, const dims_array& d, int nd, data_type dt) {
  dims_view dims(std::span<const std::int64_t>(d.data(), static_cast<std::size_t>(nd)));
  switch (rng() % 4) {
    case 0: {  // channels last
      if (nd == 4) return memory_desc(dims, dt, format_tag::nhwc);
      break;
    }
    case 1: {  // blocked, channels a multiple of the block
      if (nd == 4 && d[1] % 16 == 0) return memory_desc(dims, dt, format_tag::nChw16c);
      if (nd == 4 && d[1] % 8 == 0) return memory_desc(dims, dt, format_tag::nChw8c);
      break;
    }
    case 2: {  // strided: rows padded past their extent
      dims_array strides{};
      std::int64_t s = 1;
      for (int i = nd - 1; i >= 0; --i) {
        strides[i] = s;
        s *= d[i] + (i == nd - 1 ? static_cast<std::int64_t>(rng() % 5) : 0);
      }
      return memory_desc(
          dims, dt,
          dims_view(std::span<const std::int64_t>(strides.data(), static_cast<std::size_t>(nd))));
    }
    default: break;
  }
  return memory_desc(dims, dt,
                     nd == 2   ? format_tag::ab
                     : nd == 3 ? format_tag::abc
                     : nd == 4 ? format_tag::abcd
                               : format_tag::abcde);
}

eltwise_problem random_problem(std::mt19937& rng) {
  const int nd = 2 + static_cast<int>(rng() % 4);
  dims_array d{};
  for (int i = 0; i < nd; ++i) d[i] = 1 + static_cast<std::int64_t>(rng() % (i == 1 ? 40 : 13));
  if (nd == 4 && rng() % 3 == 0) d[1] = 16 * (1 + static_cast<std::int64_t>(rng() % 3));
  const data_type types[] = {data_type::f32, data_type::bf16};
  eltwise_problem p;
  p.src = random_layout(rng, d, nd, types[rng() % 4 == 0 ? 1 : 0]);
  p.dst = p.src.with_data_type(types[rng() % 4 == 0 ? 1 : 0]);
  if (rng() % 4 == 0) p.dst = p.dst.with_offset0(static_cast<std::int64_t>(rng() % 7));
  p.op = random_op(rng);
  p.post_ops = random_chain(rng, true);
  p.nthr = 1 + static_cast<int>(rng() % 3);
  return p;
}

// Blocked activations with channels not a multiple of the block (padding).
eltwise_problem random_padded_problem(std::mt19937& rng) {
  std::int64_t c = 1 + static_cast<std::int64_t>(rng() % 50);
  if (c % 8 == 0) ++c;
  const dims_array d{1 + static_cast<std::int64_t>(rng() % 2), c,
                     1 + static_cast<std::int64_t>(rng() % 7),
                     1 + static_cast<std::int64_t>(rng() % 13)};
  dims_view dims(std::span<const std::int64_t>(d.data(), 4));
  const data_type types[] = {data_type::f32, data_type::bf16};
  eltwise_problem p;
  p.src = memory_desc(dims, types[rng() % 3 == 0 ? 1 : 0],
                      rng() % 2 ? format_tag::nChw16c : format_tag::nChw8c);
  p.dst = p.src.with_data_type(types[rng() % 3 == 0 ? 1 : 0]);
  p.op = random_op(rng);
  p.post_ops = random_chain(rng, true);
  p.nthr = 1 + static_cast<int>(rng() % 3);
  return p;
}

}  // namespace

TEST_CASE("the generic eltwise is built into the library at avx2 and avx512_core",
          "[cpu][generic][eltwise]") {
  for (cpu_isa isa : test_isas()) {
    auto code = generic_isa_for(generic_kernel::eltwise, isa);
    REQUIRE(code);
    CHECK(code.value() == isa);
  }
}

TEST_CASE("generic eltwises of random shapes equal the specialized kernel bit for bit",
          "[cpu][generic][eltwise]") {
  std::mt19937 rng(5);
  for (cpu_isa isa : test_isas()) {
    for (int trial = 0; trial < 60; ++trial) {
      const eltwise_problem p = random_problem(rng);
      INFO("trial " << trial);
      check_bits(p, isa, 300 + static_cast<std::uint32_t>(trial), trial % 5 == 0);
    }
  }
}

TEST_CASE("the generic eltwise: every algorithm and post-op, on odd shapes, against the reference",
          "[cpu][generic][eltwise]") {
  const cpu_isa isa = test_isas().back();
  for (const format_tag tag : {format_tag::nchw, format_tag::nhwc, format_tag::nChw16c}) {
    for (int a = 0; a < 8; ++a) {
      eltwise_problem p;
      const std::int64_t c = tag == format_tag::nChw16c ? 32 : 19;
      p.src = memory_desc({2, c, 7, 5}, data_type::f32, tag);
      p.dst = p.src;
      p.op.alg = static_cast<eltwise_alg>(a);
      p.op.alpha = a == 0 ? 0.25f : -0.5f;
      p.op.beta = 0.75f;
      post_op e;
      e.eltwise = {static_cast<eltwise_alg>((a + 3) % 8), 0.5f, 1.f, 2.f};
      for (binary_broadcast bc :
           {binary_broadcast::none, binary_broadcast::per_channel, binary_broadcast::scalar}) {
        post_op b;
        b.what = post_op::kind::binary_add;
        b.binary = {1, bc};
        p.post_ops = {e, b};
        p.nthr = 2;
        check_bits(p, isa, 40 + static_cast<std::uint32_t>(a), false);
        // The reference, within the specialized kernel's tolerance
        // (eltwise_kernel_test.cpp): results here are O(1).
        auto g = generic_eltwise_kernel::create(p, default_eltwise_config(p, isa), isa);
        REQUIRE(g);
        const auto src = random_buffer(p.src, 9);
        auto ops = operands_for(p, 10);
        std::vector<std::byte> got(p.dst.size_bytes()), want(p.dst.size_bytes());
        g.value()->execute({src.data(), got.data(), ops.pointers.data()}, nullptr, pool());
        cpu_test::naive_eltwise(p, {src.data(), want.data(), ops.pointers.data()});
        int bad = 0;
        for (std::size_t i = 0; i < got.size() / 4; ++i) {
          float x, y;
          std::memcpy(&x, got.data() + 4 * i, 4);
          std::memcpy(&y, want.data() + 4 * i, 4);
          if (std::isnan(y)
                  ? !std::isnan(x)
                  : (std::isinf(y) ? x != y : std::fabs(x - y) > 1e-5f * (1 + std::fabs(y)))) {
            ++bad;
          }
        }
        INFO(describe(p));
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("generic eltwises of padded layouts equal the specialized kernel bit for bit",
          "[cpu][generic][eltwise]") {
  std::mt19937 rng(23);
  for (cpu_isa isa : test_isas()) {
    for (int trial = 0; trial < 50; ++trial) {
      const eltwise_problem p = random_padded_problem(rng);
      INFO("trial " << trial);
      check_bits(p, isa, 700 + static_cast<std::uint32_t>(trial), trial % 5 == 0);
    }
    // nChw8c with 20 channels: the third block's last 4 are padding.
    eltwise_problem p;
    p.src = p.dst = memory_desc({2, 20, 5, 7}, data_type::f32, format_tag::nChw8c);
    p.op.alg = eltwise_alg::relu;
    p.nthr = 2;
    check_bits(p, isa, 77, true);
  }
}

TEST_CASE("the generic eltwise declines what it cannot walk", "[cpu][generic][eltwise]") {
  const cpu_isa isa = test_isas().back();
  eltwise_problem p;
  p.op.alg = eltwise_alg::relu;
  SECTION("more post-ops than its parameter block holds") {
    p.src = p.dst = memory_desc({4, 8}, data_type::f32, format_tag::ab);
    for (int i = 0; i <= gw_max_post_ops; ++i) p.post_ops.push_back(post_op{});
    auto g = generic_eltwise_kernel::create(p, default_eltwise_config(p, isa), isa);
    REQUIRE_FALSE(g);
    CHECK(g.why().code == status::unimplemented);
  }
  SECTION("an ISA below avx2") {
    p.src = p.dst = memory_desc({4, 8}, data_type::f32, format_tag::ab);
    auto g = generic_eltwise_kernel::create(p, default_eltwise_config(p, isa), cpu_isa::sse41);
    REQUIRE_FALSE(g);
    CHECK(g.why().code == status::unimplemented);
  }
  SECTION("an invalid problem") {
    p.src = memory_desc({4, 8}, data_type::f32, format_tag::ab);
    p.dst = memory_desc({4, 9}, data_type::f32, format_tag::ab);
    auto g = generic_eltwise_kernel::create(p, default_eltwise_config(p, isa), isa);
    REQUIRE_FALSE(g);
  }
}
