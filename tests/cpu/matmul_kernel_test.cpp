#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "jit/object_symbols.hpp"
#include "kernels/matmul_config.hpp"
#include "kernels/matmul_kernel.hpp"
#include "naive_reference.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/keyhash/key.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "test_isas.hpp"

namespace {

using cpu_test::test_isas;
using primcache::cpu_isa;
namespace ci = primcache::cpu_internal;
using ci::binary_broadcast;
using ci::eltwise_alg;
using ci::matmul_config;
using ci::matmul_kernel;
using ci::matmul_problem;

primcache::thread_pool& test_pool() {
  static primcache::thread_pool pool(2);
  return pool;
}

// 64-byte aligned scratch of a kernel's size.
struct scratch {
  explicit scratch(std::size_t bytes) : buf(bytes + 64) {}
  void* get() {
    auto at = reinterpret_cast<std::uintptr_t>(buf.data());
    return buf.data() + ((64 - at % 64) % 64);
  }
  std::vector<std::byte> buf;
};

std::int64_t extent(const matmul_problem& p, const std::array<std::int64_t, 3>& s, std::int64_t d1,
                    std::int64_t d2) {
  return (p.batch - 1) * s[0] + (d1 - 1) * s[1] + (d2 - 1) * s[2] + 1;
}

// The tensors of one problem, filled with values in [-1, 1], and the
// reference result.
struct tensors {
  explicit tensors(const matmul_problem& p, std::uint32_t seed = 1) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    auto fill = [&](std::vector<float>& v, std::int64_t n) {
      v.resize(static_cast<std::size_t>(n));
      for (float& x : v) x = dist(gen);
    };
    fill(src, extent(p, p.src_strides, p.m, p.k));
    fill(wei, extent(p, p.wei_strides, p.k, p.n));
    fill(bias, p.n);
    const std::int64_t dst_size = extent(p, p.dst_strides, p.m, p.n);
    // Operand i serves every binary post-op with arg_index i.
    int operands = 0;
    for (const auto& op : p.post_ops) {
      if (op.what == ci::post_op::kind::binary_add) {
        operands = std::max(operands, op.binary.arg_index + 1);
      }
    }
    binary.resize(static_cast<std::size_t>(operands));
    for (auto& b : binary) fill(b, std::max(dst_size, p.n));
    for (auto& b : binary) binary_ptrs.push_back(b.data());
    // NaN marks dst elements no kernel may write (row padding).
    dst.assign(static_cast<std::size_t>(dst_size), std::nanf(""));
    ref = dst;
    cpu_test::naive_matmul(p, args(ref.data()));
  }
  ci::matmul_args args(float* out) const {
    return {src.data(), wei.data(), bias.data(), out, binary_ptrs.data()};
  }
  std::vector<float> src, wei, bias, dst, ref;
  std::vector<std::vector<float>> binary;
  std::vector<const float*> binary_ptrs;
};

std::vector<float> run(const matmul_kernel& k, const tensors& t) {
  std::vector<float> out = t.dst;
  scratch s(k.scratchpad_bytes());
  k.execute(t.args(out.data()), s.get(), test_pool());
  return out;
}

std::unique_ptr<matmul_kernel> make(const matmul_problem& p, const matmul_config& c, cpu_isa isa) {
  auto k = matmul_kernel::create(p, c, isa);
  INFO((k ? std::string() : k.why().message));
  REQUIRE(k.has_value());
  return std::move(k).value();
}

// Tolerance. The kernel sums K products in f32 with one rounding per fused
// multiply-add, in an order that depends on the blocking: the error of such a
// sum is at most K * u * sum|a_k b_k| (u = 2^-24), and adding the bias and
// binary operands adds u times their magnitudes. The reference sums in double
// (exact enough to count as exact). Post-ops pass the error on scaled by
// their slope (at most about 1.13 for gelu, 1 for tanh/sigmoid/relu/clip,
// |alpha| for linear; exp is used on small arguments only, slope <= e^2) and
// add their own few-ulp error (<= 5 ulp, ir_math.hpp), covered by 8 ulp.
double tolerance(const matmul_problem& p, const tensors& t, std::int64_t b, std::int64_t i,
                 std::int64_t j, double slope) {
  double sum = 0;
  for (std::int64_t k = 0; k < p.k; ++k) {
    sum += std::fabs(t.src[b * p.src_strides[0] + i * p.src_strides[1] + k * p.src_strides[2]] *
                     t.wei[b * p.wei_strides[0] + k * p.wei_strides[1] + j * p.wei_strides[2]]);
  }
  if (p.with_bias) sum += std::fabs(t.bias[j]);
  sum += static_cast<double>(t.binary.size()) * 2.0;  // operands lie in [-1, 1]
  const double u = std::ldexp(1.0, -24);
  const double ref = std::fabs(t.ref[b * p.dst_strides[0] + i * p.dst_strides[1] + j]);
  return slope * (static_cast<double>(p.k) + 2.0) * u * sum + 8.0 * u * ref + 1e-30;
}

