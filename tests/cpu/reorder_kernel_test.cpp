#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <llvm/IR/Function.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "jit/object_symbols.hpp"
#include "kernels/layout_walk.hpp"
#include "kernels/reorder_config.hpp"
#include "kernels/reorder_kernel.hpp"
#include "kernels/reorder_validation.hpp"
#include "naive_reference.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primcache/tensor/memory_desc.hpp"
#include "primcache/tensor/numeric.hpp"
#include "test_isas.hpp"

// Every check here is bitwise against naive_reorder (naive_reference.hpp,
// which shares no code with the kernel): the kernel and the reference apply
// the same single f32 multiply (correctly rounded in both) and the same
// exactly specified conversions (round to nearest even, then saturate), so
// no tolerance is needed or allowed. Destination buffers start as the same
// garbage in both runs, so gaps a layout leaves must stay untouched and
// padding must become zeros in both.

namespace {

using cpu_test::test_isas;
using primcache::cpu_isa;
using primcache::data_type;
using primcache::format_tag;
using primcache::memory_desc;
namespace ci = primcache::cpu_internal;

// Byte comparison that reports a bool, not two dumps of whole buffers.
bool same_bytes(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  return a == b;
}

primcache::thread_pool& pool() {
  static primcache::thread_pool p(2);
  return p;
}

// Random bytes for a whole buffer (padding and gaps included), with values
// that are meaningful for the type: floats over a wide range with specials
// mixed in, integers over their whole range.
std::vector<std::byte> random_buffer(const memory_desc& md, std::uint32_t seed) {
  std::vector<std::byte> buf(md.size_bytes() + 64);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> val(-300.f, 300.f);
  const std::size_t es = primcache::size_of(md.data_type());
  const std::size_t n = md.size_bytes() / es;
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
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            1.00390625f,
                            65520.f};
  for (std::size_t i = 0; i < n; ++i) {
    float f = (rng() % 8 == 0) ? specials[rng() % std::size(specials)] : val(rng);
    std::byte* p = buf.data() + i * es;
    switch (md.data_type()) {
      case data_type::f32: std::memcpy(p, &f, 4); break;
      case data_type::bf16: {
        std::uint16_t h = primcache::f32_to_bf16(f);
        std::memcpy(p, &h, 2);
        break;
      }
      case data_type::f16: {
        std::uint16_t h = primcache::f32_to_f16(f);
        std::memcpy(p, &h, 2);
        break;
      }
      case data_type::s32: {
        std::int32_t v = static_cast<std::int32_t>(rng());
        std::memcpy(p, &v, 4);
        break;
      }
      default: *p = static_cast<std::byte>(rng()); break;
    }
  }
  return buf;
}

std::unique_ptr<ci::reorder_kernel> make_kernel(const ci::reorder_problem& p,
                                                const ci::reorder_config& c, cpu_isa isa) {
  auto k = ci::reorder_kernel::create(p, c, isa);
  INFO((k ? std::string() : k.why().message));
  REQUIRE(k.has_value());
  return std::move(k).value();
}

std::vector<float> scales_for(const ci::reorder_problem& p) {
  std::vector<float> s;
  if (p.scales == ci::reorder_scales::common) s = {0.37f};
  if (p.scales == ci::reorder_scales::per_dim) {
    for (std::int64_t i = 0; i < p.src.dims()[p.scale_dim]; ++i) s.push_back(0.25f + 0.5f * i);
  }
  return s;
}

// Runs kernel and reference from the same source into the same garbage.
struct outcome {
  std::vector<std::byte> got;
  std::vector<std::byte> want;
};

outcome run_both(const ci::reorder_kernel& k, const ci::reorder_problem& p, std::uint32_t seed) {
  auto src = random_buffer(p.src, seed);
  auto scales = scales_for(p);
  std::vector<std::byte> got(p.dst.size_bytes() + 64, std::byte{0x5a});
  std::vector<std::byte> want = got;
  k.execute({src.data(), got.data(), scales.data()}, nullptr, pool());
  cpu_test::naive_reorder(p, {src.data(), want.data(), scales.data()});
  return {std::move(got), std::move(want)};
}

void check_matches_reference(const ci::reorder_problem& p, cpu_isa isa,
                             const ci::reorder_config* config = nullptr) {
  INFO(p.src.to_string() << " -> " << p.dst.to_string() << " isa " << primcache::to_string(isa)
                         << " nthr " << p.nthr);
  auto k = make_kernel(p, config ? *config : ci::default_reorder_config(p, isa), isa);
  auto r = run_both(*k, p, 7);
  CHECK(same_bytes(r.got, r.want));
}

ci::reorder_problem problem(const memory_desc& src, const memory_desc& dst, int nthr = 1) {
  ci::reorder_problem p;
  p.src = src;
  p.dst = dst;
  p.nthr = nthr;
  return p;
}

