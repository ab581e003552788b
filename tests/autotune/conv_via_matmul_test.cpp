// "jit:conv:via_matmul" (libs/cpu/src/primitives/conv_via_matmul_impl.cpp):
// a 1x1, stride-1, unpadded, ungrouped nhwc convolution run as one nested
// matmul, registered below "jit:conv". It is made for an op when a tune
// table names it (the registry's cross-implementation redirect), which is
// how these tests reach it: an entry under the direct convolution's problem
// key, as tuning writes one when it wins. Results against plain loops in
// double (post-ops included), the shapes it declines, the cache blob, tiered
// creation, and real tuning with both implementations as candidates.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/jit_mode.hpp"
#include "primcache/runtime/primitive_cache.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/tuning.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

constexpr const char* kVia = "jit:conv:via_matmul";

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

bool jit_here() {
  return effective_isa() >= cpu_isa::avx2;
}

// The cached descriptors are made again after a table change (tuning does
// the same when it installs an entry).
void refresh_descriptors() {
  backend::set_config_source({});
}

struct conv_shape {
  std::int64_t n, h, w, ic, oc;
};

std::string describe(const conv_shape& s) {
  return "N" + std::to_string(s.n) + " H" + std::to_string(s.h) + " W" + std::to_string(s.w) +
         " IC" + std::to_string(s.ic) + " OC" + std::to_string(s.oc);
}

memory filled(const memory::desc& md, unsigned seed) {
  memory m(md, cpu());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto* p = static_cast<float*>(m.get_data_handle());
  const std::size_t n = md.size_bytes() / sizeof(float);
  for (std::size_t i = 0; i < n; ++i) p[i] = dist(rng);
  return m;
}

float* data(const memory& m) {
  return static_cast<float*>(m.get_data_handle());
}

// One convolution problem: its descriptors, attributes, tensors and the
// expected output in double.
struct conv_case {
  conv_shape s;
  memory::desc src_md, wei_md, bias_md, dst_md;
  memory::dims strides{1, 1}, pad_l{0, 0}, pad_r{0, 0};
  primitive_attr attr;
  memory src, wei, bias, dst;
  std::vector<memory> binary;  // operand of binary post-op i (by post-op index)
  std::vector<bool> is_binary;

