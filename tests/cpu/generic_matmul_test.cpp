// The shape-generic matmul kernel built into the library: bit for bit the
// specialized kernel's results (what makes the tiered swap invisible), and
// the reference's within rounding, over random shapes, strides, batches,
// bias, every post-op and binary broadcast, and prepacked weights.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "aligned_buffer.hpp"
#include "kernels/generic_matmul_kernel.hpp"
#include "kernels/matmul_config.hpp"
#include "kernels/matmul_kernel.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "tiered/generic_code.hpp"

using namespace primcache;
using namespace primcache::cpu_internal;

using cpu_test::aligned_buffer;

namespace {

// Floats a tensor with these strides and sizes spans.
std::int64_t span_of(const std::array<std::int64_t, 3>& strides,
                     const std::array<std::int64_t, 3>& dims) {
  std::int64_t last = 0;
  for (int i = 0; i < 3; ++i) last += (dims[i] - 1) * strides[i];
  return last + 1;
}

struct case_data {
  matmul_problem p;
  std::vector<float> src, wei, bias, dst_init;
  std::vector<std::vector<float>> operands;
  std::int64_t dst_floats = 0;
};

eltwise_op random_eltwise(std::mt19937& rng) {
  std::uniform_int_distribution<int> alg(0, static_cast<int>(eltwise_alg::clip));
  std::uniform_real_distribution<float> v(-1.f, 1.f);
  eltwise_op op;
  op.alg = static_cast<eltwise_alg>(alg(rng));
  op.alpha = (rng() % 3 == 0) ? 0.f : v(rng);
  op.beta = op.alg == eltwise_alg::clip ? std::abs(op.alpha) + 0.5f : v(rng);
  if (op.alg == eltwise_alg::clip) op.alpha = -std::abs(op.alpha);
  op.scale = (rng() % 2 == 0) ? 1.f : 0.5f + v(rng) * 0.25f;
  return op;
}

// A random problem: sizes with tails against every register block, src and
// weights plain or transposed, shared or per-batch weights, padded dst rows,
// bias, a chain of up to three post-ops.
case_data random_case(std::mt19937& rng, bool prepacked) {
  std::uniform_int_distribution<int> size(1, 70);
  case_data d;
  matmul_problem& p = d.p;
  p.batch = 1 + rng() % 3;
  p.m = size(rng);
  p.n = prepacked ? 48 + rng() % 60 : size(rng);
  p.k = size(rng);
  const bool src_t = rng() % 4 == 0, wei_t = rng() % 4 == 0, shared = rng() % 3 == 0;
  p.src_strides = {p.m * p.k, src_t ? 1 : p.k, src_t ? p.m : 1};
  p.wei_strides = {shared ? 0 : p.k * p.n, wei_t ? 1 : p.n, wei_t ? p.k : 1};
  const std::int64_t ldc = p.n + (rng() % 3 == 0 ? 5 : 0);
  p.dst_strides = {p.m * ldc, ldc, 1};
  p.with_bias = rng() % 2 == 0;
  p.nthr = default_thread_pool().size();
  p.prepacked_weights = prepacked;
  const int nops = static_cast<int>(rng() % 4);
  int binaries = 0;
  for (int i = 0; i < nops; ++i) {
    post_op op;
    if (rng() % 3 == 0) {
      op.what = post_op::kind::binary_add;
      op.binary.arg_index = binaries++;
      op.binary.broadcast = static_cast<binary_broadcast>(rng() % 3);
    } else {
      op.eltwise = random_eltwise(rng);
    }
    p.post_ops.push_back(op);
  }
  std::uniform_real_distribution<float> v(-1.f, 1.f);
  auto fill = [&](std::vector<float>& x, std::int64_t n) {
    x.resize(static_cast<std::size_t>(n));
    for (float& f : x) f = v(rng);
  };
  fill(d.src, span_of(p.src_strides, {p.batch, p.m, p.k}));
  fill(d.wei, span_of(p.wei_strides, {p.batch, p.k, p.n}));
  fill(d.bias, p.n);
  d.dst_floats = span_of(p.dst_strides, {p.batch, p.m, p.n});
  fill(d.dst_init, d.dst_floats);  // garbage the kernels must overwrite
  for (const post_op& op : p.post_ops) {
    if (op.what != post_op::kind::binary_add) continue;
    std::vector<float> x;
    const auto bc = op.binary.broadcast;
    fill(x, bc == binary_broadcast::none          ? d.dst_floats
            : bc == binary_broadcast::per_channel ? p.n
                                                  : 1);
    d.operands.push_back(std::move(x));
  }
  return d;
}

template <class Kernel>
std::vector<float> run(const Kernel& k, const case_data& d) {
  const matmul_problem& p = d.p;
  std::vector<float> dst = d.dst_init;
  std::vector<const float*> ops;
  for (const auto& o : d.operands) ops.push_back(o.data());
  std::vector<float> packed;
  matmul_args a;
  a.src = d.src.data();
  a.weights = d.wei.data();
  if (p.prepacked_weights) {
    const matmul_packing pk = matmul_packing::of(p, k.config());
    packed.resize(pk.bytes() / sizeof(float));
    matmul_pack_weights(pk, d.wei.data(), packed.data(), default_thread_pool());
    a.weights = packed.data();
  }
  a.bias = p.with_bias ? d.bias.data() : nullptr;
  a.dst = dst.data();
  a.binary_operands = ops.data();
  aligned_buffer scratch(k.scratchpad_bytes());
  k.execute(a, scratch.p, default_thread_pool());
  return dst;
}

std::string describe(const matmul_problem& p) {
  std::string s = std::to_string(p.batch) + "x" + std::to_string(p.m) + "x" + std::to_string(p.n) +
                  "x" + std::to_string(p.k) + " src_strides " + std::to_string(p.src_strides[1]) +
                  "," + std::to_string(p.src_strides[2]) + " wei_strides " +
                  std::to_string(p.wei_strides[0]) + "," + std::to_string(p.wei_strides[1]) + "," +
                  std::to_string(p.wei_strides[2]) + " ldc " + std::to_string(p.dst_strides[1]) +
                  (p.with_bias ? " bias" : "") + (p.prepacked_weights ? " prepacked" : "") +
                  " post-ops";
  for (const post_op& op : p.post_ops) {
    s += op.what == post_op::kind::binary_add
             ? " add/" + std::to_string(static_cast<int>(op.binary.broadcast))
             : " eltwise/" + std::to_string(static_cast<int>(op.eltwise.alg));
  }
  return s;
}

// Whether the outputs equal bit for bit where dst has elements (padding
// columns are not outputs).
bool same_bits(const matmul_problem& p, const std::vector<float>& x, const std::vector<float>& y) {
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j) {
        const std::int64_t at = b * p.dst_strides[0] + i * p.dst_strides[1] + j;
        if (std::memcmp(&x[at], &y[at], sizeof(float)) != 0) return false;
      }
  return true;
}

