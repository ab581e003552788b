#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "guarded_bytes.hpp"
#include "jit/object_symbols.hpp"
#include "kernels/eltwise_config.hpp"
#include "kernels/eltwise_kernel.hpp"
#include "naive_reference.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primcache/tensor/memory_desc.hpp"
#include "primcache/tensor/numeric.hpp"
#include "test_isas.hpp"

// Tolerances. The kernel computes in f32 with the polynomial helpers of
// jit/ir_math.hpp, whose documented worst errors are at most 4.9 ulp
// (gelu_erf); the reference computes in double and rounds once (0.5 ulp). So
// f32 results may differ by 8 ulp of the reference value. Two terms add an
// absolute allowance:
// - linear and binary additions round a product and a sum in f32 where the
//   reference rounds once, so the error is a few ulp of the largest term,
//   not of the (possibly cancelled) result: 4 * 2^-24 * sum of |terms|;
// - in the far negative tails of the gelus the double reference itself
//   cancels (1 + erf(x) and 1 + tanh(x) lose every digit below ~1e-16),
//   so results under 1e-12 in magnitude are compared absolutely.
// bf16 destinations round an f32 value that may already differ by 8 ulp, so
// the result may land one bf16 ulp (2^-7 relative) away.
// NaN must give NaN and infinities must match exactly.