// The plain stores (masked ones are intrinsic calls) into the buffers of
// the walk function a plan and codegen emit: scalar and vector.
struct store_counts {
  int scalar = 0;
  int vector = 0;
  std::vector<unsigned> vector_lanes;  // each vector store's
};
store_counts walk_stores(const ci::walk_plan& plan, const ci::walk_codegen& g) {
  llvm::LLVMContext ctx;
  llvm::Module m("walk", ctx);
  ci::emit_walk_function(m, "walk", plan, g);
  store_counts n;
  for (const llvm::BasicBlock& bb : *m.getFunction("walk")) {
    for (const llvm::Instruction& i : bb) {
      if (const auto* st = llvm::dyn_cast<llvm::StoreInst>(&i)) {
        // The walk's own odometer is i64 stores to its allocas.
        if (llvm::isa<llvm::AllocaInst>(st->getPointerOperand())) continue;
        llvm::Type* t = st->getValueOperand()->getType();
        (t->isVectorTy() ? n.vector : n.scalar)++;
        if (const auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t)) {
          n.vector_lanes.push_back(vt->getNumElements());
        }
      }
    }
  }
  return n;
}

// walk_stores of a reorder's plan, which must be a transposing walk, at
// tiles of `tile`.
store_counts transposing_walk_stores(const ci::reorder_problem& p, int tile) {
  auto plan = ci::plan_walk(p.src, p.dst, ci::reorder_keep_mask(p));
  REQUIRE(plan);
  REQUIRE(plan.value().inner == ci::walk_plan::inner_kind::tile);
  ci::walk_codegen g;
  g.src_dt = p.src.data_type();
  g.dst_dt = p.dst.data_type();
  g.scales = p.scales;
  g.scale_dim = p.scale_dim;
  g.tile = tile;
  g.chunk = ci::walk_chunk(plan.value(), 0, tile);
  return walk_stores(plan.value(), g);
}

}  // namespace

TEST_CASE("reorder moves every layout pair to match the reference, padding zeroed",
          "[cpu][reorder]") {
  struct layout_case {
    std::vector<std::int64_t> dims;
    format_tag src;
    format_tag dst;
  };
  const std::vector<layout_case> cases = {
      {{2, 17, 5, 7}, format_tag::nchw, format_tag::nhwc},
      {{2, 17, 5, 7}, format_tag::nhwc, format_tag::nchw},
      {{1, 64, 7, 9}, format_tag::nchw, format_tag::nhwc},
      {{1, 33, 13, 3}, format_tag::nchw, format_tag::nChw16c},
      {{2, 17, 5, 5}, format_tag::nChw16c, format_tag::nchw},
      {{1, 17, 3, 5}, format_tag::nChw16c, format_tag::nChw8c},
      {{1, 19, 3, 5}, format_tag::nChw8c, format_tag::nChw16c},
      {{1, 40, 3, 2}, format_tag::nhwc, format_tag::nChw16c},
      {{1, 40, 3, 2}, format_tag::nChw8c, format_tag::nhwc},
      {{37, 19, 3, 3}, format_tag::oihw, format_tag::OIhw16i16o},
      {{37, 19, 3, 3}, format_tag::OIhw16i16o, format_tag::oihw},
      {{20, 18, 1, 1}, format_tag::OIhw16i16o, format_tag::OIhw16o16i},
      {{31, 47}, format_tag::ab, format_tag::ba},
      {{47, 31}, format_tag::ba, format_tag::ab},
      {{1, 1}, format_tag::ab, format_tag::ba},
      {{1, 1, 1, 1}, format_tag::nchw, format_tag::nChw16c},
      {{3, 1, 16, 1}, format_tag::nChw16c, format_tag::nhwc},
      {{1000}, format_tag::a, format_tag::a},
      {{5, 7, 11}, format_tag::abc, format_tag::cba},
      {{2, 3, 4, 5, 6}, format_tag::abcde, format_tag::acdeb},
  };
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const int nthr = GENERATE(1, 2);
  for (const auto& c : cases) {
    check_matches_reference(problem(memory_desc(c.dims, data_type::f32, c.src),
                                    memory_desc(c.dims, data_type::f32, c.dst), nthr),
                            isa);
  }

  SECTION("explicit strides with gaps, and offset0") {
    memory_desc src({6, 10}, data_type::f32, std::vector<std::int64_t>{13, 1});
    memory_desc dst({6, 10}, data_type::f32, std::vector<std::int64_t>{1, 7});
    check_matches_reference(problem(src, dst, nthr), isa);
    check_matches_reference(problem(dst.with_offset0(3), src.with_offset0(5), nthr), isa);
  }
}

TEST_CASE("reorder converts between every pair of data types like the reference",
          "[cpu][reorder][types][kernel_sweep]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const std::vector<data_type> types = {data_type::f32, data_type::bf16, data_type::f16,
                                        data_type::s8,  data_type::u8,   data_type::s32};
  const std::vector<std::int64_t> dims = {2, 19, 3, 5};
  for (data_type s : types) {
    for (data_type d : types) {
      SECTION(std::string(primcache::to_string(s)) + " to " +
              std::string(primcache::to_string(d))) {
        // Same layout (streaming) and a transpose (tiles).
        check_matches_reference(problem(memory_desc(dims, s, format_tag::nchw),
                                        memory_desc(dims, d, format_tag::nchw), 2),
                                isa);
        check_matches_reference(problem(memory_desc(dims, s, format_tag::nchw),
                                        memory_desc(dims, d, format_tag::nChw16c), 1),
                                isa);
      }
    }
  }
}