std::vector<cpu_isa> isas() {
  std::vector<cpu_isa> out;
  for (cpu_isa isa : {cpu_isa::avx2, effective_isa()}) {
    if (isa >= cpu_isa::avx2 && isa <= effective_isa() &&
        std::find(out.begin(), out.end(), isa) == out.end())
      out.push_back(isa);
  }
  return out;
}

}  // namespace

TEST_CASE("the generic matmul is built in for every ISA the backend generates",
          "[cpu][generic][matmul]") {
  for (cpu_isa isa : isas()) {
    auto code = generic_isa_for(generic_kernel::matmul, isa);
    REQUIRE(code);
    CHECK(generic_matmul_shape_for(code.value()).lanes == matmul_vector_lanes(isa));
    auto fn = generic_function<generic_matmul_function>(generic_kernel::matmul, code.value(),
                                                        generic_matmul_symbol);
    REQUIRE(fn);
    CHECK(fn.value() != nullptr);
  }
}

TEST_CASE("the generic matmul gives the specialized kernel's results bit for bit",
          "[cpu][generic][matmul]") {
  if (isas().empty()) return;  // below avx2: no JIT matmul to compare with
  const bool prepacked = GENERATE(false, true);
  std::mt19937 rng(prepacked ? 77 : 11);
  int compared = 0;
  for (int trial = 0; trial < 24; ++trial) {
    for (cpu_isa isa : isas()) {
      case_data d = random_case(rng, prepacked);
      const matmul_config cfg = default_matmul_config(d.p, isa);
      auto generic = generic_matmul_kernel::create(d.p, cfg, isa);
      if (prepacked && !generic) {
        // Weights packed for another register width: created synchronously.
        CHECK(generic.why().code == status::unimplemented);
        CHECK(cfg.nr != generic_matmul_shape_for(isa).nr());
        continue;
      }
      REQUIRE(generic);
      auto specialized = matmul_kernel::create(d.p, cfg, isa);
      REQUIRE(specialized);
      INFO(std::string(to_string(isa)) + " " + describe(d.p));
      CHECK(same_bits(d.p, run(*generic.value(), d), run(*specialized.value(), d)));
      ++compared;
    }
  }
  CHECK(compared >= 12);
}

