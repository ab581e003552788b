// Tiered creation of the convolution through the public API: a convolution
// that misses every cache starts on the generic kernel, the specialized
// kernel is swapped in by the background pool, and nothing a caller can see
// changes but the speed — outputs bit-identical across the swap over random
// shapes, executions racing with the swap, constant weights shared by both
// kernels, and the persistent cache holding only specialized code.
// Depthwise convolutions: tiered_dwconv_concurrency_test.cpp.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "primcache/control/registry.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/runtime.hpp"
#include "tiered_test_support.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

using tiered_support::cpu;
using tiered_support::mode_scope;
using tiered_support::same_bits;
using tiered_support::tiered_here;

memory make(const memory::desc& md, unsigned seed) {
  memory m(md, cpu());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> v(-1.f, 1.f);
  auto* p = static_cast<float*>(m.get_data_handle());
  for (std::size_t i = 0; i < md.size_bytes() / 4; ++i) p[i] = v(rng);
  return m;
}

struct conv_shape {
  int n = 1, ic = 32, oc = 48, in_h = 13, in_w = 17, k = 3, stride = 1, pad = 1, groups = 1;
  tag src = tag::nChw16c, dst = tag::nhwc;
  bool constant_weights = false;
  int out_h() const { return (in_h + 2 * pad - k) / stride + 1; }
  int out_w() const { return (in_w + 2 * pad - k) / stride + 1; }
};

// A convolution with bias and a chain of post-ops (an eltwise, a dst-shaped
// sum, a leaky relu), its arguments, and a way to run it into a fresh dst.
struct conv_case {
  conv_shape s;
  memory::desc src_md, wei_md, bias_md, dst_md;
  convolution_forward::primitive_desc pd;
  memory src, wei, bias, addend;

  conv_case(const conv_shape& shape, unsigned seed) : s(shape) {
    src_md = memory::desc({s.n, s.ic, s.in_h, s.in_w}, data_type::f32, s.src);
    dst_md = memory::desc({s.n, s.oc, s.out_h(), s.out_w()}, data_type::f32, s.dst);
    bias_md = memory::desc({s.oc}, data_type::f32, tag::a);
    memory::desc wei_user =
        s.groups == 1 ? memory::desc({s.oc, s.ic, s.k, s.k}, data_type::f32, tag::oihw)
                      : memory::desc({s.groups, s.oc / s.groups, s.ic / s.groups, s.k, s.k},
                                     data_type::f32, tag::goihw);
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_gelu_tanh, 0.f, 0.f);
    ops.append_binary(algorithm::binary_add, dst_md);
    ops.append_eltwise(0.5f, algorithm::eltwise_relu, 0.125f, 0.f);
    primitive_attr attr;
    attr.set_post_ops(ops);
    if (s.constant_weights) attr.set_constant_weights(true);
    pd = convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                  src_md, wei_user, bias_md, dst_md, {s.stride, s.stride},
                                  {s.pad, s.pad}, {s.pad, s.pad}),
        attr, cpu());
    wei_md = pd.weights_desc();
    src = make(src_md, seed);
    wei = make(wei_md, seed + 1);
    bias = make(bias_md, seed + 2);
    addend = make(dst_md, seed + 3);
  }

  std::vector<float> run(const primitive& prim) const {
    memory dst(dst_md, cpu());
    std::memset(dst.get_data_handle(), 0, dst_md.size_bytes());
    prim.execute(stream(cpu()),
                 {{PRIMCACHE_ARG_SRC, src},
                  {PRIMCACHE_ARG_WEIGHTS, wei},
                  {PRIMCACHE_ARG_BIAS, bias},
                  {PRIMCACHE_ARG_DST, dst},
                  {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1, addend}});
    const auto* p = static_cast<const float*>(dst.get_data_handle());
    return std::vector<float>(p, p + dst_md.size_bytes() / 4);
  }
};