  conv_case(conv_shape shape, bool with_bias, tag act = tag::nhwc, tag wtag = tag::oihw)
      : s(shape),
        src_md({s.n, s.ic, s.h, s.w}, data_type::f32, act),
        wei_md({s.oc, s.ic, 1, 1}, data_type::f32, wtag),
        bias_md(with_bias ? memory::desc({s.oc}, data_type::f32, tag::a) : memory::desc()),
        dst_md({s.n, s.oc, s.h, s.w}, data_type::f32, act) {
    make_tensors();
  }
  void make_tensors() {
    src = filled(src_md, 11);
    wei = filled(wei_md, 12);
    if (!bias_md.is_zero()) bias = filled(bias_md, 13);
    dst = memory(dst_md, cpu());
  }
  // Post-ops: set before pd().
  void set_post_ops(const post_ops& ops) {
    attr.set_post_ops(ops);
    binary.clear();
    is_binary.clear();
    unsigned seed = 20;
    for (const auto& e : ops.entries()) {
      is_binary.push_back(e.kind == post_ops::kind::binary);
      binary.push_back(is_binary.back() ? filled(e.src1, seed++) : memory());
    }
  }
  convolution_forward::desc desc() const {
    return convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                     src_md, wei_md, bias_md, dst_md, strides, pad_l, pad_r);
  }
  convolution_forward::primitive_desc pd() const {
    return convolution_forward::primitive_desc(desc(), attr, cpu());
  }
  primitive::args args() const {
    primitive::args a = {
        {PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}};
    if (!bias_md.is_zero()) a.insert({PRIMCACHE_ARG_BIAS, bias});
    for (std::size_t i = 0; i < binary.size(); ++i) {
      if (!is_binary[i]) continue;
      a.insert({PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | PRIMCACHE_ARG_SRC_1,
                binary[i]});
    }
    return a;
  }
  // Runs `p` into a dst filled with NaN; returns dst's values.
  std::vector<float> run(const primitive& p) const {
    std::memset(data(dst), 0xff, dst_md.size_bytes());
    p.execute(stream(cpu()), args());
    return std::vector<float>(data(dst), data(dst) + dst_md.size_bytes() / sizeof(float));
  }

  // Expected outputs by dst element offset, and the tolerance of each:
  // plain loops in double (1x1, stride 1, no padding), bias, post-ops.
  std::vector<double> expected, tolerance;
  void compute_expected() {
    const std::size_t n = dst_md.size_bytes() / sizeof(float);
    expected.assign(n, 0);
    tolerance.assign(n, 0);
    const auto& ops = attr.get_post_ops().entries();
    for (std::int64_t b = 0; b < s.n; ++b) {
      for (std::int64_t o = 0; o < s.oc; ++o) {
        for (std::int64_t y = 0; y < s.h; ++y) {
          for (std::int64_t x = 0; x < s.w; ++x) {
            double acc = 0, mag = 0;
            for (std::int64_t i = 0; i < s.ic; ++i) {
              const double t =
                  double(data(src)[src_md.offset_of(std::vector<std::int64_t>{b, i, y, x})]) *
                  data(wei)[wei_md.offset_of(std::vector<std::int64_t>{o, i, 0, 0})];
              acc += t;
              mag += std::abs(t);
            }
            if (!bias_md.is_zero()) {
              acc += data(bias)[o];
              mag += std::abs(data(bias)[o]);
            }
            const std::int64_t at = dst_md.offset_of(std::vector<std::int64_t>{b, o, y, x});
            // f32 sums in any order: a few ulps of the magnitude per term.
            double tol = 1e-5 * (mag + 1);
            for (std::size_t k = 0; k < ops.size(); ++k) {
              const auto& e = ops[k];
              if (e.kind == post_ops::kind::binary) {
                const memory_desc& m = e.src1;
                std::vector<std::int64_t> idx{b, o, y, x};
                for (int d = 0; d < 4; ++d) {
                  if (m.dims()[d] == 1) idx[d] = 0;
                }
                acc += data(binary[k])[m.offset_of(idx)];
                continue;
              }
              const double v = acc;
              double f = v;
              switch (e.alg) {
                case algorithm::eltwise_relu: f = v > 0 ? v : e.alpha * v; break;
                case algorithm::eltwise_gelu_erf:
                  f = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
                  break;
                case algorithm::eltwise_gelu_tanh:
                  f = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
                  break;
                case algorithm::eltwise_tanh: f = std::tanh(v); break;
                case algorithm::eltwise_logistic: f = 1 / (1 + std::exp(-v)); break;
                case algorithm::eltwise_exp:
                  f = std::exp(v);
                  tol *= 1 + f;  // relative after exp
                  break;
                case algorithm::eltwise_linear: f = e.alpha * v + e.beta; break;
                case algorithm::eltwise_clip:
                  f = std::min(std::max(v, double(e.alpha)), double(e.beta));
                  break;
                default: FAIL("unexpected post-op");
              }
              acc = e.scale * f;
              tol *= std::max(1.0, std::abs(double(e.scale)) * std::abs(double(e.alpha)) + 1.2);
            }
            expected[at] = acc;
            tolerance[at] = tol + 1e-6 * std::abs(acc);
          }
        }
      }
    }
  }
  // The largest difference beyond tolerance (0 when all within; NaN
  // counts as a miss).
  void check(const std::vector<float>& got) {
    if (expected.empty()) compute_expected();
    std::size_t bad = 0;
    std::string first;
    for (std::int64_t b = 0; b < s.n; ++b) {
      for (std::int64_t o = 0; o < s.oc; ++o) {
        for (std::int64_t y = 0; y < s.h; ++y) {
          for (std::int64_t x = 0; x < s.w; ++x) {
            const std::int64_t at = dst_md.offset_of(std::vector<std::int64_t>{b, o, y, x});
            const double d = std::abs(got[at] - expected[at]);
            if (!(d <= tolerance[at])) {
              if (bad++ == 0) {
                first = "(" + std::to_string(b) + "," + std::to_string(o) + "," +
                        std::to_string(y) + "," + std::to_string(x) + "): got " +
                        std::to_string(got[at]) + ", expected " + std::to_string(expected[at]);
              }
            }
          }
        }
      }
    }
    INFO(describe(s) << ": " << bad << " elements off, first " << first);
    CHECK(bad == 0);
  }
};