namespace {

using cpu_test::test_isas;
using primcache::cpu_isa;
using primcache::data_type;
using primcache::format_tag;
using primcache::memory_desc;
namespace ci = primcache::cpu_internal;
using ci::eltwise_alg;

// Byte comparison that reports a bool, not two dumps of whole buffers.
bool same_bytes(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  return a == b;
}

primcache::thread_pool& pool() {
  static primcache::thread_pool p(2);
  return p;
}

const char* name_of(eltwise_alg a) {
  switch (a) {
    case eltwise_alg::relu: return "relu";
    case eltwise_alg::gelu_erf: return "gelu_erf";
    case eltwise_alg::gelu_tanh: return "gelu_tanh";
    case eltwise_alg::tanh: return "tanh";
    case eltwise_alg::sigmoid: return "sigmoid";
    case eltwise_alg::exp: return "exp";
    case eltwise_alg::linear: return "linear";
    case eltwise_alg::clip: return "clip";
  }
  return "?";
}

// Physical buffer values (padding included): mostly in [-range, range],
// with specials, tiny and huge values mixed in.
std::vector<float> random_values(std::size_t n, float range, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> val(-range, range);
  const float specials[] = {0.f,
                            -0.f,
                            1e-30f,
                            -1e-30f,
                            1e30f,
                            -1e30f,
                            88.f,
                            -88.f,
                            100.f,
                            -100.f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> v(n);
  for (auto& x : v) x = (rng() % 10 == 0) ? specials[rng() % std::size(specials)] : val(rng);
  return v;
}

std::vector<std::byte> buffer_of(const memory_desc& md, const std::vector<float>& values) {
  std::vector<std::byte> buf(md.size_bytes());
  const std::size_t n = md.size_bytes() / primcache::size_of(md.data_type());
  for (std::size_t i = 0; i < n; ++i) {
    const float x = values[i % values.size()];
    if (md.data_type() == data_type::f32) {
      std::memcpy(buf.data() + 4 * i, &x, 4);
    } else {
      const std::uint16_t h = primcache::f32_to_bf16(x);
      std::memcpy(buf.data() + 2 * i, &h, 2);
    }
  }
  return buf;
}

float element(const std::vector<std::byte>& buf, data_type dt, std::int64_t i) {
  if (dt == data_type::f32) {
    float x;
    std::memcpy(&x, buf.data() + 4 * i, 4);
    return x;
  }
  std::uint16_t h;
  std::memcpy(&h, buf.data() + 2 * i, 2);
  return primcache::bf16_to_f32(h);
}

bool close(float got, float want, data_type dt, float magnitude, bool gelu) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  const float ulp =
      std::nextafter(std::fabs(want), std::numeric_limits<float>::infinity()) - std::fabs(want);
  double tol = 8.0 * ulp + 4.0 * std::ldexp(1.0, -24) * magnitude;
  if (dt == data_type::bf16) tol += std::ldexp(std::fabs(want), -7);
  if (gelu) tol = std::max(tol, 1e-12);
  return std::fabs(static_cast<double>(got) - want) <= tol;
}

std::unique_ptr<ci::eltwise_kernel> make_kernel(const ci::eltwise_problem& p,
                                                const ci::eltwise_config& c, cpu_isa isa) {
  auto k = ci::eltwise_kernel::create(p, c, isa);
  INFO((k ? std::string() : k.why().message));
  REQUIRE(k.has_value());
  return std::move(k).value();
}

struct operands {
  std::vector<std::vector<float>> values;
  std::vector<const float*> pointers;
};

operands operands_for(const ci::eltwise_problem& p) {
  operands o;
  for (const auto& op : p.post_ops) {
    if (op.what != ci::post_op::kind::binary_add) continue;
    const std::size_t n = op.binary.broadcast == ci::binary_broadcast::scalar ? 1
                          : op.binary.broadcast == ci::binary_broadcast::per_channel
                              ? static_cast<std::size_t>(p.dst.padded_dims()[1])
                              : p.dst.size_bytes() / primcache::size_of(p.dst.data_type());
    const auto idx = static_cast<std::size_t>(op.binary.arg_index);
    if (o.values.size() <= idx) o.values.resize(idx + 1);
    o.values[idx] = random_values(n, 4.f, 99 + static_cast<std::uint32_t>(idx));
    for (auto& v : o.values[idx]) {
      if (!std::isfinite(v) || std::fabs(v) > 1e20f) v = 1.5f;  // finite operands
    }
  }
  for (const auto& v : o.values) o.pointers.push_back(v.data());
  return o;
}

struct outcome {
  std::vector<std::byte> got;
  std::vector<std::byte> want;
  std::vector<float> src_values;
  std::vector<std::byte> src;
};

outcome run_both(const ci::eltwise_kernel& k, const ci::eltwise_problem& p, float range,
                 std::uint32_t seed) {
  outcome r;
  r.src_values = random_values(4099, range, seed);
  r.src = buffer_of(p.src, r.src_values);
  const auto& src = r.src;
  auto ops = operands_for(p);
  r.got.assign(p.dst.size_bytes(), std::byte{0x5a});
  r.want = r.got;
  k.execute({src.data(), r.got.data(), ops.pointers.data()}, nullptr, pool());
  cpu_test::naive_eltwise(p, {src.data(), r.want.data(), ops.pointers.data()});
  return r;
}

// Compares got and want element by element with the tolerances above.
void check_close(const ci::eltwise_problem& p, const outcome& r) {
  const std::size_t n = p.dst.size_bytes() / primcache::size_of(p.dst.data_type());
  bool gelu = p.op.alg == eltwise_alg::gelu_erf || p.op.alg == eltwise_alg::gelu_tanh;
  float magnitude_terms = 0.f;
  for (const auto& op : p.post_ops) {
    if (op.what == ci::post_op::kind::binary_add) magnitude_terms += 4.f;
    if (op.what == ci::post_op::kind::eltwise &&
        (op.eltwise.alg == eltwise_alg::gelu_erf || op.eltwise.alg == eltwise_alg::gelu_tanh)) {
      gelu = true;
    }
  }
  int failures = 0;
  for (std::size_t i = 0; i < n && failures < 5; ++i) {
    const float got = element(r.got, p.dst.data_type(), static_cast<std::int64_t>(i));
    const float want = element(r.want, p.dst.data_type(), static_cast<std::int64_t>(i));
    float magnitude = std::fabs(want) + magnitude_terms;
    if (p.op.alg == eltwise_alg::linear) {
      magnitude += std::fabs(p.op.beta) + std::fabs(p.op.alpha) * 1e3f;
    }
    // At x = -inf the double reference of relu (alpha 0) and of the gelus
    // computes -inf * 0 = NaN; the kernel gives 0, the function's limit
    // there (reported to the post-ops owner).
    const float x = element(r.src, p.src.data_type(), static_cast<std::int64_t>(i));
    const bool limit_at_neg_inf =
        std::isinf(x) && x < 0 && std::isnan(want) && (!p.post_ops.empty() || got == 0.f);
    if (!limit_at_neg_inf && !close(got, want, p.dst.data_type(), magnitude, gelu)) {
      ++failures;
      FAIL_CHECK("element " << i << ": got " << got << ", want " << want);
    }
  }
  CHECK(failures == 0);
}

ci::eltwise_problem problem(const memory_desc& src, const memory_desc& dst, ci::eltwise_op op,
                            int nthr = 1) {
  ci::eltwise_problem p;
  p.src = src;
  p.dst = dst;
  p.op = op;
  p.nthr = nthr;
  return p;
}

const std::vector<eltwise_alg> all_algs = {
    eltwise_alg::relu,    eltwise_alg::gelu_erf, eltwise_alg::gelu_tanh, eltwise_alg::tanh,
    eltwise_alg::sigmoid, eltwise_alg::exp,      eltwise_alg::linear,    eltwise_alg::clip};

}  // namespace