conv_shape random_shape(std::mt19937& rng) {
  const tag acts[] = {tag::nchw, tag::nhwc, tag::nChw16c};
  conv_shape s;
  s.n = 1 + static_cast<int>(rng() % 2);
  s.groups = rng() % 4 == 0 ? 2 : 1;
  s.ic = s.groups * (1 + static_cast<int>(rng() % 40));
  s.oc = s.groups * (1 + static_cast<int>(rng() % 40));
  s.k = 1 + static_cast<int>(rng() % 3);
  s.stride = 1 + static_cast<int>(rng() % 2);
  s.pad = static_cast<int>(rng() % 2);
  s.in_h = s.k + static_cast<int>(rng() % 15);
  s.in_w = s.k + static_cast<int>(rng() % 21);
  s.src = acts[rng() % 3];
  s.dst = acts[rng() % 3];
  return s;
}

}  // namespace

TEST_CASE("a tiered convolution gives bit-identical outputs before and after the swap",
          "[cpu][tiered][conv]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  std::mt19937 rng(17);
  for (int trial = 0; trial < 8; ++trial) {
    conv_shape s = random_shape(rng);
    if (trial == 0) s = conv_shape{};  // a known tiered shape first
    INFO("trial " << trial << ": n" << s.n << " ic" << s.ic << " oc" << s.oc << " " << s.in_h << "x"
                  << s.in_w << " k" << s.k << " s" << s.stride << " p" << s.pad << " g"
                  << s.groups);
    const conv_case c(s, 300 + trial);
    // A cache of capacity 0 keeps nothing: each creation is a fresh miss.
    set_primitive_cache_capacity(0);
    convolution_forward tiered(c.pd);
    const bool was_generic = !tiered.specialized();
    const std::vector<float> before = c.run(tiered);
    tiered.wait_until_specialized();
    CHECK(tiered.specialized());
    CHECK(same_bits(before, c.run(tiered)));
    // The same key created synchronously compiles the same specialized code.
    set_jit_mode(jit_mode::sync);
    convolution_forward sync(c.pd);
    CHECK(sync.specialized());
    CHECK(same_bits(before, c.run(sync)));
    set_jit_mode(jit_mode::tiered);
    // The compilation takes milliseconds; the creation does not wait for it.
    if (trial == 0) CHECK(was_generic);
  }
}