double chain_slope(const matmul_problem& p) {
  double s = 1;
  for (const auto& op : p.post_ops) {
    if (op.what != ci::post_op::kind::eltwise) continue;
    double f = 1.13;
    if (op.eltwise.alg == eltwise_alg::linear || op.eltwise.alg == eltwise_alg::relu) {
      f = std::max<double>(1.0, std::fabs(op.eltwise.alpha));
    }
    if (op.eltwise.alg == eltwise_alg::exp) f = 7.4;
    s *= f * std::max<double>(1.0, std::fabs(op.eltwise.scale));
  }
  return s;
}

// Counts elements outside tolerance, and written padding.
struct comparison {
  std::int64_t bad = 0;
  std::int64_t padding_written = 0;
  std::string first;
};
comparison compare(const matmul_problem& p, const tensors& t, const std::vector<float>& got) {
  comparison c;
  const double slope = chain_slope(p);
  std::vector<bool> covered(got.size(), false);
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t i = 0; i < p.m; ++i) {
      for (std::int64_t j = 0; j < p.n; ++j) {
        const std::int64_t off = b * p.dst_strides[0] + i * p.dst_strides[1] + j;
        covered[static_cast<std::size_t>(off)] = true;
        const double want = t.ref[static_cast<std::size_t>(off)];
        const double have = got[static_cast<std::size_t>(off)];
        const bool ok = (std::isnan(want) && std::isnan(have)) ||
                        std::fabs(have - want) <= tolerance(p, t, b, i, j, slope);
        if (!ok && c.bad++ == 0) {
          c.first = "b " + std::to_string(b) + " i " + std::to_string(i) + " j " +
                    std::to_string(j) + ": got " + std::to_string(have) + " want " +
                    std::to_string(want);
        }
      }
    }
  }
  for (std::size_t x = 0; x < got.size(); ++x) {
    if (!covered[x] && !std::isnan(got[x])) ++c.padding_written;
  }
  return c;
}

void check_against_reference(const matmul_problem& p, const matmul_config& cfg, cpu_isa isa,
                             std::uint32_t seed = 1) {
  auto k = make(p, cfg, isa);
  tensors t(p, seed);
  comparison c = compare(p, t, run(*k, t));
  INFO("isa " << primcache::to_string(isa) << " shape " << p.batch << "x" << p.m << "x" << p.n
              << "x" << p.k << " mr " << cfg.mr << " nr " << cfg.nr << " kc " << cfg.kc << " pack "
              << cfg.pack_b << " grid " << cfg.thr_m << "x" << cfg.thr_n);
  INFO(c.first);
  CHECK(c.bad == 0);
  CHECK(c.padding_written == 0);
}

ci::post_op eltwise(eltwise_alg alg, float alpha = 0.f, float beta = 0.f) {
  ci::post_op op;
  op.what = ci::post_op::kind::eltwise;
  op.eltwise = {alg, alpha, beta, 1.f};
  return op;
}
ci::post_op binary(int index, binary_broadcast bcast) {
  ci::post_op op;
  op.what = ci::post_op::kind::binary_add;
  op.binary = {index, bcast};
  return op;
}

}  // namespace

