// Kernel configurations and blobs of the CPU primitives: every kernel's
// configuration as backend fields and JSON, its enumerated candidate space,
// the config source choosing what a descriptor builds, and primitives made
// from blobs without compiling.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "jit/compiler.hpp"
#include "kernels/conv_config.hpp"
#include "kernels/eltwise_config.hpp"
#include "kernels/matmul_config.hpp"
#include "kernels/post_ops.hpp"
#include "kernels/reorder_config.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/primcache.h"
#include "primcache/runtime/runtime.hpp"

using namespace primcache;
using tag = format_tag;
using backend::kernel_config;

namespace {

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

void fill(memory& m, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  const auto& md = m.get_desc();
  auto* p = static_cast<float*>(m.get_data_handle());
  for (std::size_t i = 0; i < md.size_bytes() / sizeof(float); ++i) p[i] = dist(rng);
}

memory make(memory::dims dims, tag t, unsigned seed) {
  memory m(memory::desc(dims, data_type::f32, t), cpu());
  fill(m, seed);
  return m;
}

// One primitive of each kind: how to make its descriptor (again, after a
// setting changed) and its arguments.
struct a_case {
  std::string name;
  std::function<primitive_desc()> make_pd;
  std::unordered_map<int, memory> args;
  int dst;
};

a_case matmul_case() {
  memory src = make({2, 19, 37}, tag::abc, 1), wei = make({2, 37, 45}, tag::abc, 2);
  memory bias = make({1, 1, 45}, tag::abc, 3), addend = make({1, 1, 45}, tag::abc, 4);
  memory dst(memory::desc({2, 19, 45}, data_type::f32, tag::abc), cpu());
  auto make_pd = [=]() -> primitive_desc {
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_gelu_tanh, 0.f, 0.f);
    ops.append_binary(algorithm::binary_add, addend.get_desc());
    primitive_attr attr;
    attr.set_post_ops(ops);
    return matmul::primitive_desc(
        matmul::desc(src.get_desc(), wei.get_desc(), bias.get_desc(), dst.get_desc()), attr, cpu());
  };
  return {"matmul",
          make_pd,
          {{PRIMCACHE_ARG_SRC, src},
           {PRIMCACHE_ARG_WEIGHTS, wei},
           {PRIMCACHE_ARG_BIAS, bias},
           {PRIMCACHE_ARG_DST, dst},
           {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1, addend}},
          PRIMCACHE_ARG_DST};
}

a_case conv_case() {
  memory src = make({2, 8, 13, 11}, tag::nchw, 5), wei = make({16, 8, 3, 3}, tag::oihw, 6);
  memory bias = make({16}, tag::a, 7);
  memory dst(memory::desc({2, 16, 7, 6}, data_type::f32, tag::nchw), cpu());
  auto make_pd = [=]() -> primitive_desc {
    return convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                  src.get_desc(), wei.get_desc(), bias.get_desc(), dst.get_desc(),
                                  {2, 2}, {1, 1}, {1, 1}),
        cpu());
  };
  return {"convolution",
          make_pd,
          {{PRIMCACHE_ARG_SRC, src},
           {PRIMCACHE_ARG_WEIGHTS, wei},
           {PRIMCACHE_ARG_BIAS, bias},
           {PRIMCACHE_ARG_DST, dst}},
          PRIMCACHE_ARG_DST};
}

a_case eltwise_case(tag dst_tag = tag::nchw) {
  memory src = make({2, 16, 5, 7}, tag::nchw, 8);
  memory dst(memory::desc({2, 16, 5, 7}, data_type::f32, dst_tag), cpu());
  auto make_pd = [=]() -> primitive_desc {
    return eltwise_forward::primitive_desc(
        eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_gelu_tanh,
                              src.get_desc(), dst.get_desc()),
        cpu());
  };
  return {dst_tag == tag::nchw ? "eltwise" : "eltwise via reorder",
          make_pd,
          {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}},
          PRIMCACHE_ARG_DST};
}