TEST_CASE("eltwise computes every algorithm like the reference, inf and NaN included",
          "[cpu][eltwise]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const auto alg = GENERATE_COPY(from_range(all_algs));
  const float range = GENERATE(10.f, 100.f);
  const int nthr = GENERATE(1, 2);
  INFO(name_of(alg) << " range " << range << " isa " << primcache::to_string(isa));
  ci::eltwise_op op{alg, 0.f, 0.f, 1.f};
  if (alg == eltwise_alg::linear) op = {alg, 1.5f, -0.25f, 1.f};
  if (alg == eltwise_alg::clip) op = {alg, -2.f, 3.5f, 1.f};
  for (auto dims : {std::vector<std::int64_t>{2, 19, 5, 7}, std::vector<std::int64_t>{1},
                    std::vector<std::int64_t>{1031}, std::vector<std::int64_t>{3, 1, 1, 13}}) {
    const auto tag = dims.size() == 1 ? format_tag::a : format_tag::nchw;
    memory_desc md(dims, data_type::f32, tag);
    auto p = problem(md, md, op, nthr);
    auto k = make_kernel(p, ci::default_eltwise_config(p, isa), isa);
    check_close(p, run_both(*k, p, range, 17));
  }
}

TEST_CASE("eltwise honours alpha, beta and the output scale", "[cpu][eltwise][params]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  memory_desc md({3, 37, 4, 4}, data_type::f32, format_tag::nhwc);
  SECTION("relu with a negative slope") {
    const float alpha = GENERATE(0.1f, -0.5f, 2.f);
    auto p = problem(md, md, {eltwise_alg::relu, alpha, 0.f, 1.f}, 2);
    auto k = make_kernel(p, ci::default_eltwise_config(p, isa), isa);
    auto r = run_both(*k, p, 50.f, 3);
    CHECK(same_bytes(r.got, r.want));  // one multiply, as in the reference: exact
  }
  SECTION("linear, clip and a scale") {
    for (ci::eltwise_op op : {ci::eltwise_op{eltwise_alg::linear, -3.f, 7.f, 1.f},
                              ci::eltwise_op{eltwise_alg::clip, 0.f, 6.f, 0.5f},
                              ci::eltwise_op{eltwise_alg::tanh, 0.f, 0.f, 2.f}}) {
      auto p = problem(md, md, op, 1);
      auto k = make_kernel(p, ci::default_eltwise_config(p, isa), isa);
      check_close(p, run_both(*k, p, 10.f, 4));
    }
  }
}