TEST_CASE("matmul kernels match the reference on odd, prime and degenerate shapes",
          "[cpu][matmul]") {
  struct shape {
    std::int64_t batch, m, n, k;
  };
  // Size-1 dims, primes around the vector widths and register blocks, a
  // large K, batches.
  const shape s =
      GENERATE(shape{1, 1, 1, 1}, shape{1, 1, 17, 5}, shape{1, 13, 1, 7}, shape{1, 7, 31, 129},
               shape{1, 64, 64, 64}, shape{2, 17, 53, 31}, shape{3, 1, 97, 11},
               shape{1, 29, 131, 1031}, shape{1, 53, 61, 2}, shape{4, 9, 48, 40});
  const int nthr = GENERATE(1, 2);
  for (cpu_isa isa : test_isas()) {
    matmul_problem p = matmul_problem::dense(s.batch, s.m, s.n, s.k);
    p.nthr = nthr;
    p.with_bias = (s.m + s.n) % 2 == 0;
    check_against_reference(p, ci::default_matmul_config(p, isa), isa);
  }
}

TEST_CASE("matmul kernels match the reference on random shapes", "[cpu][matmul]") {
  std::mt19937 gen(20240611);
  std::uniform_int_distribution<int> small(1, 70);
  for (int trial = 0; trial < 6; ++trial) {
    matmul_problem p = matmul_problem::dense(1 + trial % 3, small(gen), small(gen) * 3,
                                             small(gen) * (trial % 2 ? 7 : 1));
    p.nthr = 1 + trial % 2;
    p.with_bias = trial % 2 == 0;
    for (cpu_isa isa : test_isas()) {
      check_against_reference(p, ci::default_matmul_config(p, isa), isa, trial);
    }
  }
}

TEST_CASE("matmul kernels apply bias and every post-op in the epilogue",
          "[cpu][matmul][post_ops]") {
  struct named {
    const char* name;
    ci::post_op_chain chain;
  };
  const named chain = GENERATE(
      named{"relu", {eltwise(eltwise_alg::relu)}},
      named{"leaky relu", {eltwise(eltwise_alg::relu, 0.1f)}},
      named{"gelu_erf", {eltwise(eltwise_alg::gelu_erf)}},
      named{"gelu_tanh", {eltwise(eltwise_alg::gelu_tanh)}},
      named{"tanh", {eltwise(eltwise_alg::tanh)}},
      named{"sigmoid", {eltwise(eltwise_alg::sigmoid)}},
      named{"linear", {eltwise(eltwise_alg::linear, 0.5f, -1.f)}},
      named{"clip", {eltwise(eltwise_alg::clip, -0.5f, 0.75f)}},
      named{"binary same shape", {binary(0, binary_broadcast::none)}},
      named{"binary per column", {binary(0, binary_broadcast::per_channel)}},
      named{"binary scalar", {binary(0, binary_broadcast::scalar)}},
      named{"chain",
            {binary(1, binary_broadcast::none), eltwise(eltwise_alg::gelu_tanh),
             binary(0, binary_broadcast::per_channel), eltwise(eltwise_alg::linear, 2.f, 0.5f),
             binary(2, binary_broadcast::scalar), eltwise(eltwise_alg::relu)}});
  INFO(chain.name);
  for (cpu_isa isa : test_isas()) {
    // 2-D with padded dst rows and a bias, 3-D without: both with M and N
    // tails.
    matmul_problem p2 = matmul_problem::dense(1, 19, 37, 23);
    p2.dst_strides = {0, 41, 1};
    p2.with_bias = true;
    matmul_problem p3 = matmul_problem::dense(2, 11, 50, 9);
    for (matmul_problem* p : {&p2, &p3}) {
      p->post_ops = chain.chain;
      p->nthr = 2;
      check_against_reference(*p, ci::default_matmul_config(*p, isa), isa);
    }
  }
}

TEST_CASE("matmul kernels take strided, transposed and batch-broadcast operands",
          "[cpu][matmul][layout]") {
  for (cpu_isa isa : test_isas()) {
    const std::int64_t B = 3, M = 10, N = 35, K = 21;
    matmul_problem p = matmul_problem::dense(B, M, N, K);
    p.nthr = 2;
    SECTION("weights transposed (layout ba): packed with gathers") {
      p.wei_strides = {N * K, 1, K};
      check_against_reference(p, ci::default_matmul_config(p, isa), isa);
    }
    SECTION("weights shared by every batch (batch stride 0)") {
      p.wei_strides = {0, N, 1};
      check_against_reference(p, ci::default_matmul_config(p, isa), isa);
      matmul_config c = ci::default_matmul_config(p, isa);
      c.pack_b = !c.pack_b;
      check_against_reference(p, c, isa);
    }
    SECTION("src transposed and dst rows padded, batches interleaved in dst") {
      p.src_strides = {M * K, 1, M};
      p.dst_strides = {N + 3, B * (N + 3), 1};
      check_against_reference(p, ci::default_matmul_config(p, isa), isa);
    }
    SECTION("src broadcast along batch and padded rows") {
      p.src_strides = {0, K + 5, 1};
      check_against_reference(p, ci::default_matmul_config(p, isa), isa);
    }
  }
}

