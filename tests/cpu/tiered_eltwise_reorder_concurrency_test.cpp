// Tiered creation of eltwise and reorder through the public API: a
// primitive that misses every cache starts on the generic walk, the
// specialized kernel is swapped in by the background pool, and nothing a
// caller can see changes but the speed — outputs bit-identical across the
// swap over random shapes, layouts, data types, scales, algorithms and
// post-ops, executions racing with the swap (ThreadSanitizer runs this:
// label concurrency), the persistent cache holding only specialized code,
// and layouts with padding (channels not a multiple of the block) served by
// the generic walk first, their padding zero before and after the swap.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/tensor/numeric.hpp"
#include "tiered_test_support.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

using tiered_support::cpu;
using tiered_support::mode_scope;
using tiered_support::same_bits;
using tiered_support::tiered_here;

// Random bytes that are finite values of the type.
memory make(const memory::desc& md, unsigned seed) {
  memory m(md, cpu());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> v(-3.f, 3.f);
  auto* p = static_cast<std::byte*>(m.get_data_handle());
  const std::size_t es = size_of(md.data_type());
  for (std::size_t i = 0; i < md.size_bytes() / es; ++i) {
    const float f = v(rng);
    switch (md.data_type()) {
      case data_type::f32: std::memcpy(p + 4 * i, &f, 4); break;
      case data_type::bf16: {
        const std::uint16_t h = f32_to_bf16(f);
        std::memcpy(p + 2 * i, &h, 2);
        break;
      }
      default: p[i * es] = static_cast<std::byte>(rng()); break;
    }
  }
  return m;
}

std::vector<std::byte> bytes_of(const memory& m) {
  const auto* p = static_cast<const std::byte*>(m.get_data_handle());
  return std::vector<std::byte>(p, p + m.get_desc().size_bytes());
}

const algorithm eltwise_algs[] = {algorithm::eltwise_relu,      algorithm::eltwise_gelu_erf,
                                  algorithm::eltwise_gelu_tanh, algorithm::eltwise_tanh,
                                  algorithm::eltwise_logistic,  algorithm::eltwise_exp,
                                  algorithm::eltwise_linear,    algorithm::eltwise_clip};

// An eltwise with a post-op chain (an eltwise, a binary add of a random
// broadcast), its arguments, and a run into a fresh dst.
struct eltwise_case {
  memory::desc md;
  eltwise_forward::primitive_desc pd;
  memory src, addend;

  eltwise_case(std::mt19937& rng, unsigned seed) {
    const tag tags[] = {tag::nchw, tag::nhwc, tag::nChw16c};
    const tag t = tags[rng() % 3];
    const std::int64_t c =
        t == tag::nChw16c ? 16 * (1 + static_cast<std::int64_t>(rng() % 3)) : 1 + rng() % 37;
    const memory::dims dims = {1 + static_cast<std::int64_t>(rng() % 2), c,
                               1 + static_cast<std::int64_t>(rng() % 9),
                               1 + static_cast<std::int64_t>(rng() % 23)};
    md = memory::desc(dims, rng() % 4 == 0 ? data_type::bf16 : data_type::f32, t);
    const algorithm alg = eltwise_algs[rng() % 8];
    const float alpha = alg == algorithm::eltwise_clip ? -0.5f : (rng() % 2 ? 0.f : 0.3f);
    const float beta = alg == algorithm::eltwise_clip ? 1.5f : 0.25f;
    memory::desc operand_md;
    switch (rng() % 3) {
      case 0: operand_md = memory::desc(dims, data_type::f32, t); break;
      case 1: operand_md = memory::desc({1, c, 1, 1}, data_type::f32, tag::nchw); break;
      default: operand_md = memory::desc({1, 1, 1, 1}, data_type::f32, tag::nchw); break;
    }
    post_ops ops;
    ops.append_eltwise(0.5f, eltwise_algs[rng() % 8], 0.125f, 0.75f);
    ops.append_binary(algorithm::binary_add, operand_md);
    primitive_attr attr;
    attr.set_post_ops(ops);
    pd = eltwise_forward::primitive_desc(
        eltwise_forward::desc(prop_kind::forward_inference, alg, md, alpha, beta), attr, cpu());
    src = make(md, seed);
    addend = make(operand_md, seed + 1);
  }

  std::vector<std::byte> run(const primitive& prim) const {
    memory dst(md, cpu());
    std::memset(dst.get_data_handle(), 0, md.size_bytes());
    prim.execute(stream(cpu()),
                 {{PRIMCACHE_ARG_SRC, src},
                  {PRIMCACHE_ARG_DST, dst},
                  {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1, addend}});
    return bytes_of(dst);
  }
};