TEST_CASE("eltwise on a padded blocked layout keeps the padding zero", "[cpu][eltwise][padding]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const auto tag = GENERATE(format_tag::nChw16c, format_tag::nChw8c, format_tag::OIhw16i16o);
  const int nthr = GENERATE(1, 2);
  memory_desc md({2, 17, 3, 5}, data_type::f32, tag);
  // sigmoid(0) = 0.5 and exp(0) = 1: padding computed as f(0) would show.
  for (auto alg : {eltwise_alg::sigmoid, eltwise_alg::exp}) {
    auto p = problem(md, md, {alg, 0.f, 0.f, 1.f}, nthr);
    auto k = make_kernel(p, ci::default_eltwise_config(p, isa), isa);
    auto r = run_both(*k, p, 5.f, 8);
    check_close(p, r);
    std::int64_t padding_checked = 0;
    for (std::int64_t n = 0; n < 2; ++n) {
      for (std::int64_t c = 17; c < md.padded_dims()[1]; ++c) {
        for (std::int64_t h = 0; h < 3; ++h) {
          for (std::int64_t w = 0; w < 5; ++w) {
            const std::int64_t i = md.offset_of({n, c, h, w});
            if (tag == format_tag::OIhw16i16o && n >= 2) continue;
            CHECK(element(r.got, data_type::f32, i) == 0.f);
            ++padding_checked;
          }
        }
      }
    }
    CHECK(padding_checked > 0);
  }
}

TEST_CASE("eltwise on padded blocks walks them as whole vectors with the same results",
          "[cpu][eltwise][padding]") {
  // The specialized walk takes the blocks of a padded blocked layout and
  // the pixels after them as one loop (batch_padded_block): vectors across
  // blocks, masked by each lane's place in its block where the block is
  // padded. Every configuration gives the bits of the default's, the
  // padding zero, operands of every broadcast but per-channel (which keeps
  // the channels apart) included.
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const auto tag = GENERATE(format_tag::nChw8c, format_tag::nChw16c);
  const std::int64_t channels = GENERATE(3, 20);
  const auto dt = GENERATE(data_type::f32, data_type::bf16);
  memory_desc md({2, channels, 3, 5}, dt, tag);
  ci::post_op add_full, add_scalar, relu;
  add_full.what = add_scalar.what = ci::post_op::kind::binary_add;
  add_full.binary = {0, ci::binary_broadcast::none};
  add_scalar.binary = {1, ci::binary_broadcast::scalar};
  relu.eltwise = {eltwise_alg::relu, 0.f, 0.f, 1.f};
  auto p = problem(md, md, {eltwise_alg::sigmoid, 0.f, 0.f, 1.f}, 2);
  p.post_ops = {add_full, relu, add_scalar};
  auto plan = ci::eltwise_walk_plan(p);
  REQUIRE(plan);
  CHECK(plan.value().loops.back().period == (tag == format_tag::nChw8c ? 8 : 16));
  auto def = make_kernel(p, ci::default_eltwise_config(p, isa), isa);
  const auto base = run_both(*def, p, 6.f, 9);
  check_close(p, base);
  for (std::int64_t i = 0; i < md.dims()[0] * md.padded_dims()[1] * 15; ++i) {
    const std::int64_t c = i / 15 % md.padded_dims()[1];
    if (c < channels) continue;
    const std::int64_t off = md.offset_of({i / 15 / md.padded_dims()[1], c, i % 15 / 5, i % 5});
    CHECK(element(base.got, dt, off) == 0.f);
  }
  // Vectors narrower than a block and across several; chunks that end
  // inside a run of blocks.
  for (const ci::eltwise_config& c :
       {ci::eltwise_config{4, 1, 0}, ci::eltwise_config{8, 3, 24}, ci::eltwise_config{32, 1, 24},
        ci::eltwise_config{64, 3, 0}}) {
    INFO("lanes " << c.vector_lanes << " unroll " << c.unroll << " chunk " << c.chunk);
    auto k = make_kernel(p, c, isa);
    CHECK(same_bytes(run_both(*k, p, 6.f, 9).got, base.got));
  }
}