// The descriptor the registry makes for the case when a tune table names
// `impl` for the op's first accepting implementation's problem (as tuning
// records a cross-implementation winner), and that first implementation's
// name. The entry is removed again when the scope ends.
struct named_winner {
  std::string device = tune_device_of(cpu());
  std::vector<std::byte> key;
  std::string first;

  named_winner(const conv_case& c, const std::string& impl) {
    refresh_descriptors();
    const convolution_forward::primitive_desc before = c.pd();
    const backend::primitive_desc_impl& d = backend::impl_of(before);
    first = d.name();
    const auto k = d.problem_key().bytes();
    key.assign(k.begin(), k.end());
    global_tune_table().put(
        device, d.problem_key(),
        tune_entry{impl, d.config() ? d.config()->to_json() : "{}", 1, 2, "convolution (test)"});
    refresh_descriptors();
  }
  ~named_winner() {
    global_tune_table().erase(device, key);
    refresh_descriptors();
  }
};

std::string impl_name(const primitive_desc& pd) {
  return backend::impl_of(pd).name();
}

// The descriptor made with the via_matmul winner named for the case.
convolution_forward::primitive_desc via_pd(const conv_case& c) {
  const named_winner w(c, kVia);
  return c.pd();
}

}  // namespace

TEST_CASE("via_matmul equals plain loops over odd shapes, with and without bias",
          "[autotune][conv_via_matmul]") {
  if (!jit_here()) {
    WARN("the JIT matmul needs avx2: jit:conv:via_matmul declines here");
    return;
  }
  set_tune(false);
  const conv_shape shapes[] = {{1, 1, 1, 1, 1},   {2, 3, 5, 7, 11},    {1, 7, 5, 13, 17},
                               {3, 1, 1, 17, 5},  {1, 13, 11, 31, 37}, {2, 5, 3, 64, 24},
                               {1, 7, 7, 67, 130}};
  for (const conv_shape& s : shapes) {
    for (bool with_bias : {false, true}) {
      conv_case c(s, with_bias);
      const auto pd = via_pd(c);
      INFO(describe(s) << (with_bias ? " bias" : ""));
      REQUIRE(impl_name(pd) == kVia);
      REQUIRE(backend::impl_of(pd).config());
      c.check(c.run(convolution_forward(pd)));
    }
  }
}

TEST_CASE("via_matmul applies every post-op the convolution takes", "[autotune][conv_via_matmul]") {
  if (!jit_here()) return;
  set_tune(false);
  const conv_shape s{2, 5, 3, 19, 23};
  const memory::desc dst_md({s.n, s.oc, s.h, s.w}, data_type::f32, tag::nhwc);
  const memory::desc scalar({1, 1, 1, 1}, data_type::f32, tag::nchw);
  const memory::desc per_channel({1, s.oc, 1, 1}, data_type::f32, tag::nchw);
  struct named_ops {
    const char* name;
    std::function<void(post_ops&)> add;
  };
  const named_ops cases[] = {
      {"relu", [](post_ops& o) { o.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f); }},
      {"leaky relu scaled",
       [](post_ops& o) { o.append_eltwise(0.5f, algorithm::eltwise_relu, 0.1f, 0.f); }},
      {"gelu_erf", [](post_ops& o) { o.append_eltwise(1.f, algorithm::eltwise_gelu_erf, 0, 0); }},
      {"gelu_tanh", [](post_ops& o) { o.append_eltwise(1.f, algorithm::eltwise_gelu_tanh, 0, 0); }},
      {"tanh", [](post_ops& o) { o.append_eltwise(1.f, algorithm::eltwise_tanh, 0, 0); }},
      {"logistic", [](post_ops& o) { o.append_eltwise(1.f, algorithm::eltwise_logistic, 0, 0); }},
      {"exp", [](post_ops& o) { o.append_eltwise(1.f, algorithm::eltwise_exp, 0, 0); }},
      {"linear", [](post_ops& o) { o.append_eltwise(1.f, algorithm::eltwise_linear, 2.f, -1.f); }},
      {"clip", [](post_ops& o) { o.append_eltwise(1.f, algorithm::eltwise_clip, -0.5f, 0.5f); }},
      {"binary scalar", [&](post_ops& o) { o.append_binary(algorithm::binary_add, scalar); }},
      {"binary per channel",
       [&](post_ops& o) { o.append_binary(algorithm::binary_add, per_channel); }},
      {"binary as dst", [&](post_ops& o) { o.append_binary(algorithm::binary_add, dst_md); }},
      {"chain: binary as dst, relu, binary per channel, linear",
       [&](post_ops& o) {
         o.append_binary(algorithm::binary_add, dst_md);
         o.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
         o.append_binary(algorithm::binary_add, per_channel);
         o.append_eltwise(1.f, algorithm::eltwise_linear, 0.5f, 0.25f);
       }},
  };
  for (const named_ops& n : cases) {
    conv_case c(s, true);
    post_ops ops;
    n.add(ops);
    c.set_post_ops(ops);
    INFO(n.name);
    const auto pd = via_pd(c);
    REQUIRE(impl_name(pd) == kVia);
    c.check(c.run(convolution_forward(pd)));
  }
}