TEST_CASE("reorder applies common and per-dimension scales before rounding",
          "[cpu][reorder][scales]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const std::vector<std::int64_t> dims = {3, 21, 4, 6};
  const data_type dt = GENERATE(data_type::s8, data_type::u8, data_type::f32, data_type::bf16);
  SECTION("a common scale") {
    auto p = problem(memory_desc(dims, data_type::f32, format_tag::nchw),
                     memory_desc(dims, dt, format_tag::nhwc), 2);
    p.scales = ci::reorder_scales::common;
    check_matches_reference(p, isa);
  }
  SECTION("a scale per index of each dimension") {
    const int d = GENERATE(0, 1, 2, 3);
    for (auto [st, dtag] : {std::pair{format_tag::nchw, format_tag::nhwc},
                            std::pair{format_tag::nchw, format_tag::nchw},
                            std::pair{format_tag::nhwc, format_tag::nChw8c}}) {
      auto p = problem(memory_desc(dims, data_type::f32, st), memory_desc(dims, dt, dtag), 1);
      p.scales = ci::reorder_scales::per_dim;
      p.scale_dim = d;
      check_matches_reference(p, isa);
    }
  }
  SECTION("s8 and u8 back to f32, scaled") {
    auto p = problem(memory_desc(dims, dt, format_tag::nChw16c),
                     memory_desc(dims, data_type::f32, format_tag::nchw), 2);
    p.scales = ci::reorder_scales::common;
    check_matches_reference(p, isa);
  }
}

TEST_CASE("reorder property: random shapes and layouts match the reference",
          "[cpu][reorder][property]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  std::mt19937 rng(1234);
  const std::int64_t sizes[] = {1, 2, 3, 5, 7, 11, 13, 16, 17, 31, 37, 64};
  const format_tag tags[] = {format_tag::nchw,     format_tag::nhwc,    format_tag::chwn,
                             format_tag::nChw8c,   format_tag::nChw16c, format_tag::OIhw16i16o,
                             format_tag::OIhw8i8o, format_tag::ihwo};
  const data_type types[] = {data_type::f32, data_type::bf16, data_type::s8, data_type::f16};
  for (int iter = 0; iter < 40; ++iter) {
    std::vector<std::int64_t> dims(4);
    for (auto& d : dims) d = sizes[rng() % std::size(sizes)];
    dims[2] = std::min<std::int64_t>(dims[2], 7);
    auto p = problem(memory_desc(dims, types[rng() % 4], tags[rng() % std::size(tags)]),
                     memory_desc(dims, types[rng() % 4], tags[rng() % std::size(tags)]),
                     1 + static_cast<int>(rng() % 2));
    if (rng() % 3 == 0) p.scales = ci::reorder_scales::common;
    check_matches_reference(p, isa);
  }
  SECTION("large channel counts") {
    std::vector<std::int64_t> dims = {1, 1031, 3, 3};
    check_matches_reference(problem(memory_desc(dims, data_type::f32, format_tag::nchw),
                                    memory_desc(dims, data_type::f32, format_tag::nhwc), 2),
                            isa);
  }
}

TEST_CASE("reorder configurations give different code and the same results",
          "[cpu][reorder][config]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const std::vector<std::int64_t> dims = {2, 35, 9, 10};
  auto [s, d, st, dt] =
      GENERATE(std::tuple{format_tag::nchw, format_tag::nhwc, data_type::f32, data_type::f32},
               std::tuple{format_tag::nhwc, format_tag::nchw, data_type::f32, data_type::f32},
               std::tuple{format_tag::nchw, format_tag::nchw, data_type::f32, data_type::f32},
               std::tuple{format_tag::nchw, format_tag::nchw, data_type::f32, data_type::bf16});
  auto p = problem(memory_desc(dims, st, s), memory_desc(dims, dt, d), 2);
  auto def = make_kernel(p, ci::default_reorder_config(p, isa), isa);
  const auto want = run_both(*def, p, 3).want;
  auto candidates = ci::reorder_config_variants(p, isa);
  REQUIRE(candidates.size() >= 3);
  std::vector<std::vector<std::byte>> objects{def->object()};
  for (const auto& c : candidates) {
    INFO("tile " << c.tile << " lanes " << c.vector_lanes << " unroll " << c.unroll << " chunk "
                 << c.chunk << " memcpy " << c.use_memcpy << " blocks " << c.block_i << " "
                 << c.block_j);
    auto k = make_kernel(p, c, isa);
    for (const auto& o : objects) CHECK_FALSE(same_bytes(o, k->object()));
    objects.push_back(k->object());
    CHECK(same_bytes(run_both(*k, p, 3).got, want));
  }
}