a_case reorder_case() {
  memory src = make({2, 16, 5, 7}, tag::nchw, 9);
  memory dst(memory::desc({2, 16, 5, 7}, data_type::f32, tag::nChw8c), cpu());
  auto make_pd = [=]() -> primitive_desc {
    return reorder::primitive_desc(cpu(), src.get_desc(), cpu(), dst.get_desc());
  };
  return {
      "reorder", make_pd, {{PRIMCACHE_ARG_FROM, src}, {PRIMCACHE_ARG_TO, dst}}, PRIMCACHE_ARG_TO};
}

std::vector<a_case> all_cases() {
  return {matmul_case(), conv_case(), eltwise_case(), reorder_case()};
}

// Runs `p` on the case's arguments (dst cleared first); dst's bytes.
std::vector<std::uint8_t> run(const primitive& p, const a_case& c) {
  const memory& dst = c.args.at(c.dst);
  std::memset(dst.get_data_handle(), 0, dst.get_desc().size_bytes());
  stream s(cpu());
  p.execute(s, c.args);
  s.wait();
  const auto* b = static_cast<const std::uint8_t*>(dst.get_data_handle());
  return {b, b + dst.get_desc().size_bytes()};
}

// The reference implementation's result (the JIT declines below avx2).
std::vector<std::uint8_t> reference(const a_case& c) {
  set_max_cpu_isa(cpu_isa::x86_64);
  const primitive_desc pd = c.make_pd();
  clear_max_cpu_isa();
  REQUIRE(pd.impl_info_str().rfind("ref:", 0) == 0);
  return run(primitive(pd), c);
}

void check_close(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want) {
  REQUIRE(got.size() == want.size());
  std::vector<float> g(got.size() / 4), w(want.size() / 4);
  std::memcpy(g.data(), got.data(), got.size());
  std::memcpy(w.data(), want.data(), want.size());
  int bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (!(std::fabs(g[i] - w[i]) <= 1e-4f * (1.f + std::fabs(w[i])))) ++bad;
  }
  CHECK(bad == 0);
}

bool has_jit() {
  return detected_isa() >= cpu_isa::avx2;
}

// Installs a config source for one scope; removes it after.
class source_guard {
 public:
  explicit source_guard(backend::config_source s) { backend::set_config_source(std::move(s)); }
  ~source_guard() { backend::set_config_source({}); }
  source_guard(const source_guard&) = delete;
  source_guard& operator=(const source_guard&) = delete;
};

// Empties the primitive cache (and the descriptor cache with it).
void empty_primitive_cache() {
  const int capacity = get_primitive_cache_capacity();
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(capacity);
}

}  // namespace

TEST_CASE("kernel configurations are backend fields that survive JSON", "[cpu][config][json]") {
  if (!has_jit()) return;
  for (const a_case& c : all_cases()) {
    INFO(c.name);
    const auto& pd = backend::impl_of(c.make_pd());
    REQUIRE(pd.config().has_value());
    CHECK(pd.default_config() == pd.config());
    const auto space = pd.config_candidates();
    REQUIRE(space.size() >= 8);
    std::vector<kernel_config> configs = {*pd.config()};
    for (std::uint64_t i = 0; i < space.size(); i += 1 + space.size() / 64) {
      configs.push_back(space.at(i));
    }
    configs.push_back(space.at(space.size() - 1));
    for (const kernel_config& cfg : configs) {
      INFO(cfg.to_json());
      auto back = kernel_config::from_json(cfg.to_json());
      REQUIRE(back.has_value());
      CHECK(back.value() == cfg);
      CHECK(pd.validate_config(back.value()).has_value());
    }
  }
}