TEST_CASE("via_matmul declines what is not a 1x1 stride-1 unpadded nhwc convolution",
          "[autotune][conv_via_matmul]") {
  if (!jit_here()) return;
  set_tune(false);
  const conv_shape s{1, 6, 6, 8, 16};
  SECTION("the 1x1 nhwc case it takes (the control)") {
    conv_case c(s, true);
    CHECK(impl_name(via_pd(c)) == kVia);
  }
  SECTION("stride 2") {
    conv_case c(s, true);
    c.strides = {2, 2};
    c.dst_md = memory::desc({1, 16, 3, 3}, data_type::f32, tag::nhwc);
    c.make_tensors();
    const auto pd = via_pd(c);
    CHECK(impl_name(pd) == "jit:conv");
    c.s = {1, 3, 3, 8, 16};  // not checked by loops: the direct convolution's tests do
  }
  SECTION("padding") {
    conv_case c(s, true);
    c.pad_l = {1, 1};
    c.pad_r = {1, 1};
    c.dst_md = memory::desc({1, 16, 8, 8}, data_type::f32, tag::nhwc);
    c.make_tensors();
    CHECK(impl_name(via_pd(c)) == "jit:conv");
  }
  SECTION("a 3x3 kernel") {
    conv_case c(s, true);
    c.wei_md = memory::desc({16, 8, 3, 3}, data_type::f32, tag::oihw);
    c.dst_md = memory::desc({1, 16, 4, 4}, data_type::f32, tag::nhwc);
    c.make_tensors();
    CHECK(impl_name(via_pd(c)) == "jit:conv");
  }
  SECTION("groups") {
    conv_case c(s, true);
    c.wei_md = memory::desc({2, 8, 4, 1, 1}, data_type::f32, tag::goihw);
    c.make_tensors();
    CHECK(impl_name(via_pd(c)) == "jit:conv");
  }
  SECTION("nchw activations") {
    conv_case c(s, true, tag::nchw);
    CHECK(impl_name(via_pd(c)) == "jit:conv");
  }
  SECTION("any activations (the direct convolution's layout)") {
    conv_case c(s, true);
    c.src_md = memory::desc({1, 8, 6, 6}, data_type::f32, tag::any);
    c.dst_md = memory::desc({1, 16, 6, 6}, data_type::f32, tag::any);
    CHECK(impl_name(via_pd(c)) == "jit:conv");
  }
  SECTION("output scales (no implementation takes them; via_matmul says why)") {
    conv_case c(s, true);
    c.attr.set_output_scales(0, {0.5f});
    try {
      (void)c.pd();
      FAIL("a convolution with output scales was accepted");
    } catch (const error& e) {
      CHECK(e.code() == status::unimplemented);
      CHECK_THAT(e.what(), Catch::Contains("jit:conv:via_matmul: output scales"));
    }
  }
}

TEST_CASE("via_matmul takes weights in another plain layout (hwio: B not transposed)",
          "[autotune][conv_via_matmul]") {
  if (!jit_here()) return;
  set_tune(false);
  conv_case c({2, 3, 7, 11, 13}, true, tag::nhwc, tag::hwio);
  const auto pd = via_pd(c);
  if (impl_name(pd) != kVia) {
    // The op's first implementation must take hwio for the redirect to
    // apply; if jit:conv declines it, the redirect has nothing to replace.
    WARN("hwio weights: " << impl_name(pd));
    return;
  }
  c.check(c.run(convolution_forward(pd)));
}