TEST_CASE("convolution executions racing with the swap all give the same bits",
          "[cpu][tiered][conv]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  conv_shape s;
  s.ic = 64;
  s.oc = 64;
  s.in_h = s.in_w = 14;
  s.dst = tag::nChw16c;
  const conv_case c(s, 21);
  set_jit_mode(jit_mode::sync);
  const std::vector<float> expected = c.run(convolution_forward(c.pd));
  set_jit_mode(jit_mode::tiered);
  for (int round = 0; round < 2; ++round) {
    convolution_forward prim(c.pd);
    std::atomic<int> mismatches{0}, generic_runs{0}, runs{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&] {
        // Run until well after the swap.
        for (int i = 0; i < 400; ++i) {
          const bool generic = !prim.specialized();
          if (!same_bits(c.run(prim), expected)) ++mismatches;
          ++runs;
          if (generic) {
            ++generic_runs;
          } else if (i > 10) {
            break;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    CHECK(mismatches == 0);
    CHECK(runs > 0);
    prim.wait_until_specialized();
    CHECK(prim.specialized());
  }
}

TEST_CASE("constant weights packed for the generic convolution serve the specialized one",
          "[cpu][tiered][conv]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  conv_shape s;
  s.groups = 2;  // grouped weights are always packed
  s.ic = 32;
  s.oc = 40;
  s.constant_weights = true;
  const conv_case c(s, 40);
  convolution_forward prim(c.pd);
  const std::vector<float> before = c.run(prim);
  prim.wait_until_specialized();
  CHECK(same_bits(before, c.run(prim)));
  set_jit_mode(jit_mode::sync);
  CHECK(same_bits(before, c.run(convolution_forward(c.pd))));
}

TEST_CASE("the persistent cache stores and loads only a convolution's specialized code",
          "[cpu][tiered][conv][persistent]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  char dir_template[] = "/tmp/primcache_tiered_conv_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  set_persistent_cache(open_persistent_cache_dir(dir, 64));
  const persistent_cache_stats before = get_persistent_cache_stats();
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(16);
  conv_shape s;
  s.oc = 33;
  const conv_case c(s, 60);
  convolution_forward first(c.pd);  // a store miss: tiered; its write waits for the specialized
  const std::vector<float> generic_or_not = c.run(first);
  flush_persistent_cache_writes();
  const persistent_cache_stats written = get_persistent_cache_stats();
  CHECK(written.writes_stored == before.writes_stored + 1);
  CHECK(first.specialized());
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(16);
  convolution_forward loaded(c.pd);  // a store hit: specialized at once
  CHECK(get_persistent_cache_stats().hits == written.hits + 1);
  CHECK(loaded.specialized());
  CHECK(same_bits(generic_or_not, c.run(loaded)));
  set_persistent_cache(nullptr);
  std::filesystem::remove_all(dir);
}

namespace {

// `base` with some fields' values replaced (same names, same order).
backend::kernel_config with_values(const backend::kernel_config& base,
                                   const std::vector<std::pair<std::string, int>>& values) {
  backend::kernel_config out;
  for (const auto& f : base.fields()) {
    std::int64_t v = f.value;
    for (const auto& [name, value] : values) {
      if (name == f.name) v = value;
    }
    out.add(f.name, v);
  }
  return out;
}

// Sets the configuration source for the scope (every convolution
// descriptor gets `cfg`), and removes it after.
struct config_scope {
  explicit config_scope(const backend::kernel_config& cfg) {
    backend::set_config_source(
        [cfg](const backend::primitive_desc_impl&) -> std::optional<backend::kernel_config> {
          return cfg;
        });
  }
  ~config_scope() { backend::set_config_source({}); }
};

}  // namespace

TEST_CASE(
    "a configuration whose K panels sum in another order is created synchronously; panels and "
    "partitions are tiered, bit-identical across the swap",
    "[cpu][tiered][conv][blocking]") {
  if (!tiered_here()) return;
  mode_scope scope(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  struct variant {
    const char* what;
    int k;
    std::vector<std::pair<std::string, int>> values;
    bool tiered;
  };
  const variant variants[] = {{"K panels of a 3x3 kernel", 3, {{"ic_block", 16}}, false},
                              {"K panels of a 1x1 kernel", 1, {{"ic_block", 16}}, true},
                              {"an N panel", 3, {{"order", 1}, {"oc_panel", 2}}, true},
                              {"a thread partition over rows", 3, {{"thr_oc", 1}}, true},
                              {"all three on a 1x1 kernel",
                               1,
                               {{"order", 1}, {"oc_panel", 2}, {"thr_oc", 1}, {"ic_block", 8}},
                               true}};
  for (const variant& v : variants) {
    INFO(v.what);
    conv_shape s;
    s.k = v.k;
    s.pad = v.k / 2;
    s.oc = 80;  // 5 blocks: chunks for a panel of 2
    const conv_case heuristic(s, 500);
    const backend::kernel_config cfg =
        with_values(*backend::impl_of(heuristic.pd).config(), v.values);
    INFO(cfg.to_json());
    const config_scope forced(cfg);
    const conv_case c(s, 500);
    REQUIRE(backend::impl_of(c.pd).config() == cfg);
    const std::uint64_t since = control().events_since(0).next;
    convolution_forward prim(c.pd);
    const event_page page = control().events_since(since);
    REQUIRE(page.events.size() == 1);
    CHECK(page.events[0].source == (v.tiered ? "tiered" : "compile"));
    if (!v.tiered) CHECK(prim.specialized());
    const std::vector<float> first = c.run(prim);
    prim.wait_until_specialized();
    CHECK(same_bits(first, c.run(prim)));
    set_jit_mode(jit_mode::sync);
    convolution_forward sync(c.pd);
    CHECK(same_bits(first, c.run(sync)));
    set_jit_mode(jit_mode::tiered);
  }
}