// A reorder between random layouts and data types, with random scales.
struct reorder_case {
  memory::desc from, to;
  reorder::primitive_desc pd;
  memory src;

  reorder_case(std::mt19937& rng, unsigned seed) {
    const tag tags[] = {tag::nchw, tag::nhwc, tag::nChw16c, tag::nChw8c};
    const data_type types[] = {data_type::f32, data_type::bf16, data_type::s8, data_type::u8};
    const tag ft = tags[rng() % 4];
    const tag tt = tags[rng() % 4];
    const std::int64_t c = 16 * (1 + static_cast<std::int64_t>(rng() % 3));
    const memory::dims dims = {1 + static_cast<std::int64_t>(rng() % 2), c,
                               1 + static_cast<std::int64_t>(rng() % 11),
                               1 + static_cast<std::int64_t>(rng() % 27)};
    const data_type fdt = rng() % 2 ? data_type::f32 : types[rng() % 4];
    from = memory::desc(dims, fdt, ft);
    to = memory::desc(dims, rng() % 2 ? fdt : types[rng() % 4], tt);
    primitive_attr attr;
    switch (rng() % 3) {
      case 0: attr.set_output_scales(0, {0.75f}); break;
      case 1: {
        std::vector<float> s(static_cast<std::size_t>(c));
        for (std::size_t i = 0; i < s.size(); ++i) s[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
        attr.set_output_scales(2, s);
        break;
      }
      default: break;
    }
    pd = reorder::primitive_desc(cpu(), from, cpu(), to, attr);
    src = make(from, seed);
  }

  std::vector<std::byte> run(const primitive& prim) const {
    memory dst(to, cpu());
    std::memset(dst.get_data_handle(), 0, to.size_bytes());
    prim.execute(stream(cpu()), {{PRIMCACHE_ARG_FROM, src}, {PRIMCACHE_ARG_TO, dst}});
    return bytes_of(dst);
  }
};

// Before the swap (generic, when the background pool has not finished), after
// it, and in sync mode: the same bytes.
template <class Case, class Prim>
void check_swap(const Case& c, int& generic_runs) {
  set_jit_mode(jit_mode::tiered);
  Prim prim(c.pd);
  if (!prim.specialized()) ++generic_runs;
  const auto before = c.run(prim);
  prim.wait_until_specialized();
  CHECK(prim.specialized());
  CHECK(before == c.run(prim));
  set_jit_mode(jit_mode::sync);
  CHECK(before == c.run(Prim(c.pd)));
}

}  // namespace

TEST_CASE("a tiered eltwise gives bit-identical outputs before and after the swap",
          "[cpu][tiered][eltwise]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  std::mt19937 rng(3);
  int generic_runs = 0;
  for (int trial = 0; trial < 16; ++trial) {
    const eltwise_case c(rng, 100 + static_cast<unsigned>(trial));
    INFO("trial " << trial << " " << c.pd.impl_info_str());
    check_swap<eltwise_case, eltwise_forward>(c, generic_runs);
  }
  // Most creations return before their specialized kernel is compiled.
  CHECK(generic_runs > 0);
}

TEST_CASE("a tiered reorder gives bit-identical outputs before and after the swap",
          "[cpu][tiered][reorder]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  std::mt19937 rng(4);
  int generic_runs = 0;
  for (int trial = 0; trial < 16; ++trial) {
    const reorder_case c(rng, 200 + static_cast<unsigned>(trial));
    INFO("trial " << trial);
    check_swap<reorder_case, reorder>(c, generic_runs);
  }
  CHECK(generic_runs > 0);
}

TEST_CASE("eltwise and reorder executions racing with the swap all give the same bits",
          "[cpu][tiered][eltwise][reorder]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  std::mt19937 rng(5);
  const eltwise_case e(rng, 300);
  const reorder_case r(rng, 301);
  set_jit_mode(jit_mode::sync);
  const auto e_expected = e.run(eltwise_forward(e.pd));
  const auto r_expected = r.run(reorder(r.pd));
  set_jit_mode(jit_mode::tiered);
  for (int round = 0; round < 2; ++round) {
    eltwise_forward ep(e.pd);
    reorder rp(r.pd);
    std::atomic<int> mismatches{0}, runs{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        // Run until well after the swap.
        for (int i = 0; i < 400; ++i) {
          const bool generic = !ep.specialized() || !rp.specialized();
          if (t % 2 == 0 ? e.run(ep) != e_expected : r.run(rp) != r_expected) ++mismatches;
          ++runs;
          if (!generic && i > 10) break;
        }
      });
    }
    for (auto& t : threads) t.join();
    CHECK(mismatches == 0);
    CHECK(runs > 0);
    ep.wait_until_specialized();
    rp.wait_until_specialized();
    CHECK(ep.specialized());
    CHECK(rp.specialized());
  }
}