TEST_CASE("via_matmul with constant weights packs them once and stays right",
          "[autotune][conv_via_matmul]") {
  if (!jit_here()) return;
  set_tune(false);
  conv_case c({1, 9, 7, 29, 31}, true);
  c.attr.set_constant_weights(true);
  const auto pd = via_pd(c);
  REQUIRE(impl_name(pd) == kVia);
  const convolution_forward p(pd);
  c.check(c.run(p));
  c.check(c.run(p));  // the packed copy
  // New weights in a new memory object: packed again, new results.
  c.wei = filled(c.wei_md, 99);
  c.expected.clear();
  c.check(c.run(p));
}

TEST_CASE("via_matmul's cache blob loads back without compiling and gives the same bits",
          "[autotune][conv_via_matmul]") {
  if (!jit_here()) return;
  set_tune(false);
  const jit_mode saved = get_jit_mode();
  set_jit_mode(jit_mode::sync);
  conv_case c({2, 5, 7, 23, 29}, true);
  post_ops ops;
  ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  c.set_post_ops(ops);
  const auto pd = via_pd(c);
  REQUIRE(impl_name(pd) == kVia);
  const convolution_forward made(pd);
  const std::vector<float> want = c.run(made);
  c.check(want);
  const std::vector<std::uint8_t> blob = made.cache_blob();
  auto decoded = backend::impl_blob::decode(blob);
  REQUIRE(decoded);
  CHECK(decoded.value().name == kVia);
  CHECK(decoded.value().object.empty());
  REQUIRE(decoded.value().nested.size() == 1);
  CHECK(decoded.value().config == backend::impl_of(pd).config());

  // A cold cache: the nested matmul comes from the blob too.
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(1024);
  const primitive loaded(pd, blob);
  CHECK(loaded.specialized());
  const std::vector<float> got = c.run(loaded);
  CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);

  SECTION("a blob without its nested blob is refused") {
    backend::impl_blob broken = decoded.value();
    broken.nested.clear();
    const auto bytes = broken.encode();
    try {
      (void)backend::impl_of(pd).create_impl_from_blob(cpu(), bytes);
      FAIL("accepted a blob without the nested matmul");
    } catch (const error& e) {
      CHECK(e.code() == status::corrupt_data);
    }
  }
  set_jit_mode(saved);
}