TEST_CASE("eltwise with a per-channel operand on padded blocks clips its vectors to the real lanes",
          "[cpu][eltwise][padding]") {
  // A per-channel operand keeps the channels apart (no block stream): the
  // vectors of a padded block are clipped to their real channels (masked
  // loads of src and of every operand, zero stored into the padding)
  // instead of walked element by element. The operand holds the real
  // channels only, up to an inaccessible page: a read of a padding
  // channel's value would fault.
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const auto tag = GENERATE(format_tag::nChw8c, format_tag::nChw16c);
  const std::int64_t channels = GENERATE(3, 20);
  memory_desc md({2, channels, 3, 5}, data_type::f32, tag);
  ci::post_op add_channel, add_full;
  add_channel.what = add_full.what = ci::post_op::kind::binary_add;
  add_channel.binary = {0, ci::binary_broadcast::per_channel};
  add_full.binary = {1, ci::binary_broadcast::none};
  auto p = problem(md, md, {eltwise_alg::sigmoid, 0.f, 0.f, 1.f}, 2);
  p.post_ops = {add_channel, add_full};
  auto plan = ci::eltwise_walk_plan(p);
  REQUIRE(plan);
  CHECK(plan.value().loops.back().period == 0);
  const auto src = buffer_of(md, random_values(4099, 6.f, 12));
  std::vector<float> per_channel(static_cast<std::size_t>(channels));
  for (std::size_t c = 0; c < per_channel.size(); ++c)
    per_channel[c] = 0.25f * static_cast<float>(c);
  const auto full = random_values(md.size_bytes() / 4, 2.f, 13);
  std::vector<float> full_finite = full;
  for (auto& v : full_finite) v = std::isfinite(v) && std::fabs(v) < 1e20f ? v : 1.f;
  const float* ops[] = {per_channel.data(), full_finite.data()};
  std::vector<std::byte> want(md.size_bytes(), std::byte{0x5a});
  cpu_test::naive_eltwise(p, {src.data(), want.data(), ops});
  for (const ci::eltwise_config& c :
       {ci::default_eltwise_config(p, isa), ci::eltwise_config{4, 1, 0},
        ci::eltwise_config{8, 2, 0}, ci::eltwise_config{16, 1, 0}}) {
    INFO("lanes " << c.vector_lanes << " unroll " << c.unroll);
    auto k = make_kernel(p, c, isa);
    // The operand ends where an inaccessible page starts: a read of a
    // padding channel's value faults.
    cpu_test::guarded_bytes exact(per_channel.size() * sizeof(float));
    std::memcpy(exact.data(), per_channel.data(), exact.size());
    const float* exact_ops[] = {reinterpret_cast<const float*>(exact.data()), full_finite.data()};
    std::vector<std::byte> got(md.size_bytes(), std::byte{0x5a});
    k->execute({src.data(), got.data(), exact_ops}, nullptr, pool());
    outcome r{got, want, {}, src};
    check_close(p, r);
  }
}

TEST_CASE("eltwise reads and writes bf16", "[cpu][eltwise][bf16]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const auto [st, dt] = GENERATE(std::pair{data_type::bf16, data_type::bf16},
                                 std::pair{data_type::f32, data_type::bf16},
                                 std::pair{data_type::bf16, data_type::f32});
  const auto alg = GENERATE(eltwise_alg::gelu_erf, eltwise_alg::relu, eltwise_alg::sigmoid);
  const std::vector<std::int64_t> dims = {2, 21, 3, 3};
  auto p = problem(memory_desc(dims, st, format_tag::nChw16c),
                   memory_desc(dims, dt, format_tag::nChw16c), {alg, 0.f, 0.f, 1.f}, 2);
  auto k = make_kernel(p, ci::default_eltwise_config(p, isa), isa);
  check_close(p, run_both(*k, p, 8.f, 21));
}