TEST_CASE("the typed configurations convert to fields and back", "[cpu][config][json]") {
  namespace ci = cpu_internal;
  const auto mm = ci::matmul_config{4, 16, 64, 8, 32, 2, false, true, 1, 2};
  CHECK(ci::to_fields(mm).to_json() ==
        R"({"mr":4,"nr":16,"kc":64,"mc":8,"nc":32,"k_unroll":2,"pack_b":0,"n_inner":1,)"
        R"("thr_m":1,"thr_n":2})");
  CHECK(ci::matmul_config_from_fields(ci::to_fields(mm)).value() == mm);
  const auto conv = ci::conv_config{7, 2, 4, ci::conv_loop_order::spatial_outer, 64, 3, 2};
  CHECK(ci::to_fields(conv).to_json() ==
        R"({"ow_block":7,"oc_blocks":2,"ic_unroll":4,"order":1,"ic_block":64,"oc_panel":3,)"
        R"("thr_oc":2})");
  CHECK(ci::conv_config_from_fields(ci::to_fields(conv)).value() == conv);
  const auto elt = ci::eltwise_config{8, 3, 128};
  CHECK(ci::eltwise_config_from_fields(ci::to_fields(elt)).value() == elt);
  const auto re = ci::reorder_config{8, 16, 2, 64, false};
  CHECK(ci::reorder_config_from_fields(ci::to_fields(re)).value() == re);

  SECTION("a missing, unknown or misplaced field is refused, naming it") {
    auto f = kernel_config::from_json(R"({"tile":8,"vector_lanes":16,"unroll":2,"chunk":0})");
    auto r = ci::reorder_config_from_fields(f.value());
    REQUIRE_FALSE(r.has_value());
    CHECK(r.why().code == status::invalid_arguments);
    CHECK_THAT(r.why().message, Catch::Contains("no field 'use_memcpy'"));
    f = kernel_config::from_json(R"({"vector_lanes":8,"unroll":1,"chunk":0,"tile":4})");
    r = ci::eltwise_config_from_fields(f.value()).has_value()
            ? result<ci::reorder_config>(ci::reorder_config{})
            : result<ci::reorder_config>(ci::eltwise_config_from_fields(f.value()).why());
    REQUIRE_FALSE(r.has_value());
    CHECK_THAT(r.why().message, Catch::Contains("unknown field 'tile'"));
    f = kernel_config::from_json(
        R"({"oc_blocks":2,"ow_block":7,"ic_unroll":1,"order":0,"ic_block":0,"oc_panel":0,)"
        R"("thr_oc":0})");
    auto c = ci::conv_config_from_fields(f.value());
    REQUIRE_FALSE(c.has_value());
    CHECK_THAT(c.why().message, Catch::Contains("out of order"));
    // The four fields before K panels, N panels and thread partitions.
    f = kernel_config::from_json(R"({"ow_block":7,"oc_blocks":2,"ic_unroll":1,"order":0})");
    c = ci::conv_config_from_fields(f.value());
    REQUIRE_FALSE(c.has_value());
    CHECK_THAT(c.why().message, Catch::Contains("no field 'ic_block'"));
  }
  SECTION("values out of range are refused, naming the field") {
    auto f = ci::to_fields(ci::reorder_config{8, 16, 2, 64, true});
    kernel_config bad;
    for (const auto& field : f.fields()) {
      bad.add(field.name, field.name == "use_memcpy" ? 2 : field.value);
    }
    auto r = ci::reorder_config_from_fields(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK_THAT(r.why().message, Catch::Contains("use_memcpy = 2"));
    auto conv_with = [](const char* name, std::int64_t value) {
      kernel_config conv;
      const kernel_config defaults = ci::to_fields(ci::conv_config{14, 2, 4});
      for (const auto& field : defaults.fields()) {
        conv.add(field.name, field.name == name ? value : field.value);
      }
      return ci::conv_config_from_fields(conv);
    };
    for (auto [name, value, words] :
         {std::tuple<const char*, std::int64_t, const char*>{"ic_unroll", 3, "ic_unroll"},
          {"ic_block", -1, "ic_block = -1"},
          {"ic_block", 6, "not a multiple of ic_unroll"},
          {"oc_panel", -2, "oc_panel = -2"},
          {"thr_oc", 1 << 17, "thr_oc = 131072"}}) {
      INFO(name << " = " << value);
      auto c = conv_with(name, value);
      REQUIRE_FALSE(c.has_value());
      CHECK(c.why().code == status::invalid_arguments);
      CHECK_THAT(c.why().message, Catch::Contains(words));
    }
  }
}

TEST_CASE("the eltwise default runs long functions as one 64-lane vector on AVX-512",
          "[cpu][config]") {
  namespace ci = cpu_internal;
  using alg = ci::eltwise_alg;
  ci::eltwise_problem p;
  p.src = p.dst = memory_desc({1, 64, 7, 7}, data_type::f32, tag::nChw16c);
  const std::vector<std::pair<alg, bool>> algs = {
      {alg::gelu_erf, true}, {alg::gelu_tanh, true}, {alg::tanh, true},    {alg::sigmoid, true},
      {alg::exp, true},      {alg::relu, false},     {alg::linear, false}, {alg::clip, false}};
  for (const auto& [a, is_long] : algs) {
    INFO("alg " << static_cast<int>(a));
    CHECK(ci::is_long_function(a) == is_long);
    // As the operation, and as a post-op after a relu.
    p.op = ci::eltwise_op{a, 0.f, 6.f};
    p.post_ops.clear();
    ci::post_op after_relu;
    after_relu.eltwise = ci::eltwise_op{a, 0.f, 6.f};
    for (bool as_post_op : {false, true}) {
      if (as_post_op) {
        p.op = ci::eltwise_op{};
        p.post_ops = {after_relu};
      }
      const ci::eltwise_config wide = ci::default_eltwise_config(p, cpu_isa::avx512_core);
      CHECK(wide.vector_lanes == (is_long ? 64 : 16));
      CHECK(wide.unroll == (is_long ? 1 : 2));
      // Sixteen registers hold no four-vector chains: AVX2 keeps two
      // unrolled vectors of 8.
      const ci::eltwise_config narrow = ci::default_eltwise_config(p, cpu_isa::avx2);
      CHECK(narrow.vector_lanes == 8);
      CHECK(narrow.unroll == 2);
    }
  }
}

TEST_CASE("a descriptor refuses configurations its kernel cannot build", "[cpu][config]") {
  if (!has_jit()) return;
  const a_case c = matmul_case();
  const auto& pd = backend::impl_of(c.make_pd());
  const int lanes = effective_isa() >= cpu_isa::avx512_core ? 16 : 8;
  SECTION("a register tile beyond the ISA's registers") {
    auto mm = cpu_internal::matmul_config_from_fields(*pd.config()).value();
    mm.mr = 30;
    mm.nr = 4 * lanes;
    mm.mc = 30;
    auto ok = pd.validate_config(cpu_internal::to_fields(mm));
    REQUIRE_FALSE(ok.has_value());
    CHECK_THAT(ok.why().message, Catch::Contains("vector registers"));
  }
  SECTION("a thread grid larger than the thread count") {
    auto mm = cpu_internal::matmul_config_from_fields(*pd.config()).value();
    mm.thr_m = pd.nthr() + 1;
    mm.thr_n = 1;
    CHECK_FALSE(pd.validate_config(cpu_internal::to_fields(mm)).has_value());
  }
  SECTION("another kernel's configuration") {
    auto ok = pd.validate_config(cpu_internal::to_fields(cpu_internal::reorder_config{}));
    REQUIRE_FALSE(ok.has_value());
    CHECK(ok.why().code == status::invalid_arguments);
  }
  SECTION("a convolution tile beyond the accumulator budget") {
    // A pointwise convolution over rows of 80 pixels.
    const convolution_forward::primitive_desc wide(
        convolution_forward::desc(
            prop_kind::forward_inference, algorithm::convolution_direct,
            memory::desc({1, 16, 4, 20}, data_type::f32, tag::nchw),
            memory::desc({16, 16, 1, 1}, data_type::f32, tag::oihw), memory::desc(),
            memory::desc({1, 16, 4, 20}, data_type::f32, tag::nchw), {1, 1}, {0, 0}, {0, 0}),
        cpu());
    const auto& conv = backend::impl_of(wide);
    const cpu_internal::conv_config big{7, 1, 1, cpu_internal::conv_loop_order::oc_outer};
    // 7 x 1 accumulators fit at avx512_core (28), not at avx2 (6).
    auto ok = conv.validate_config(cpu_internal::to_fields(big));
    CHECK(ok.has_value() == (effective_isa() >= cpu_isa::avx512_core));
    if (!ok) CHECK_THAT(ok.why().message, Catch::Contains("accumulators"));
  }
  SECTION("a convolution's thread partition that does not fit the threads or the chunks") {
    // 32 output channels: two chunks of one block, or one of two.
    const convolution_forward::primitive_desc conv_pd(
        convolution_forward::desc(
            prop_kind::forward_inference, algorithm::convolution_direct,
            memory::desc({1, 16, 6, 6}, data_type::f32, tag::nChw16c),
            memory::desc({32, 16, 3, 3}, data_type::f32, tag::oihw), memory::desc(),
            memory::desc({1, 32, 6, 6}, data_type::f32, tag::nChw16c), {1, 1}, {1, 1}, {1, 1}),
        cpu());
    const auto& conv = backend::impl_of(conv_pd);
    const int nthr = conv.nthr();
    auto c = cpu_internal::conv_config_from_fields(*conv.config()).value();
    c.oc_blocks = 1;
    c.thr_oc = nthr + 1;  // never divides the threads
    auto ok = conv.validate_config(cpu_internal::to_fields(c));
    if (nthr > 1) {
      REQUIRE_FALSE(ok.has_value());
      CHECK_THAT(ok.why().message, Catch::Contains("does not divide"));
    } else {
      CHECK(ok.has_value());  // one thread: no partition, the field says nothing
    }
    if (nthr > 2 && nthr % 4 == 0) {
      c.thr_oc = 4;  // two chunks for four parts
      ok = conv.validate_config(cpu_internal::to_fields(c));
      REQUIRE_FALSE(ok.has_value());
      CHECK_THAT(ok.why().message, Catch::Contains("exceeds the 2 output-channel chunks"));
    }
    c.thr_oc = 0;
    c.ic_unroll = 4;
    c.ic_block = 6;
    ok = conv.validate_config(cpu_internal::to_fields(c));
    REQUIRE_FALSE(ok.has_value());
    CHECK_THAT(ok.why().message, Catch::Contains("not a multiple of ic_unroll"));
  }
  SECTION("the reference has no configurations") {
    set_max_cpu_isa(cpu_isa::x86_64);
    const primitive_desc ref = c.make_pd();
    clear_max_cpu_isa();
    const auto& r = backend::impl_of(ref);
    CHECK_FALSE(r.config().has_value());
    CHECK(r.config_candidates().empty());
    CHECK(r.problem_key() == r.cache_key());
    CHECK(r.validate_config(*pd.config()).why().code == status::unimplemented);
  }
}

TEST_CASE("every enumerated candidate validates", "[cpu][config][space]") {
  if (!has_jit()) return;
  for (const a_case& c : all_cases()) {
    INFO(c.name);
    const auto& pd = backend::impl_of(c.make_pd());
    const auto space = pd.config_candidates();
    INFO("space of " << space.size());
    std::uint64_t invalid = 0;
    std::string first;
    for (std::uint64_t i = 0; i < space.size(); ++i) {
      const kernel_config cfg = space.at(i);
      if (auto ok = pd.validate_config(cfg); !ok && invalid++ == 0) {
        first = cfg.to_json() + ": " + ok.why().message;
      }
    }
    INFO(first);
    CHECK(invalid == 0);
  }
  SECTION("the matmul space is the product of its parameters") {
    // Tiles x cache blocks x kc x unroll x packing x loop order x grids: far
    // more than a handful of variants, enumerated without building them.
    const auto& pd = backend::impl_of(matmul_case().make_pd());
    CHECK(pd.config_candidates().size() >= 10000);
  }
}

TEST_CASE("sampled candidates compile and compute what the reference computes",
          "[cpu][config][space]") {
  if (!has_jit()) return;
  for (const a_case& c : all_cases()) {
    INFO(c.name);
    const auto want = reference(c);
    const auto space = backend::impl_of(c.make_pd()).config_candidates();
    for (std::uint64_t k : {std::uint64_t{0}, space.size() / 2, space.size() - 1}) {
      const kernel_config cfg = space.at(k);
      INFO(cfg.to_json());
      source_guard source([&](const backend::primitive_desc_impl&) { return cfg; });
      const primitive_desc pd = c.make_pd();
      REQUIRE(backend::impl_of(pd).config() == cfg);
      check_close(run(primitive(pd), c), want);
    }
  }
}

TEST_CASE("the config source chooses the configuration a descriptor builds",
          "[cpu][config][source]") {
  if (!has_jit()) return;
  const a_case c = matmul_case();
  const primitive_desc heuristic = c.make_pd();
  const auto& h = backend::impl_of(heuristic);
  const auto space = h.config_candidates();
  const kernel_config a = space.at(1), b = space.at(space.size() - 2);
  REQUIRE_FALSE(a == b);

  SECTION("A then B: two keys, one problem key, and B after the change") {
    kernel_config current = a;
    int asked = 0;
    source_guard source([&](const backend::primitive_desc_impl& pd) {
      ++asked;
      CHECK(pd.problem_key() == h.problem_key());  // what a tune table is indexed by
      return pd.kind() == backend::primitive_kind::matmul ? std::optional(current) : std::nullopt;
    });
    const primitive_desc pa = c.make_pd();
    CHECK(backend::impl_of(pa).config() == a);
    backend::set_config_source([&](const backend::primitive_desc_impl&) { return b; });
    const primitive_desc pb = c.make_pd();
    CHECK(backend::impl_of(pb).config() == b);
    CHECK(asked == 1);
    CHECK_FALSE(backend::impl_of(pa).cache_key() == backend::impl_of(pb).cache_key());
    CHECK(backend::impl_of(pa).problem_key() == backend::impl_of(pb).problem_key());
    CHECK_FALSE(backend::impl_of(pa).cache_key() == h.cache_key());
    // Each configuration is its own primitive, and computes the same.
    const auto want = reference(c);
    check_close(run(primitive(pa), c), want);
    check_close(run(primitive(pb), c), want);
    CHECK(primitive_cache_contains(pa));
    CHECK(primitive_cache_contains(pb));
  }
  SECTION("an invalid configuration from the source is ignored: the heuristic's is used") {
    kernel_config bad;
    bad.add("mr", 0);
    source_guard source([&](const backend::primitive_desc_impl&) { return bad; });
    const primitive_desc pd = c.make_pd();
    CHECK(backend::impl_of(pd).config() == h.config());
    CHECK(backend::impl_of(pd).cache_key() == h.cache_key());
  }
  SECTION("a source that throws is ignored too") {
    source_guard source([&](const backend::primitive_desc_impl&) -> std::optional<kernel_config> {
      throw error(status::runtime_error, "tune table unreadable");
    });
    CHECK(backend::impl_of(c.make_pd()).config() == h.config());
  }
  SECTION("a source with nothing for this problem leaves the heuristic") {
    source_guard source(
        [&](const backend::primitive_desc_impl&) -> std::optional<kernel_config> { return {}; });
    CHECK(backend::impl_of(c.make_pd()).cache_key() == h.cache_key());
  }
  SECTION("create_impl_with a candidate builds it outside the cache") {
    auto impl = h.create_impl_with(cpu(), b);
    CHECK(impl->config() == b);
    CHECK_THROWS_AS(h.create_impl_with(cpu(), kernel_config()), error);
  }
}

TEST_CASE("a primitive from its blob computes the same bits and compiles nothing", "[cpu][blob]") {
  std::vector<a_case> cases = all_cases();
  cases.push_back(eltwise_case(tag::nhwc));  // nested primitives' blobs
  for (const a_case& c : cases) {
    INFO(c.name);
    const primitive_desc pd = c.make_pd();
    const primitive compiled(pd);
    const auto want = run(compiled, c);
    const std::vector<std::uint8_t> blob = compiled.cache_blob();
    const std::vector<std::uint8_t> id = pd.cache_blob_id();
    empty_primitive_cache();
    REQUIRE_FALSE(primitive_cache_contains(pd));

    const std::uint64_t compiled_before = cpu_internal::objects_compiled();
    const primitive loaded(pd, blob);
    CHECK(cpu_internal::objects_compiled() == compiled_before);
    CHECK(loaded.creation_outcome() == lookup_outcome::miss);
    CHECK(primitive_cache_contains(pd));
    CHECK(run(loaded, c) == want);
    CHECK(loaded.cache_blob() == blob);
    CHECK(c.make_pd().cache_blob_id() == id);

    // A hit ignores the blob.
    const primitive again(pd, std::vector<std::uint8_t>{1, 2, 3});
    CHECK(again.creation_outcome() == lookup_outcome::hit);
  }
}

TEST_CASE("damaged or foreign blobs are refused and nothing is loaded", "[cpu][blob]") {
  const a_case c = matmul_case();
  const primitive_desc pd = c.make_pd();
  const std::vector<std::uint8_t> blob = primitive(pd).cache_blob();
  const a_case other = eltwise_case();
  const std::vector<std::uint8_t> foreign = primitive(other.make_pd()).cache_blob();
  empty_primitive_cache();

  auto refused = [&](const std::vector<std::uint8_t>& bytes, status code, const std::string& says) {
    const std::uint64_t compiled_before = cpu_internal::objects_compiled();
    try {
      primitive p(pd, bytes);
      FAIL("the blob was accepted");
    } catch (const error& e) {
      INFO(e.what());
      CHECK(e.code() == code);
      CHECK_THAT(e.message(), Catch::Contains(says));
    }
    CHECK_FALSE(primitive_cache_contains(pd));
    CHECK(cpu_internal::objects_compiled() == compiled_before);
  };
  SECTION("a blob of another descriptor") {
    refused(foreign, status::invalid_arguments, "the blob holds an implementation");
  }
  SECTION("a blob of the same implementation under another thread count") {
    // Another key, and maybe the same configuration.
    const int threads = get_num_threads();
    set_num_threads(threads == 1 ? 2 : 1);
    const std::vector<std::uint8_t> b2 = primitive(c.make_pd()).cache_blob();
    set_num_threads(threads);
    refused(b2, status::invalid_arguments, "");
  }
  SECTION("a truncated blob") {
    for (std::size_t keep :
         {std::size_t{0}, std::size_t{6}, std::size_t{20}, blob.size() / 2, blob.size() - 1}) {
      refused(std::vector<std::uint8_t>(blob.begin(), blob.begin() + static_cast<long>(keep)),
              status::corrupt_data, "");
    }
  }
  SECTION("a flipped byte anywhere") {
    for (std::size_t at :
         {std::size_t{3}, std::size_t{30}, blob.size() / 2, blob.size() - 40, blob.size() - 2}) {
      auto bad = blob;
      bad[at] ^= 0x10;
      refused(bad, status::corrupt_data, "");
    }
  }
  SECTION("another format version") {
    auto bad = blob;
    bad[8] = 9;
    refused(bad, status::unimplemented, "format version 9");
  }
  SECTION("a blob another library version or build made") {
    for (const std::string& producer : {std::string(version().version) + "+0000000000000000",
                                        std::string("0.0.9+") + version().build_identity}) {
      backend::impl_blob b = backend::impl_blob::decode(blob).value();
      b.producer = producer;
      refused(b.encode(), status::invalid_arguments, "made by primcache " + producer);
    }
  }
  SECTION("the blob itself still loads afterwards") {
    const primitive p(pd, blob);
    CHECK(p.creation_outcome() == lookup_outcome::miss);
  }
}

TEST_CASE("the C API round-trips a primitive through its cache blob", "[cpu][blob][c_api]") {
  pc_engine_t eng = nullptr;
  REQUIRE(pc_engine_create(&eng, pc_engine_cpu, 0) == pc_success);
  const int64_t dims[4] = {2, 16, 5, 7};
  pc_memory_desc_t src_md = nullptr, dst_md = nullptr;
  REQUIRE(pc_memory_desc_create_with_tag(&src_md, 4, dims, pc_f32, pc_tag_nchw) == pc_success);
  REQUIRE(pc_memory_desc_create_with_tag(&dst_md, 4, dims, pc_f32, pc_tag_nhwc) == pc_success);
  pc_primitive_desc_t pd = nullptr;
  REQUIRE(pc_reorder_primitive_desc_create(&pd, src_md, eng, dst_md, eng, nullptr) == pc_success);
  pc_primitive_t prim = nullptr;
  REQUIRE(pc_primitive_create(&prim, pd) == pc_success);
  size_t size = 0;
  REQUIRE(pc_primitive_get_cache_blob(prim, &size, nullptr) == pc_success);
  std::vector<uint8_t> blob(size);
  REQUIRE(pc_primitive_get_cache_blob(prim, &size, blob.data()) == pc_success);
  empty_primitive_cache();

  const std::uint64_t compiled_before = cpu_internal::objects_compiled();
  pc_primitive_t loaded = nullptr;
  REQUIRE(pc_primitive_create_from_cache_blob(&loaded, pd, blob.size(), blob.data()) == pc_success);
  CHECK(cpu_internal::objects_compiled() == compiled_before);
  std::vector<float> src(2 * 16 * 5 * 7), a(src.size()), b(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.25f;
  pc_stream_t strm = nullptr;
  REQUIRE(pc_stream_create(&strm, eng) == pc_success);
  pc_memory_t s = nullptr, da = nullptr, db = nullptr;
  REQUIRE(pc_memory_create(&s, src_md, eng, src.data()) == pc_success);
  REQUIRE(pc_memory_create(&da, dst_md, eng, a.data()) == pc_success);
  REQUIRE(pc_memory_create(&db, dst_md, eng, b.data()) == pc_success);
  pc_exec_arg_t args_a[2] = {{PRIMCACHE_ARG_FROM, s}, {PRIMCACHE_ARG_TO, da}};
  pc_exec_arg_t args_b[2] = {{PRIMCACHE_ARG_FROM, s}, {PRIMCACHE_ARG_TO, db}};
  REQUIRE(pc_primitive_execute(prim, strm, 2, args_a) == pc_success);
  REQUIRE(pc_primitive_execute(loaded, strm, 2, args_b) == pc_success);
  REQUIRE(pc_stream_wait(strm) == pc_success);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  for (pc_memory_t m : {s, da, db}) pc_memory_destroy(m);
  pc_stream_destroy(strm);
  pc_primitive_destroy(loaded);
  pc_primitive_destroy(prim);
  pc_primitive_desc_destroy(pd);
  pc_memory_desc_destroy(src_md);
  pc_memory_desc_destroy(dst_md);
  pc_engine_destroy(eng);
}

// Run by tests/cpu/blob_id_stable.cmake in two processes, which compare the
// printed ids: a blob id names code across processes, not within one.
TEST_CASE("print the cache blob ids of one primitive per kind", "[.][blob_id]") {
  for (const a_case& c : all_cases()) {
    std::string hex;
    for (std::uint8_t b : c.make_pd().cache_blob_id()) {
      static constexpr char digits[] = "0123456789abcdef";
      hex += digits[b >> 4];
      hex += digits[b & 15];
    }
    std::printf("blob_id %s %s\n", c.name.c_str(), hex.c_str());
  }
}