TEST_CASE(
    "a tuned configuration from the matmul's space goes to the nested matmul, cached and "
    "serialized",
    "[autotune][conv_via_matmul]") {
  if (!jit_here()) return;
  set_tune(false);
  const jit_mode saved = get_jit_mode();
  set_jit_mode(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(1024);
  conv_case c({1, 14, 14, 64, 48}, true);
  const auto first = via_pd(c);
  REQUIRE(impl_name(first) == kVia);
  const backend::primitive_desc_impl& d = backend::impl_of(first);
  // Another valid configuration of its space, as a tuning winner under
  // via_matmul's own problem key (tuning records it there too).
  const backend::config_space space = d.config_candidates();
  std::optional<backend::kernel_config> other;
  for (std::uint64_t i = 0; i < space.size() && !other; ++i) {
    const backend::kernel_config cfg = space.at(i);
    if (cfg != *d.config() && d.validate_config(cfg)) other = cfg;
  }
  REQUIRE(other);
  const std::string device = tune_device_of(cpu());
  global_tune_table().put(device, d.problem_key(),
                          tune_entry{kVia, other->to_json(), 1, 2, "convolution (test)"});
  const auto tuned = via_pd(c);
  REQUIRE(impl_name(tuned) == kVia);
  REQUIRE(backend::impl_of(tuned).config());
  CHECK(*backend::impl_of(tuned).config() == *other);
  // The nested matmul descriptor was made with that configuration (its key
  // names it), so the impl comes from the global cache like any matmul's
  // and its blob loads back.
  const convolution_forward p(tuned);
  p.wait_until_specialized();
  const std::vector<float> want = c.run(p);
  c.check(want);
  CHECK(primitive_cache_contains(tuned));
  const std::vector<std::uint8_t> blob = p.cache_blob();
  auto decoded = backend::impl_blob::decode(blob);
  REQUIRE(decoded);
  CHECK(decoded.value().config == *other);
  REQUIRE(decoded.value().nested.size() == 1);
  auto nested = backend::impl_blob::decode(decoded.value().nested[0]);
  REQUIRE(nested);
  CHECK(nested.value().config == *other);
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(1024);
  const primitive loaded(tuned, blob);
  CHECK(loaded.specialized());
  const std::vector<float> got = c.run(loaded);
  CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
  global_tune_table().erase(device, d.problem_key().bytes());
  refresh_descriptors();
  set_jit_mode(saved);
}

TEST_CASE("tiered: via_matmul's generic matmul and its specialized one give the same bits",
          "[autotune][conv_via_matmul][tiered]") {
  if (!jit_here()) return;
  set_tune(false);
  const jit_mode saved = get_jit_mode();
  set_jit_mode(jit_mode::tiered);
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(1024);
  conv_case c({1, 28, 28, 32, 64}, true);
  post_ops ops;
  ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  c.set_post_ops(ops);
  // Made before any entry: the direct convolution (its generic kernel may
  // serve it first); an entry installed later never changes its code.
  refresh_descriptors();
  const convolution_forward direct(c.pd());
  CHECK(impl_name(direct.get_primitive_desc()) == "jit:conv");
  const auto pd = via_pd(c);
  REQUIRE(impl_name(pd) == kVia);
  const convolution_forward p(pd);
  const std::vector<float> early = c.run(p);
  const bool was_generic = !p.specialized();
  p.wait_until_specialized();
  CHECK(p.specialized());
  const std::vector<float> late = c.run(p);
  if (!was_generic) WARN("the specialized matmul was in before the first run");
  CHECK(std::memcmp(early.data(), late.data(), early.size() * sizeof(float)) == 0);
  c.check(late);
  // The direct primitive still runs the direct convolution, right.
  CHECK(impl_name(direct.get_primitive_desc()) == "jit:conv");
  c.check(c.run(direct));
  set_jit_mode(saved);
}

TEST_CASE("a table entry naming jit:conv (via_matmul lost) keeps the direct convolution",
          "[autotune][conv_via_matmul]") {
  if (!jit_here()) return;
  set_tune(false);
  conv_case c({1, 7, 7, 64, 32}, true);
  const named_winner w(c, "jit:conv");
  CHECK(w.first == "jit:conv");
  const auto pd = c.pd();
  CHECK(impl_name(pd) == "jit:conv");
  c.check(c.run(convolution_forward(pd)));
}

TEST_CASE("tuning measures via_matmul beside the direct convolution and records the faster",
          "[autotune][conv_via_matmul][tuning]") {
  if (!jit_here()) return;
  set_tune(false);
  global_tune_table().clear();
  refresh_descriptors();
  // The direct default, via_matmul's default (each other implementation's
  // default is always measured), and two more.
  set_tune_max_nconfigs(4);
  std::vector<tune_progress_event> events;
  set_tune_progress_listener([&](const tune_progress_event& e) { events.push_back(e); });
  conv_case c({1, 14, 14, 128, 64}, true);
  const auto before = c.pd();
  REQUIRE(impl_name(before) == "jit:conv");
  const convolution_forward first(before);
  const tune_stats s0 = get_tune_stats();
  set_tune(true);
  c.check(c.run(first));  // tunes, then runs as it was made
  set_tune(false);
  set_tune_progress_listener({});
  const tune_stats s1 = get_tune_stats();
  CHECK(s1.tuned == s0.tuned + 1);
  CHECK(s1.wrong_candidates == s0.wrong_candidates);
  CHECK(s1.failed == s0.failed);
  REQUIRE(!events.empty());
  CHECK(events.back().total >= 2);
  const std::string device = tune_device_of(cpu());
  auto entry = global_tune_table().find(device, backend::impl_of(before).problem_key());
  REQUIRE(entry);
  INFO("winner " << entry->implementation << " " << entry->config);
  CHECK((entry->implementation == "jit:conv" || entry->implementation == kVia));
  // The next descriptor is the winner's, and is not tuned again.
  const auto after = c.pd();
  CHECK(impl_name(after) == entry->implementation);
  REQUIRE(backend::impl_of(after).config());
  CHECK(backend::impl_of(after).config()->to_json() == entry->config);
  set_tune(true);
  const convolution_forward tuned(after);
  c.check(c.run(tuned));
  CHECK(get_tune_stats().tuned == s1.tuned);
  set_tune(false);
  set_tune_max_nconfigs(40);
  global_tune_table().clear();
  refresh_descriptors();
}