TEST_CASE("eltwise applies every post-op", "[cpu][eltwise][post_ops]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const auto tag = GENERATE(format_tag::nchw, format_tag::nhwc, format_tag::nChw16c);
  memory_desc md({2, 19, 3, 4}, data_type::f32, tag);
  ci::post_op_chain chain;
  SECTION("eltwise post-ops of every algorithm") {
    for (auto alg : all_algs) {
      ci::post_op op;
      op.eltwise = {alg, alg == eltwise_alg::clip ? -1.f : 0.5f, 2.f, 0.75f};
      chain = {op};
      auto p = problem(md, md, {eltwise_alg::tanh, 0.f, 0.f, 1.f}, 2);
      p.post_ops = chain;
      INFO("post-op " << name_of(alg));
      auto k = make_kernel(p, ci::default_eltwise_config(p, isa), isa);
      check_close(p, run_both(*k, p, 6.f, 5));
    }
  }
  SECTION("binary additions of each broadcast kind, mixed with eltwise") {
    ci::post_op add_full, add_channel, add_scalar, relu;
    add_full.what = add_channel.what = add_scalar.what = ci::post_op::kind::binary_add;
    add_full.binary = {0, ci::binary_broadcast::none};
    add_channel.binary = {2, ci::binary_broadcast::per_channel};
    add_scalar.binary = {1, ci::binary_broadcast::scalar};
    relu.eltwise = {eltwise_alg::relu, 0.f, 0.f, 1.f};
    auto p = problem(md, md, {eltwise_alg::gelu_tanh, 0.f, 0.f, 1.f}, 2);
    p.post_ops = {add_full, relu, add_channel, add_scalar};
    auto k = make_kernel(p, ci::default_eltwise_config(p, isa), isa);
    check_close(p, run_both(*k, p, 6.f, 6));
  }
}

TEST_CASE("eltwise configurations give different code and the same results",
          "[cpu][eltwise][config]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  const auto tag = GENERATE(format_tag::nchw, format_tag::nChw16c);
  memory_desc md({2, 35, 9, 10}, data_type::f32, tag);
  auto p = problem(md, md, {eltwise_alg::gelu_erf, 0.f, 0.f, 1.f}, 2);
  auto def = make_kernel(p, ci::default_eltwise_config(p, isa), isa);
  const auto base = run_both(*def, p, 8.f, 2);
  check_close(p, base);
  auto candidates = ci::eltwise_config_variants(p, isa);
  REQUIRE(candidates.size() >= 3);
  std::vector<std::vector<std::byte>> objects{def->object()};
  for (const auto& c : candidates) {
    INFO("lanes " << c.vector_lanes << " unroll " << c.unroll << " chunk " << c.chunk);
    auto k = make_kernel(p, c, isa);
    for (const auto& o : objects) CHECK_FALSE(same_bytes(o, k->object()));
    objects.push_back(k->object());
    // The same lane-wise polynomials whatever the vector width: same bits.
    CHECK(same_bytes(run_both(*k, p, 8.f, 2).got, base.got));
  }
}

TEST_CASE("an eltwise kernel loaded from its captured object computes the same bits",
          "[cpu][eltwise][load]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  memory_desc md({2, 17, 5, 5}, data_type::f32, format_tag::nChw16c);
  auto p = problem(md, md, {eltwise_alg::sigmoid, 0.f, 0.f, 1.f}, 2);
  const auto config = ci::default_eltwise_config(p, isa);
  auto compiled = make_kernel(p, config, isa);
  auto loaded = ci::eltwise_kernel::load(p, config, compiled->object());
  REQUIRE(loaded.has_value());
  CHECK(same_bytes(run_both(*loaded.value(), p, 9.f, 12).got, run_both(*compiled, p, 9.f, 12).got));
  SECTION("corrupt bytes are refused") {
    std::vector<std::byte> junk(64, std::byte{7});
    CHECK_FALSE(ci::eltwise_kernel::load(p, config, junk).has_value());
  }
}