TEST_CASE("a transposing reorder's blocks are configuration fields the tuner can search",
          "[cpu][reorder][config]") {
  const cpu_isa isa = primcache::effective_isa();
  const std::vector<std::int64_t> dims = {1, 64, 48, 40};
  auto p = GENERATE_COPY(problem(memory_desc(dims, data_type::f32, format_tag::nchw),
                                 memory_desc(dims, data_type::f32, format_tag::nhwc), 2),
                         problem(memory_desc(dims, data_type::f32, format_tag::nhwc),
                                 memory_desc(dims, data_type::f32, format_tag::nchw), 2));
  INFO(p.src.to_string() << " -> " << p.dst.to_string());
  const auto def = ci::default_reorder_config(p, isa);
  // The default takes tile_blocks_for's blocks, one side only, as the
  // kernel used to derive them itself.
  auto plan = ci::plan_walk(p.src, p.dst, 0);
  REQUIRE(plan.has_value());
  const auto blocks = ci::tile_blocks_for(p, plan.value(), def);
  CHECK((def.block_i > 0) != (def.block_j > 0));
  if (blocks.j > 0) {
    CHECK(def.block_j == std::min<std::int64_t>(blocks.j, 40 * 48 / def.tile * def.tile));
  } else {
    CHECK(def.block_i > def.tile);
    CHECK(def.block_i <= blocks.i);
  }

  // The fields round-trip, in order, after the older five.
  ci::reorder_config c = def;
  c.block_i = 3 * def.tile;
  c.block_j = 0;
  auto f = ci::to_fields(c);
  REQUIRE(f.fields().size() == 7);
  CHECK(f.fields()[5].name == "block_i");
  CHECK(f.fields()[6].name == "block_j");
  auto back = ci::reorder_config_from_fields(f);
  REQUIRE(back.has_value());
  CHECK(back.value() == c);
  // A tune table's entry from before the blocks were fields is refused,
  // naming the first missing one (the primitive then takes the heuristic's).
  auto old = primcache::backend::kernel_config::from_json(
      R"({"tile":16,"vector_lanes":16,"unroll":1,"chunk":0,"use_memcpy":1})");
  REQUIRE(old.has_value());
  auto refused = ci::reorder_config_from_fields(old.value());
  REQUIRE_FALSE(refused.has_value());
  CHECK_THAT(refused.why().message, Catch::Contains("no field 'block_i'"));

  // Candidates: blocks on either side and none, each valid and listed once,
  // and each computes what the reference does.
  auto cands = ci::reorder_config_candidates(p, isa);
  bool none = false, on_i = false, on_j = false;
  for (std::size_t k = 0; k < cands.size(); ++k) {
    const ci::reorder_config& x = cands.at(k);
    CHECK(ci::validate_reorder_config(x).has_value());
    CHECK_FALSE((x.block_i > 0 && x.block_j > 0));
    none = none || (x.block_i == 0 && x.block_j == 0);
    on_i = on_i || x.block_i > 0;
    on_j = on_j || x.block_j > 0;
    for (std::size_t m = 0; m < k; ++m) CHECK_FALSE(cands.at(m) == x);
  }
  CHECK(none);
  CHECK(on_i);
  CHECK(on_j);
  for (auto [bi, bj] : {std::pair<std::int64_t, std::int64_t>{0, 0},
                        {def.tile * 2, 0},
                        {def.tile * 5, 0},
                        {0, def.tile * 2},
                        {0, def.tile * 7}}) {
    c = def;
    c.block_i = bi;
    c.block_j = bj;
    check_matches_reference(p, isa, &c);
  }
}

TEST_CASE("a reorder kernel loaded from its captured object computes the same bits",
          "[cpu][reorder][load]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const std::vector<std::int64_t> dims = {2, 17, 6, 5};
  auto p = problem(memory_desc(dims, data_type::f32, format_tag::nchw),
                   memory_desc(dims, data_type::s8, format_tag::nChw16c), 2);
  p.scales = ci::reorder_scales::per_dim;
  p.scale_dim = 1;
  const auto config = ci::default_reorder_config(p, isa);
  auto compiled = make_kernel(p, config, isa);
  auto loaded = ci::reorder_kernel::load(p, config, compiled->object());
  REQUIRE(loaded.has_value());
  CHECK(same_bytes(loaded.value()->object(), compiled->object()));
  CHECK(same_bytes(run_both(*loaded.value(), p, 11).got, run_both(*compiled, p, 11).got));

  SECTION("corrupt bytes are refused") {
    std::vector<std::byte> junk(100, std::byte{1});
    CHECK_FALSE(ci::reorder_kernel::load(p, config, junk).has_value());
  }
}

TEST_CASE("reorder objects import nothing outside the allowlist", "[cpu][reorder][symbols]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const std::vector<std::int64_t> dims = {2, 17, 6, 5};
  for (data_type s : {data_type::f32, data_type::bf16, data_type::u8}) {
    for (data_type d : {data_type::f32, data_type::f16, data_type::s8, data_type::s32}) {
      for (auto [st, dtag] : {std::pair{format_tag::nchw, format_tag::nhwc},
                              std::pair{format_tag::nchw, format_tag::nchw}}) {
        auto p = problem(memory_desc(dims, s, st), memory_desc(dims, d, dtag));
        p.scales = ci::reorder_scales::common;
        auto k = make_kernel(p, ci::default_reorder_config(p, isa), isa);
        auto undefined = ci::undefined_symbols(k->object());
        REQUIRE(undefined.has_value());
        for (const auto& name : undefined.value()) {
          INFO(name);
          CHECK(ci::is_allowed_external_symbol(name));
        }
      }
    }
  }
}

TEST_CASE("one reorder kernel executes from many threads at once", "[cpu][reorder][threads]") {
  const std::vector<std::int64_t> dims = {2, 48, 8, 8};
  auto p = problem(memory_desc(dims, data_type::f32, format_tag::nhwc),
                   memory_desc(dims, data_type::f32, format_tag::nChw16c), 2);
  const cpu_isa isa = primcache::effective_isa();
  auto k = make_kernel(p, ci::default_reorder_config(p, isa), isa);
  auto src = random_buffer(p.src, 5);
  std::vector<std::byte> want(p.dst.size_bytes(), std::byte{0});
  cpu_test::naive_reorder(p, {src.data(), want.data(), nullptr});
  constexpr int kThreads = 4;
  std::vector<std::vector<std::byte>> got(kThreads,
                                          std::vector<std::byte>(p.dst.size_bytes(), std::byte{0}));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep)
        k->execute({src.data(), got[t].data(), nullptr}, nullptr, pool());
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& g : got) CHECK(same_bytes(g, want));
}