TEST_CASE(
    "eltwise and reorder over padded layouts start on the generic walk, bit-identical "
    "across the swap, their padding zero",
    "[cpu][tiered][eltwise][reorder]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  int generic_runs = 0;
  unsigned seed = 500;
  // Channels not a multiple of the block: dst's padding is written as zero
  // over the 0x7f each run starts from, by either kernel.
  for (std::int64_t c : {3, 17, 20, 50}) {
    for (tag blocked : {tag::nChw16c, tag::nChw8c}) {
      const memory::desc padded({2, c, 5, 7}, data_type::f32, blocked);
      const memory::desc plain({2, c, 5, 7}, data_type::f32, tag::nchw);
      INFO("channels " << c << " tag " << static_cast<int>(blocked));
      const memory src = make(plain, ++seed);
      const memory padded_src = make(padded, ++seed);
      auto run = [&](const primitive& prim, const memory& from) {
        memory dst(padded, cpu());
        std::memset(dst.get_data_handle(), 0x7f, padded.size_bytes());
        prim.execute(stream(cpu()), {{PRIMCACHE_ARG_FROM, from}, {PRIMCACHE_ARG_TO, dst}});
        return bytes_of(dst);
      };
      auto run_eltwise = [&](const primitive& prim) {
        memory dst(padded, cpu());
        std::memset(dst.get_data_handle(), 0x7f, padded.size_bytes());
        prim.execute(stream(cpu()), {{PRIMCACHE_ARG_SRC, padded_src}, {PRIMCACHE_ARG_DST, dst}});
        return bytes_of(dst);
      };
      const auto r_pd = reorder::primitive_desc(cpu(), plain, cpu(), padded);
      const auto e_pd = eltwise_forward::primitive_desc(
          eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_relu, padded),
          cpu());
      set_jit_mode(jit_mode::sync);
      const auto r_expected = run(reorder(r_pd), src);
      const auto e_expected = run_eltwise(eltwise_forward(e_pd));
      set_jit_mode(jit_mode::tiered);
      reorder r(r_pd);
      eltwise_forward e(e_pd);
      CHECK(r.creation_outcome() == lookup_outcome::miss);
      if (!r.specialized()) ++generic_runs;
      if (!e.specialized()) ++generic_runs;
      // Executions racing with the swap, each into its own dst.
      std::atomic<int> mismatches{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < 200; ++i) {
            const bool generic = !r.specialized() || !e.specialized();
            if (t % 2 == 0 ? run(r, src) != r_expected : run_eltwise(e) != e_expected) {
              ++mismatches;
            }
            if (!generic && i > 5) break;
          }
        });
      }
      for (auto& t : threads) t.join();
      CHECK(mismatches == 0);
      r.wait_until_specialized();
      e.wait_until_specialized();
      CHECK(r.specialized());
      CHECK(e.specialized());
      CHECK(run(r, src) == r_expected);
      CHECK(run_eltwise(e) == e_expected);
    }
  }
  // Most creations return before their specialized kernel is compiled.
  CHECK(generic_runs > 0);
}

TEST_CASE(
    "the persistent cache stores and loads only an eltwise's and a reorder's specialized code",
    "[cpu][tiered][eltwise][reorder][persistent]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  char dir_template[] = "/tmp/primcache_tiered_walk_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);  // mode 0700, as the store requires
  const std::string dir = dir_template;
  set_persistent_cache(open_persistent_cache_dir(dir, 64));
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(16);
  std::mt19937 rng(8);
  const eltwise_case e(rng, 400);
  const reorder_case r(rng, 401);
  const persistent_cache_stats before = get_persistent_cache_stats();
  // Store misses: tiered; their writes wait for the specialized code.
  eltwise_forward e_first(e.pd);
  reorder r_first(r.pd);
  const auto e_out = e.run(e_first);
  const auto r_out = r.run(r_first);
  flush_persistent_cache_writes();
  const persistent_cache_stats written = get_persistent_cache_stats();
  CHECK(written.writes_stored == before.writes_stored + 2);
  CHECK(e_first.specialized());
  CHECK(r_first.specialized());
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(16);
  // Store hits: specialized at once, no generic tier.
  eltwise_forward e_loaded(e.pd);
  reorder r_loaded(r.pd);
  CHECK(get_persistent_cache_stats().hits == written.hits + 2);
  CHECK(e_loaded.specialized());
  CHECK(r_loaded.specialized());
  CHECK(e_out == e.run(e_loaded));
  CHECK(r_out == r.run(r_loaded));
  set_persistent_cache(nullptr);
  std::filesystem::remove_all(dir);
}