TEST_CASE("the generic matmul reads the weights in place where the specialized kernel does",
          "[cpu][generic][matmul]") {
  // A matrix-vector product's weights serve one row block: the specialized
  // kernel reads them in place, and so must the generic one (packing them
  // per call cost it half its speed at 1x4096x4096). Taller problems with
  // far-apart weight rows pack. Both must keep the specialized bits, with
  // column tails read up to N only (the last weights row ends the buffer).
  if (isas().empty()) return;
  struct shape {
    std::int64_t m, n, k;
    bool in_place;
  };
  const shape shapes[] = {{1, 1000, 300, true},
                          {3, 777, 129, true},
                          {2, 40, 7, true},
                          {96, 600, 40, false},
                          {100, 530, 33, false}};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> v(-1.f, 1.f);
  for (cpu_isa isa : isas()) {
    for (const shape& s : shapes) {
      case_data d;
      d.p = matmul_problem::dense(1, s.m, s.n, s.k);
      d.p.nthr = default_thread_pool().size();
      d.p.with_bias = true;
      for (auto* x : {&d.src, &d.wei, &d.bias, &d.dst_init}) {
        const std::int64_t n = x == &d.src    ? s.m * s.k
                               : x == &d.wei  ? s.k * s.n
                               : x == &d.bias ? s.n
                                              : s.m * s.n;
        x->resize(static_cast<std::size_t>(n));
        for (float& f : *x) f = v(rng);
      }
      d.dst_floats = s.m * s.n;
      const matmul_config cfg = default_matmul_config(d.p, isa);
      INFO(std::string(to_string(isa)) + " " + describe(d.p));
      REQUIRE(cfg.pack_b == !s.in_place);
      auto generic = generic_matmul_kernel::create(d.p, cfg, isa);
      REQUIRE(generic);
      CHECK(generic.value()->config().pack_b == cfg.pack_b);
      CHECK((generic.value()->scratchpad_bytes() == 0) == s.in_place);
      auto specialized = matmul_kernel::create(d.p, cfg, isa);
      REQUIRE(specialized);
      CHECK(same_bits(d.p, run(*generic.value(), d), run(*specialized.value(), d)));
    }
  }
}

TEST_CASE("the generic matmul matches the reference for odd shapes and every post-op",
          "[cpu][generic][matmul]") {
  if (isas().empty()) return;
  const int alg = GENERATE(Catch::Generators::range(0, static_cast<int>(eltwise_alg::clip) + 1));
  const auto bc =
      GENERATE(binary_broadcast::none, binary_broadcast::per_channel, binary_broadcast::scalar);
  std::mt19937 rng(static_cast<unsigned>(alg * 7 + static_cast<int>(bc)));
  for (cpu_isa isa : isas()) {
    case_data d = random_case(rng, false);
    d.p.post_ops.clear();
    d.operands.clear();
    post_op e;
    e.eltwise = random_eltwise(rng);
    e.eltwise.alg = static_cast<eltwise_alg>(alg);
    if (e.eltwise.alg == eltwise_alg::clip) {
      e.eltwise.alpha = -0.5f;
      e.eltwise.beta = 0.75f;
    }
    post_op add;
    add.what = post_op::kind::binary_add;
    add.binary.broadcast = bc;
    d.p.post_ops = {e, add};
    std::uniform_real_distribution<float> v(-1.f, 1.f);
    std::vector<float> operand(static_cast<std::size_t>(bc == binary_broadcast::none ? d.dst_floats
                                                        : bc == binary_broadcast::per_channel
                                                            ? d.p.n
                                                            : 1));
    for (float& f : operand) f = v(rng);
    d.operands.push_back(operand);

    auto generic = generic_matmul_kernel::create(d.p, default_matmul_config(d.p, isa), isa);
    REQUIRE(generic);
    const std::vector<float> got = run(*generic.value(), d);
    std::vector<float> want = d.dst_init;
    std::vector<const float*> ops = {d.operands[0].data()};
    matmul_args a{d.src.data(), d.wei.data(), d.p.with_bias ? d.bias.data() : nullptr, want.data(),
                  ops.data()};
    matmul_reference(d.p, a);
    INFO(std::string(to_string(isa)) + " " + describe(d.p));
    int bad = 0;
    for (std::int64_t b = 0; b < d.p.batch; ++b)
      for (std::int64_t i = 0; i < d.p.m; ++i)
        for (std::int64_t j = 0; j < d.p.n; ++j) {
          const std::int64_t at = b * d.p.dst_strides[0] + i * d.p.dst_strides[1] + j;
          const double tol = 2e-5 * static_cast<double>(d.p.k + 1) *
                             std::max(1.0, std::abs(static_cast<double>(want[at])));
          if (!(std::abs(static_cast<double>(got[at]) - want[at]) <= tol)) ++bad;
        }
    CHECK(bad == 0);
  }
}

TEST_CASE("the generic matmul declines what it cannot run identically", "[cpu][generic][matmul]") {
  if (isas().empty()) return;
  const cpu_isa isa = isas().back();
  matmul_problem p = matmul_problem::dense(1, 16, 96, 32);
  p.nthr = 1;
  SECTION("more post-ops than its parameter block holds") {
    p.post_ops.assign(gm_max_post_ops + 1, post_op{});
    auto g = generic_matmul_kernel::create(p, default_matmul_config(p, isa), isa);
    REQUIRE_FALSE(g);
    CHECK(g.why().code == status::unimplemented);
  }
  SECTION("weights prepacked for another register width") {
    p.prepacked_weights = true;
    matmul_config c = default_matmul_config(p, isa);
    c.nr = matmul_vector_lanes(isa);
    c.mr = 1;
    auto g = generic_matmul_kernel::create(p, c, isa);
    REQUIRE_FALSE(g);
    CHECK(g.why().code == status::unimplemented);
    CHECK(g.why().message.find("prepacked") != std::string::npos);
  }
  SECTION("an ISA below avx2") {
    auto g = generic_matmul_kernel::create(p, default_matmul_config(p, isa), cpu_isa::avx);
    REQUIRE_FALSE(g);
    CHECK(g.why().code == status::unimplemented);
  }
}