TEST_CASE(
    "reorder past the last-level cache writes non-temporally, aligned or not, like the "
    "reference",
    "[cpu][reorder][streaming][kernel_sweep]") {
  const cpu_isa isa = primcache::effective_isa();
  // Just past the cache for src and dst together; W odd, so that the
  // transposing walks end in a partial block (4 KiB of src rows) and a
  // partial tile.
  const std::int64_t llc = ci::reorder_streaming_bytes;
  auto past_cache = [&](data_type s, data_type d, std::int64_t c) {
    const auto es = static_cast<std::int64_t>(primcache::size_of(s) + primcache::size_of(d));
    const std::int64_t w = (llc / es / (c * 64) + 1) | 1;
    return std::vector<std::int64_t>{1, c, 64, w};
  };
  struct streaming_case {
    data_type s;
    data_type d;
    format_tag from;
    format_tag to;
    std::int64_t c;
  };
  const streaming_case cases[] = {
      {data_type::f32, data_type::f32, format_tag::nchw, format_tag::nhwc, 32},
      {data_type::f32, data_type::f32, format_tag::nhwc, format_tag::nchw, 48},
      {data_type::f32, data_type::f32, format_tag::nchw, format_tag::nChw16c, 32},
      {data_type::f32, data_type::bf16, format_tag::nchw, format_tag::nchw, 16},
      {data_type::bf16, data_type::f32, format_tag::nchw, format_tag::nchw, 16},
      {data_type::f32, data_type::s8, format_tag::nchw, format_tag::nchw, 16},
  };
  const int nthr = GENERATE(1, 2);
  for (const auto& c : cases) {
    const auto dims = past_cache(c.s, c.d, c.c);
    auto p = problem(memory_desc(dims, c.s, c.from), memory_desc(dims, c.d, c.to), nthr);
    INFO(p.src.to_string() << " -> " << p.dst.to_string() << " nthr " << nthr);
    REQUIRE(ci::reorder_streams_past_cache(p));
    auto k = make_kernel(p, ci::default_reorder_config(p, isa), isa);
    auto src = random_buffer(p.src, 13);
    std::vector<std::byte> want(p.dst.size_bytes(), std::byte{0x5a});
    cpu_test::naive_reorder(p, {src.data(), want.data(), nullptr});
    // dst at a 64-byte boundary (the non-temporal stores), then one element
    // past it (the ordinary ones).
    const std::size_t es = primcache::size_of(c.d);
    std::vector<std::byte> buf(p.dst.size_bytes() + 128 + es, std::byte{0x5a});
    const auto base = reinterpret_cast<std::uintptr_t>(buf.data());
    std::byte* aligned = buf.data() + ((64 - base % 64) % 64);
    for (std::byte* dst : {aligned, aligned + es}) {
      std::fill(buf.begin(), buf.end(), std::byte{0x5a});
      k->execute({src.data(), dst, nullptr}, nullptr, pool());
      CHECK(std::memcmp(dst, want.data(), want.size()) == 0);
      // Nothing written around dst.
      CHECK(std::all_of(buf.data(), dst, [](std::byte b) { return b == std::byte{0x5a}; }));
      CHECK(std::all_of(dst + want.size(), buf.data() + buf.size(),
                        [](std::byte b) { return b == std::byte{0x5a}; }));
    }
  }

  SECTION("tensors that fit in the cache are written as before") {
    auto p = problem(memory_desc({1, 16, 8, 8}, data_type::f32, format_tag::nchw),
                     memory_desc({1, 16, 8, 8}, data_type::f32, format_tag::nhwc), nthr);
    CHECK_FALSE(ci::reorder_streams_past_cache(p));
  }
}