TEST_CASE("eltwise objects import nothing outside the allowlist", "[cpu][eltwise][symbols]") {
  const auto isa = GENERATE_COPY(from_range(test_isas()));
  memory_desc md({2, 17, 5, 5}, data_type::bf16, format_tag::nChw16c);
  for (auto alg : all_algs) {
    auto p = problem(md, md, {alg, 0.5f, 1.f, 1.f});
    auto k = make_kernel(p, ci::default_eltwise_config(p, isa), isa);
    auto undefined = ci::undefined_symbols(k->object());
    REQUIRE(undefined.has_value());
    for (const auto& name : undefined.value()) {
      INFO(name_of(alg) << ": " << name);
      CHECK(ci::is_allowed_external_symbol(name));
    }
  }
}

TEST_CASE("eltwise refuses invalid problems and configurations", "[cpu][eltwise][errors]") {
  const cpu_isa isa = primcache::effective_isa();
  const memory_desc nchw({2, 3, 4, 5}, data_type::f32, format_tag::nchw);
  const ci::eltwise_op relu{eltwise_alg::relu, 0.f, 0.f, 1.f};
  auto expect_failure = [&](const ci::eltwise_problem& p, primcache::status code,
                            const std::string& fragment,
                            ci::eltwise_config c = ci::eltwise_config{}) {
    auto k = ci::eltwise_kernel::create(p, c, isa);
    REQUIRE_FALSE(k.has_value());
    CHECK(k.why().code == code);
    CHECK_THAT(k.why().message, Catch::Contains(fragment));
  };
  SECTION("different layouts are not implemented") {
    expect_failure(problem(nchw, memory_desc({2, 3, 4, 5}, data_type::f32, format_tag::nhwc), relu),
                   primcache::status::unimplemented, "different layouts");
  }
  SECTION("integer data types are not implemented") {
    memory_desc s8({2, 3, 4, 5}, data_type::s8, format_tag::nchw);
    expect_failure(problem(s8, s8, relu), primcache::status::unimplemented, "f32 and bf16");
  }
  SECTION("descriptors without a layout, or with other dims") {
    expect_failure(problem(memory_desc({2, 3, 4, 5}, data_type::f32, format_tag::any), nchw, relu),
                   primcache::status::invalid_arguments, "no resolved layout");
    expect_failure(problem(nchw, memory_desc({2, 3, 4, 6}, data_type::f32, format_tag::nchw), relu),
                   primcache::status::invalid_arguments, "different dims");
    expect_failure(problem(nchw, memory_desc(), relu), primcache::status::invalid_arguments,
                   "no resolved layout");
  }
  SECTION("zero or negative thread counts") {
    expect_failure(problem(nchw, nchw, relu, 0), primcache::status::invalid_arguments, "nthr");
    expect_failure(problem(nchw, nchw, relu, -1), primcache::status::invalid_arguments, "nthr");
  }
  SECTION("unknown algorithms and malformed post-ops") {
    expect_failure(problem(nchw, nchw, {static_cast<eltwise_alg>(42), 0.f, 0.f, 1.f}),
                   primcache::status::invalid_arguments, "algorithm");
    auto p = problem(nchw, nchw, relu);
    ci::post_op add;
    add.what = ci::post_op::kind::binary_add;
    add.binary = {-1, ci::binary_broadcast::none};
    p.post_ops = {add};
    expect_failure(p, primcache::status::invalid_arguments, "operand index");
    memory_desc flat({7}, data_type::f32, format_tag::a);
    auto q = problem(flat, flat, relu);
    add.binary = {0, ci::binary_broadcast::per_channel};
    q.post_ops = {add};
    expect_failure(q, primcache::status::invalid_arguments, "per channel");
    add.binary = {0, static_cast<ci::binary_broadcast>(9)};
    p.post_ops = {add};
    expect_failure(p, primcache::status::invalid_arguments, "broadcast");
  }
  SECTION("bad configurations") {
    auto p = problem(nchw, nchw, relu);
    ci::eltwise_config c;
    c.vector_lanes = 3;
    expect_failure(p, primcache::status::invalid_arguments, "vector_lanes", c);
    c = {};
    c.unroll = 9;
    expect_failure(p, primcache::status::invalid_arguments, "unroll", c);
    c = {};
    c.chunk = -5;
    expect_failure(p, primcache::status::invalid_arguments, "chunk", c);
  }
}