TEST_CASE("non-default matmul configurations give different code and the reference's results",
          "[cpu][matmul][config]") {
  for (cpu_isa isa : test_isas()) {
    matmul_problem p = matmul_problem::dense(2, 45, 83, 150);
    p.with_bias = true;
    p.post_ops = {eltwise(eltwise_alg::tanh), binary(0, binary_broadcast::per_channel)};
    p.nthr = 2;
    const matmul_config def = ci::default_matmul_config(p, isa);
    const auto candidates = ci::matmul_config_variants(p, isa);
    REQUIRE(candidates.size() >= 3);
    std::vector<std::vector<std::byte>> objects = {make(p, def, isa)->object()};
    for (const matmul_config& c : candidates) {
      CHECK_FALSE(c == def);
      check_against_reference(p, c, isa);
      auto k = make(p, c, isa);
      // Thread grids change only the C++ split, not the code.
      if (c.thr_m != def.thr_m && (c.mr == def.mr && c.nr == def.nr && c.kc == def.kc)) continue;
      CHECK(std::find(objects.begin(), objects.end(), k->object()) == objects.end());
      objects.push_back(k->object());
    }
    CHECK(objects.size() >= 4);
  }
}

TEST_CASE("a matmul kernel loaded from its captured object computes bitwise the same",
          "[cpu][matmul][object]") {
  for (cpu_isa isa : test_isas()) {
    matmul_problem p = matmul_problem::dense(2, 23, 70, 45);
    p.with_bias = true;
    p.post_ops = {eltwise(eltwise_alg::gelu_erf), binary(0, binary_broadcast::none)};
    p.nthr = 2;
    const matmul_config c = ci::default_matmul_config(p, isa);
    auto compiled = make(p, c, isa);
    auto loaded = matmul_kernel::load(p, c, compiled->object());
    INFO((loaded ? std::string() : loaded.why().message));
    REQUIRE(loaded.has_value());
    CHECK(loaded.value()->object() == compiled->object());
    tensors t(p);
    const auto a = run(*compiled, t);
    const auto b = run(*loaded.value(), t);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("matmul objects import only allowlisted symbols", "[cpu][matmul][symbols]") {
  for (cpu_isa isa : test_isas()) {
    matmul_problem p = matmul_problem::dense(1, 9, 20, 33);
    p.wei_strides = {0, 1, 33};  // gathers in the packer
    p.with_bias = true;
    p.post_ops = {eltwise(eltwise_alg::gelu_erf),   eltwise(eltwise_alg::gelu_tanh),
                  eltwise(eltwise_alg::sigmoid),    eltwise(eltwise_alg::tanh),
                  eltwise(eltwise_alg::exp),        eltwise(eltwise_alg::clip, -1.f, 1.f),
                  binary(0, binary_broadcast::none)};
    auto k = make(p, ci::default_matmul_config(p, isa), isa);
    auto symbols = ci::undefined_symbols(k->object());
    REQUIRE(symbols.has_value());
    for (const std::string& s : symbols.value()) {
      INFO(s);
      CHECK(ci::is_allowed_external_symbol(s));
    }
  }
}

TEST_CASE("matmul kernels run from many threads at once", "[cpu][matmul][threads]") {
  matmul_problem p = matmul_problem::dense(1, 40, 70, 90);
  p.nthr = 2;
  p.with_bias = true;
  const cpu_isa isa = test_isas().back();
  auto k = make(p, ci::default_matmul_config(p, isa), isa);
  tensors t(p);
  const auto expected = run(*k, t);
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 5; ++rep) results[i] = run(*k, t);
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) {
    CHECK(std::memcmp(r.data(), expected.data(), r.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("a pool smaller than the thread grid still covers every element",
          "[cpu][matmul][threads]") {
  matmul_problem p = matmul_problem::dense(3, 20, 100, 30);
  p.nthr = 6;  // the test pool has 2 threads
  for (cpu_isa isa : test_isas()) {
    matmul_config c = ci::default_matmul_config(p, isa);
    c.thr_m = 3;
    c.thr_n = 2;
    c.nc = c.nr;
    check_against_reference(p, c, isa);
  }
}

TEST_CASE("matmul keys tell problems and configurations apart", "[cpu][matmul][key]") {
  auto key_of = [](const auto& x) {
    primcache::key_writer w;
    x.write_key(w);
    return w.finish();
  };
  matmul_problem a = matmul_problem::dense(1, 8, 16, 32);
  matmul_problem b = a;
  CHECK(key_of(a) == key_of(b));
  b.wei_strides = {0, 1, 32};
  CHECK_FALSE(key_of(a) == key_of(b));
  b = a;
  b.post_ops = {eltwise(eltwise_alg::relu)};
  CHECK_FALSE(key_of(a) == key_of(b));
  matmul_config c1, c2;
  CHECK(key_of(c1) == key_of(c2));
  c2.n_inner = true;
  CHECK_FALSE(key_of(c1) == key_of(c2));
}

TEST_CASE("matmul creation refuses malformed problems, configurations and ISAs",
          "[cpu][matmul][errors]") {
  const cpu_isa isa = cpu_isa::avx2;
  matmul_problem p = matmul_problem::dense(1, 8, 16, 32);
  matmul_config c = ci::default_matmul_config(p, isa);
  auto fails_with = [&](primcache::status code) {
    auto k = matmul_kernel::create(p, c, isa);
    REQUIRE_FALSE(k.has_value());
    INFO(k.why().message);
    CHECK(k.why().code == code);
    CHECK_FALSE(k.why().message.empty());
    // load() checks the problem and configuration before the bytes.
    const std::vector<std::byte> junk(16, std::byte{0});
    CHECK_FALSE(matmul_kernel::load(p, c, junk).has_value());
  };
  using primcache::status;
  SECTION("zero and negative sizes") {
    auto dim = GENERATE(0, 1, 2, 3);
    auto v = GENERATE(0, -5);
    std::int64_t* dims[] = {&p.batch, &p.m, &p.n, &p.k};
    *dims[dim] = v;
    fails_with(status::invalid_arguments);
  }
  SECTION("negative strides") {
    p.src_strides[1] = -1;
    fails_with(status::invalid_arguments);
  }
  SECTION("sizes whose offsets overflow") {
    auto which = GENERATE(0, 1, 2);
    if (which == 0) p.src_strides = {0, std::int64_t{1} << 61, 1};  // (m - 1) * stride overflows
    if (which == 1) {                                               // beyond the byte range
      p.batch = 2;
      p.wei_strides = {std::int64_t{1} << 60, 16, 1};
    }
    if (which == 2) p.batch = p.m = std::int64_t{1} << 40;  // dst offsets overflow
    fails_with(status::invalid_arguments);
  }
  SECTION("dst not dense along n") {
    p.dst_strides = {128, 1, 8};
    fails_with(status::unimplemented);
  }
  SECTION("dst rows that overlap") {
    p.dst_strides = {128, 8, 1};
    fails_with(status::invalid_arguments);
  }
  SECTION("dst batches that overlap") {
    p.batch = 2;
    p.dst_strides = {100, 16, 1};
    fails_with(status::invalid_arguments);
  }
  SECTION("thread counts out of range") {
    p.nthr = GENERATE(0, -1, 100000);
    fails_with(status::invalid_arguments);
  }
  SECTION("a binary post-op with a negative operand index") {
    p.post_ops = {binary(-1, binary_broadcast::scalar)};
    fails_with(status::invalid_arguments);
  }
  SECTION("register blocks the ISA cannot hold") {
    c.nr = GENERATE(0, 12, 64);
    c.mr = 6;
    fails_with(status::invalid_arguments);
  }
  SECTION("cache blocks that are not multiples of the register block") {
    c.mc = c.mr + 1;
    fails_with(status::invalid_arguments);
  }
  SECTION("n cache block not a multiple of nr") {
    c.nc = c.nr + 8;
    fails_with(status::invalid_arguments);
  }
  SECTION("k block and unroll out of range") {
    auto which = GENERATE(0, 1, 2);
    if (which == 0) c.kc = 0;
    if (which == 1) c.k_unroll = 0;
    if (which == 2) c.k_unroll = 17;
    fails_with(status::invalid_arguments);
  }
  SECTION("a thread grid that does not match nthr") {
    c.thr_m = 2;
    c.thr_n = 2;
    fails_with(status::invalid_arguments);
  }
  SECTION("no packing for weights that are not dense along n") {
    p.wei_strides = {0, 1, 32};
    c.pack_b = false;
    fails_with(status::invalid_arguments);
  }
  SECTION("ISAs without AVX2 or beyond the host") {
    auto k = matmul_kernel::create(p, c, cpu_isa::avx);
    REQUIRE_FALSE(k.has_value());
    CHECK(k.why().code == status::unimplemented);
    if (primcache::detected_isa() < primcache::max_known_cpu_isa) {
      auto beyond = static_cast<cpu_isa>(static_cast<int>(primcache::detected_isa()) + 1);
      auto k2 = matmul_kernel::create(p, c, beyond);
      REQUIRE_FALSE(k2.has_value());
      CHECK(k2.why().code == status::unimplemented);
    }
  }
  SECTION("bytes that are not an object") {
    const std::vector<std::byte> junk(100, std::byte{0x5a});
    auto k = matmul_kernel::load(p, c, junk);
    REQUIRE_FALSE(k.has_value());
    CHECK_FALSE(k.why().message.empty());
  }
}

namespace {

// The kernel's run with its weights prepacked by matmul_pack_weights.
std::vector<float> run_prepacked(const matmul_kernel& k, const tensors& t) {
  const ci::matmul_packing pk = ci::matmul_packing::of(k.problem(), k.config());
  std::vector<float> packed(pk.bytes() / sizeof(float), std::nanf(""));
  ci::matmul_pack_weights(pk, t.wei.data(), packed.data(), test_pool());
  // Every float of the packed layout is written (zeros past N).
  CHECK(std::none_of(packed.begin(), packed.end(), [](float x) { return std::isnan(x); }));
  std::vector<float> out = t.dst;
  scratch s(k.scratchpad_bytes());
  ci::matmul_args a = t.args(out.data());
  a.weights = packed.data();
  k.execute(a, s.get(), test_pool());
  return out;
}

// A packing configuration and its prepacked twin: the same blocking, the
// weights read from the prepacked buffer instead of packed per call. The
// micro-kernel sees the same panels in the same order: bitwise equal.
void check_prepacked_twin(matmul_problem p, matmul_config c, cpu_isa isa) {
  c.pack_b = true;
  p.prepacked_weights = false;
  auto packing = make(p, c, isa);
  matmul_problem pp = p;
  pp.prepacked_weights = true;
  matmul_config pc = c;
  pc.pack_b = false;
  auto prepacked = make(pp, pc, isa);
  CHECK(prepacked->scratchpad_bytes() == 0);
  tensors t(p, 7);
  const std::vector<float> want = run(*packing, t);
  const std::vector<float> got = run_prepacked(*prepacked, t);
  INFO("isa " << primcache::to_string(isa) << " shape " << p.batch << "x" << p.m << "x" << p.n
              << "x" << p.k << " mr " << c.mr << " nr " << c.nr << " kc " << c.kc << " nc " << c.nc
              << " grid " << c.thr_m << "x" << c.thr_n);
  REQUIRE(got.size() == want.size());
  CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
  // And the reference agrees (within the f32 bound), padding untouched.
  comparison cmp = compare(p, t, got);
  INFO(cmp.first);
  CHECK(cmp.bad == 0);
  CHECK(cmp.padding_written == 0);
}

}  // namespace

TEST_CASE("prepacked weights give bitwise the results of packing per call",
          "[cpu][matmul][prepacked]") {
  struct shape {
    std::int64_t batch, m, n, k;
  };
  for (cpu_isa isa : test_isas()) {
    for (shape s :
         {shape{1, 1, 1, 1}, shape{1, 7, 13, 5}, shape{1, 49, 200, 37}, shape{1, 1, 300, 129},
          shape{2, 19, 45, 37}, shape{3, 64, 64, 64}, shape{1, 128, 97, 300}}) {
      for (int nthr : {1, 2}) {
        matmul_problem p = matmul_problem::dense(s.batch, s.m, s.n, s.k);
        p.nthr = nthr;
        matmul_config c = ci::default_matmul_config(p, isa);
        check_prepacked_twin(p, c, isa);
        // Other tiles, blocks, unrolls, loop orders and grids.
        for (const matmul_config& v : ci::matmul_config_variants(p, isa)) {
          check_prepacked_twin(p, v, isa);
        }
      }
    }
  }
}

TEST_CASE("prepacked weights: post-ops, bias, transposed and batch-broadcast weights",
          "[cpu][matmul][prepacked]") {
  const cpu_isa isa =
      primcache::effective_isa() >= cpu_isa::avx512_core ? cpu_isa::avx512_core : cpu_isa::avx2;
  // Bias and a chain with every kind of binary operand.
  {
    matmul_problem p = matmul_problem::dense(1, 23, 70, 41);
    p.with_bias = true;
    p.post_ops = {eltwise(eltwise_alg::gelu_erf), binary(0, binary_broadcast::none),
                  binary(1, binary_broadcast::per_channel), eltwise(eltwise_alg::relu, 0.1f),
                  binary(2, binary_broadcast::scalar)};
    p.nthr = 2;
    check_prepacked_twin(p, ci::default_matmul_config(p, isa), isa);
  }
  // Transposed weights (k stride 1, n stride K): packed by columns.
  {
    matmul_problem p = matmul_problem::dense(1, 17, 40, 33);
    p.wei_strides = {0, 1, 33};
    check_prepacked_twin(p, ci::default_matmul_config(p, isa), isa);
  }
  // Weights shared by every batch: one packed copy.
  {
    matmul_problem p = matmul_problem::dense(4, 9, 50, 21);
    p.wei_strides = {0, 50, 1};
    const matmul_config c = ci::default_matmul_config(p, isa);
    CHECK(ci::matmul_packing::of(p, c).batches == 1);
    check_prepacked_twin(p, c, isa);
  }
  // Weights per batch, with padded rows: one packed copy per batch.
  {
    matmul_problem p = matmul_problem::dense(3, 10, 30, 12);
    p.wei_strides = {12 * 40, 40, 1};
    const matmul_config c = ci::default_matmul_config(p, isa);
    CHECK(ci::matmul_packing::of(p, c).batches == 3);
    check_prepacked_twin(p, c, isa);
  }
}

TEST_CASE("prepacked problems: defaults, candidates, keys and refusals",
          "[cpu][matmul][prepacked]") {
  const cpu_isa isa = cpu_isa::avx2;
  matmul_problem p = matmul_problem::dense(1, 64, 96, 80);
  p.prepacked_weights = true;
  const matmul_config def = ci::default_matmul_config(p, isa);
  CHECK_FALSE(def.pack_b);
  CHECK(def.n_inner);  // the packed blocking
  auto space = ci::matmul_config_candidates(p, isa);
  REQUIRE(space.size() > 0);
  for (std::uint64_t i = 0; i < space.size(); i += space.size() / 50 + 1) {
    CHECK_FALSE(space.at(i).pack_b);
    CHECK(ci::validate_matmul_config_for(p, space.at(i), isa).has_value());
  }
  // A configuration that packs is refused: the weights come packed.
  matmul_config packs = def;
  packs.pack_b = true;
  auto bad = ci::matmul_kernel::create(p, packs, isa);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.why().code == primcache::status::invalid_arguments);
  CHECK(bad.why().message.find("prepacked") != std::string::npos);
  // Transposed weights need no packing configuration either.
  matmul_problem t = p;
  t.wei_strides = {0, 1, 80};
  CHECK(ci::matmul_kernel::create(t, ci::default_matmul_config(t, isa), isa).has_value());
  // The flag is in the kernel's key; the packing key names only the weights
  // and nr, so kernels of other M share packed weights.
  primcache::key_writer a, b;
  matmul_problem q = p;
  q.prepacked_weights = false;
  p.write_key(a);
  q.write_key(b);
  CHECK(a.finish() != b.finish());
  matmul_problem other_m = p;
  other_m.m = 3;
  matmul_config c3 = def;
  primcache::key_writer ka, kb;
  ci::matmul_packing::of(p, def).write_key(ka);
  ci::matmul_packing::of(other_m, c3).write_key(kb);
  CHECK(ka.finish() == kb.finish());
  primcache::key_writer kc;
  c3.nr = def.nr == 8 ? 16 : 8;
  ci::matmul_packing::of(other_m, c3).write_key(kc);
  primcache::key_writer kd;
  ci::matmul_packing::of(p, def).write_key(kd);
  CHECK(kc.finish() != kd.finish());
}