TEST_CASE("reorder refuses invalid problems and configurations", "[cpu][reorder][errors]") {
  const cpu_isa isa = primcache::effective_isa();
  const memory_desc nchw({2, 3, 4, 5}, data_type::f32, format_tag::nchw);
  const memory_desc nhwc({2, 3, 4, 5}, data_type::f32, format_tag::nhwc);
  auto expect_failure = [&](const ci::reorder_problem& p, primcache::status code,
                            const std::string& fragment,
                            ci::reorder_config c = ci::reorder_config{}) {
    auto k = ci::reorder_kernel::create(p, c, isa);
    REQUIRE_FALSE(k.has_value());
    CHECK(k.why().code == code);
    CHECK_THAT(k.why().message, Catch::Contains(fragment));
  };
  SECTION("descriptors without a resolved layout") {
    expect_failure(problem(memory_desc({2, 3, 4, 5}, data_type::f32, format_tag::any), nhwc),
                   primcache::status::invalid_arguments, "no resolved layout");
    expect_failure(problem(nchw, memory_desc()), primcache::status::invalid_arguments,
                   "no resolved layout");
  }
  SECTION("different dims or ndims") {
    expect_failure(problem(nchw, memory_desc({2, 3, 4, 6}, data_type::f32, format_tag::nhwc)),
                   primcache::status::invalid_arguments, "different dims");
    expect_failure(problem(nchw, memory_desc({2, 3, 20}, data_type::f32, format_tag::abc)),
                   primcache::status::invalid_arguments, "different dims");
  }
  SECTION("zero or negative thread counts") {
    expect_failure(problem(nchw, nhwc, 0), primcache::status::invalid_arguments, "nthr");
    expect_failure(problem(nchw, nhwc, -3), primcache::status::invalid_arguments, "nthr");
  }
  SECTION("a scale dimension out of range, an unknown scale kind") {
    auto p = problem(nchw, nhwc);
    p.scales = ci::reorder_scales::per_dim;
    p.scale_dim = 4;
    expect_failure(p, primcache::status::invalid_arguments, "scale dimension");
    p.scale_dim = -1;
    expect_failure(p, primcache::status::invalid_arguments, "scale dimension");
    p.scales = static_cast<ci::reorder_scales>(9);
    expect_failure(p, primcache::status::invalid_arguments, "scale kind");
  }
  SECTION("blocks of 8 and 16 on the same dims nest, so they are supported") {
    // Every tag blocks by 8 or 16, so blocks that do not nest (a case
    // plan_walk refuses as unimplemented) cannot be described today.
    auto b = memory_desc({48, 40, 1, 1}, data_type::f32, format_tag::OIhw8i8o);
    auto c = memory_desc({48, 40, 1, 1}, data_type::f32, format_tag::OIhw16i16o);
    check_matches_reference(problem(b, c), isa);
  }
  SECTION("overlapping dst strides") {
    memory_desc overlap({2, 2}, data_type::f32, std::vector<std::int64_t>{1, 1});
    expect_failure(problem(memory_desc({2, 2}, data_type::f32, format_tag::ab), overlap),
                   primcache::status::invalid_arguments, "overlapping");
  }
  SECTION("bad configurations") {
    auto p = problem(nchw, nhwc);
    ci::reorder_config c;
    c.tile = 5;
    expect_failure(p, primcache::status::invalid_arguments, "tile", c);
    c = {};
    c.vector_lanes = 12;
    expect_failure(p, primcache::status::invalid_arguments, "vector_lanes", c);
    c = {};
    c.vector_lanes = 128;
    expect_failure(p, primcache::status::invalid_arguments, "vector_lanes", c);
    c = {};
    c.unroll = 0;
    expect_failure(p, primcache::status::invalid_arguments, "unroll", c);
    c = {};
    c.chunk = -1;
    expect_failure(p, primcache::status::invalid_arguments, "chunk", c);
    c = {};
    c.block_i = c.tile + 4;
    expect_failure(p, primcache::status::invalid_arguments, "block_i", c);
    c = {};
    c.block_j = -c.tile;
    expect_failure(p, primcache::status::invalid_arguments, "block_j", c);
    primcache::backend::kernel_config f = ci::to_fields(ci::reorder_config{});
    primcache::backend::kernel_config bad;
    for (const auto& field : f.fields()) {
      bad.add(field.name, field.name == "block_j" ? (std::int64_t{1} << 41) : field.value);
    }
    auto r = ci::reorder_config_from_fields(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK_THAT(r.why().message, Catch::Contains("block_j"));
  }
  SECTION("sizes that overflow never reach a kernel: the descriptor refuses them") {
    auto md = memory_desc::make({std::int64_t{1} << 40, std::int64_t{1} << 40}, data_type::f32,
                                format_tag::ab);
    CHECK_FALSE(md.has_value());
  }
}

TEST_CASE(
    "the specialized walk moves tiles that straddle padding as clipped tiles, not element by "
    "element",
    "[cpu][reorder][padded]") {
  // nchw -> nChw8c/nChw16c with channels not a multiple of the block: the J
  // loop (the channels of a block) runs into the padding. Such tiles went
  // element by element, a test and a scalar move each (256 per tile of 16,
  // which the loop vectorizer made into scatters: at avx512_core the
  // kernel for 3 channels of 224x224 ran 5x slower than at avx2); they are
  // now clipped tiles, loads of the real src rows and vector stores alone.
  for (int tile : {8, 16}) {
    for (std::int64_t c : {3, 17}) {
      for (format_tag blocked : {format_tag::nChw8c, format_tag::nChw16c}) {
        for (data_type dt : {data_type::f32, data_type::bf16}) {
          // 36 spatial elements: full tiles and the edge of the I loop.
          const std::vector<std::int64_t> dims = {1, c, 4, 9};
          ci::reorder_problem p = problem(memory_desc(dims, data_type::f32, format_tag::nchw),
                                          memory_desc(dims, dt, blocked));
          p.scales = dt == data_type::f32 ? ci::reorder_scales::none : ci::reorder_scales::per_dim;
          p.scale_dim = 1;
          const store_counts stores = transposing_walk_stores(p, tile);
          INFO(p.src.to_string() << " -> " << p.dst.to_string() << ", tiles of " << tile);
          CHECK(stores.scalar == 0);
          CHECK(stores.vector > 0);
        }
      }
    }
  }
}

TEST_CASE("a transposing walk stores dst rows that follow one another as whole vectors",
          "[cpu][reorder]") {
  // nchw -> nChw8c at tiles of 16: a tile's 16 rows of 8 channels are 128
  // consecutive dst elements, converted and stored as 8 vectors of 16
  // lanes, two rows each, instead of 16 vectors of 8 (the conversion to
  // bf16 ran on half-empty vectors). 36 pixels: two full tiles of I and an
  // edge of 4; a scale along h or w keeps them apart, and the I loop is
  // then the 12 columns (an even count: rows go two to a vector there too).
  const std::vector<std::int64_t> dims = {2, 16, 3, 12};
  struct scaling {
    ci::reorder_scales scales;
    int dim;
  };
  for (data_type dt : {data_type::f32, data_type::bf16, data_type::s8}) {
    for (scaling sc :
         {scaling{ci::reorder_scales::none, 0}, scaling{ci::reorder_scales::common, 0},
          scaling{ci::reorder_scales::per_dim, 0}, scaling{ci::reorder_scales::per_dim, 1},
          scaling{ci::reorder_scales::per_dim, 2}, scaling{ci::reorder_scales::per_dim, 3}}) {
      ci::reorder_problem p = problem(memory_desc(dims, data_type::f32, format_tag::nchw),
                                      memory_desc(dims, dt, format_tag::nChw8c));
      p.scales = sc.scales;
      p.scale_dim = sc.dim;
      INFO(p.dst.to_string() << ", scales " << static_cast<int>(sc.scales) << " along " << sc.dim);
      const store_counts stores = transposing_walk_stores(p, 16);
      CHECK(stores.scalar == 0);
      CHECK(stores.vector > 0);
      for (unsigned lanes : stores.vector_lanes) CHECK(lanes == 16);
      for (cpu_isa isa : test_isas()) {
        ci::reorder_config c = ci::default_reorder_config(p, isa);
        c.tile = 16;
        c.block_i = 0;
        c.block_j = 0;
        check_matches_reference(p, isa, &c);
      }
    }
  }
}

TEST_CASE("a short block that one layout continues is walked in runs of one joined loop",
          "[cpu][reorder][padded]") {
  // nChw8c to nChw16c: a block of 8 channels (unit strides in both), then
  // the other 8 of dst's block, which dst continues and src keeps 8 x H x W
  // further. Each work item was one vector of 8 (the odometer's step cost
  // as much as the copy); the two loops are now one of 16 iterations read
  // in runs of 8: a vector spans both runs. nChw16c to nChw8c the same,
  // written in runs.
  const std::vector<std::int64_t> dims = {2, 20, 5, 7};
  auto joined =
      ci::reorder_walk_plan(problem(memory_desc(dims, data_type::f32, format_tag::nChw8c),
                                    memory_desc(dims, data_type::f32, format_tag::nChw16c)));
  REQUIRE(joined);
  const ci::walk_loop& j = joined.value().loops.back();
  CHECK(j.extent == 16);
  CHECK(j.src_run == 8);
  CHECK(j.src_run_stride == 8 * 5 * 7);
  CHECK(j.src_stride == 1);
  CHECK(j.dst_stride == 1);
  CHECK(j.dst_run == 0);
  // The other way round: src continues what dst does not; the continuing
  // loop (after the pixels by dst stride) moves in, dst is written in runs.
  auto other =
      ci::reorder_walk_plan(problem(memory_desc(dims, data_type::f32, format_tag::nChw16c),
                                    memory_desc(dims, data_type::f32, format_tag::nChw8c)));
  REQUIRE(other);
  const ci::walk_loop& o = other.value().loops.back();
  CHECK(o.extent == 16);
  CHECK(o.src_run == 0);
  CHECK(o.dst_run == 8);
  CHECK(o.dst_run_stride == 8 * 5 * 7);
  CHECK(other.value().work_items(16) == 2 * 2 * 5 * 7);
  // Both continue it (nChw8c to nChw8c): plan_walk merged them; a batched
  // padded block, not a join.
  auto same =
      ci::reorder_walk_plan(problem(memory_desc(dims, data_type::f32, format_tag::nChw8c),
                                    memory_desc(dims, data_type::bf16, format_tag::nChw8c)));
  REQUIRE(same);
  CHECK(same.value().loops.back().src_run == 0);
  CHECK(same.value().loops.back().dst_run == 0);

  // Values: exact and padded channels (a dst block half or wholly past the
  // real channels, src blocks that do not exist there), conversions, each
  // kind of scale, 1 and 2 threads, at every ISA.
  for (std::int64_t c : {3, 16, 19, 20, 40}) {
    for (data_type dt : {data_type::f32, data_type::bf16, data_type::s8}) {
      for (ci::reorder_scales sc :
           {ci::reorder_scales::none, ci::reorder_scales::common, ci::reorder_scales::per_dim}) {
        for (int nthr : {1, 2}) {
          const std::vector<std::int64_t> d = {2, c, 3, 5};
          for (auto [from, to] : {std::pair{format_tag::nChw8c, format_tag::nChw16c},
                                  std::pair{format_tag::nChw16c, format_tag::nChw8c}}) {
            auto p = problem(memory_desc(d, data_type::f32, from), memory_desc(d, dt, to), nthr);
            p.scales = sc;
            p.scale_dim = 1;
            for (cpu_isa isa : test_isas()) check_matches_reference(p, isa);
          }
        }
      }
    }
  }
}

TEST_CASE("a walk over a padded block continued by the next loop out is one loop of blocks",
          "[cpu][reorder][padded]") {
  const std::vector<std::int64_t> dims = {2, 20, 3, 5};
  SECTION("nChw8c to nChw8c: the block's 8 channels, then the pixels") {
    for (format_tag tag : {format_tag::nChw8c, format_tag::nChw16c}) {
      const std::int64_t block = tag == format_tag::nChw8c ? 8 : 16;
      auto plan = ci::plan_walk(memory_desc(dims, data_type::f32, tag),
                                memory_desc(dims, data_type::bf16, tag), 0);
      REQUIRE(plan);
      const ci::walk_plan batched = ci::batch_padded_block(plan.value(), 0);
      REQUIRE(batched.loops.size() == plan.value().loops.size() - 1);
      const ci::walk_loop& l = batched.loops.back();
      CHECK(l.period == block);
      CHECK(l.dim == 1);
      CHECK(l.extent == block * 15);
      CHECK(l.src_stride == 1);
      CHECK(l.dst_stride == 1);
    }
  }
  SECTION("left as planned") {
    struct kept {
      const char* why;
      format_tag src;
      format_tag dst;
      std::vector<std::int64_t> dims;
      unsigned keep;
    };
    for (const kept& k : {
             kept{"the padded dim is kept (a per-channel operand or scale)", format_tag::nChw8c,
                  format_tag::nChw8c, dims, 2u},
             kept{"no padding: the blocks merge with the pixels already",
                  format_tag::nChw8c,
                  format_tag::nChw8c,
                  {2, 24, 3, 5},
                  0u},
             kept{"the next loop out is not a continuation in src", format_tag::nChw16c,
                  format_tag::nChw8c, dims, 0u},
             kept{"a transposing walk", format_tag::nchw, format_tag::nChw8c, dims, 0u},
         }) {
      INFO(k.why);
      auto plan = ci::plan_walk(memory_desc(k.dims, data_type::f32, k.src),
                                memory_desc(k.dims, data_type::f32, k.dst), k.keep);
      REQUIRE(plan);
      const ci::walk_plan batched = ci::batch_padded_block(plan.value(), k.keep);
      REQUIRE(batched.loops.size() == plan.value().loops.size());
      for (const ci::walk_loop& l : batched.loops) CHECK(l.period == 0);
    }
  }
}

TEST_CASE("a reorder between padded blocked layouts walks whole vectors and matches the reference",
          "[cpu][reorder][padded]") {
  // Before, every element of a padded block (a third of nChw8c with 20
  // channels) went through a test and a scalar move: at avx512_core the
  // specialized kernel ran 2-3x slower than the generic walk. Same layouts
  // take the block stream (batch_padded_block); per-channel scales, which
  // keep the channels apart, and blocks of different sizes, whose next
  // loop out is no continuation, take vectors clipped to their real lanes.
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const int nthr = GENERATE(1, 2);
  struct conversion {
    data_type src;
    data_type dst;
    ci::reorder_scales scales;
  };
  const std::vector<conversion> conversions = {
      {data_type::f32, data_type::f32, ci::reorder_scales::none},
      {data_type::f32, data_type::bf16, ci::reorder_scales::common},
      {data_type::f32, data_type::s8, ci::reorder_scales::per_dim},
      {data_type::u8, data_type::u8, ci::reorder_scales::none}};
  const std::vector<std::pair<format_tag, format_tag>> layouts = {
      {format_tag::nChw8c, format_tag::nChw8c},
      {format_tag::nChw16c, format_tag::nChw16c},
      {format_tag::nChw8c, format_tag::nChw16c},
      {format_tag::nChw16c, format_tag::nChw8c}};
  for (const auto& [src_tag, dst_tag] : layouts) {
    for (std::int64_t c : {3, 20}) {
      // 3x5 pixels: blocks straddle vectors, and the loop ends in a part
      // of a vector.
      const std::vector<std::int64_t> dims = {2, c, 3, 5};
      for (const conversion& cv : conversions) {
        ci::reorder_problem p =
            problem(memory_desc(dims, cv.src, src_tag), memory_desc(dims, cv.dst, dst_tag), nthr);
        p.scales = cv.scales;
        p.scale_dim = 1;
        INFO(p.src.to_string() << " -> " << p.dst.to_string());
        auto plan = ci::reorder_walk_plan(p);
        REQUIRE(plan);
        REQUIRE(plan.value().inner == ci::walk_plan::inner_kind::stream);
        const bool batched = src_tag == dst_tag && cv.scales != ci::reorder_scales::per_dim;
        CHECK((plan.value().loops.back().period > 0) == batched);
        ci::reorder_config def = ci::default_reorder_config(p, isa);
        check_matches_reference(p, isa, &def);
        // Vectors narrower than a block, several blocks a vector, and
        // chunks that end inside a block's run (split over the threads).
        for (int lanes : nthr > 1 ? std::vector<int>{4, 32} : std::vector<int>{}) {
          ci::reorder_config cfg = def;
          cfg.vector_lanes = lanes;
          cfg.unroll = 1;
          cfg.chunk = 12;
          check_matches_reference(p, isa, &cfg);
        }
        // Its IR: no scalar store into dst.
        ci::walk_codegen g;
        g.src_dt = cv.src;
        g.dst_dt = cv.dst;
        g.scales = cv.scales;
        g.scale_dim = 1;
        g.vector_lanes = def.vector_lanes;
        g.unroll = def.unroll;
        g.chunk = ci::walk_chunk(plan.value(), 0, def.vector_lanes);
        CHECK(walk_stores(plan.value(), g).scalar == 0);
      }
    }
  }
}
