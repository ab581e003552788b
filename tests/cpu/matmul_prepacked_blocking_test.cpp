// The default blocking of prepacked (constant) weights: K blocks up to 512
// and an N panel that keeps the panel, the thread's src rows and the dst
// stripe within 768 KiB (matmul_config.cpp, with_blocking); a generic matmul
// that splits K into other blocks (its own 256) gives the specialized
// kernel's results bit for bit, and both match the reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/generic_matmul_kernel.hpp"
#include "kernels/integer_math.hpp"
#include "kernels/matmul_config.hpp"
#include "kernels/matmul_kernel.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/thread_pool.hpp"

using namespace primcache;
using namespace primcache::cpu_internal;

namespace {

std::vector<cpu_isa> isas() {
  std::vector<cpu_isa> out;
  for (cpu_isa isa : {cpu_isa::avx2, effective_isa()}) {
    if (isa >= cpu_isa::avx2 && isa <= effective_isa() &&
        std::find(out.begin(), out.end(), isa) == out.end())
      out.push_back(isa);
  }
  return out;
}

matmul_problem prepacked(std::int64_t m, std::int64_t n, std::int64_t k, int nthr) {
  matmul_problem p = matmul_problem::dense(1, m, n, k);
  p.prepacked_weights = true;
  p.nthr = nthr;
  return p;
}

struct aligned_floats {
  explicit aligned_floats(std::size_t n)
      : p(static_cast<float*>(
            std::aligned_alloc(64, std::max<std::size_t>(64, (n * 4 + 63) / 64 * 64)))) {}
  ~aligned_floats() { std::free(p); }
  aligned_floats(const aligned_floats&) = delete;
  aligned_floats& operator=(const aligned_floats&) = delete;
  float* p;
};

template <class Kernel>
std::vector<float> run(const Kernel& kernel, const matmul_problem& p, const std::vector<float>& src,
                       const std::vector<float>& wei, const std::vector<float>& bias) {
  const matmul_packing pk = matmul_packing::of(p, kernel.config());
  std::vector<float> packed(pk.bytes() / sizeof(float));
  matmul_pack_weights(pk, wei.data(), packed.data(), default_thread_pool());
  std::vector<float> dst(static_cast<std::size_t>(p.m * p.n), std::nanf(""));
  matmul_args a;
  a.src = src.data();
  a.weights = packed.data();
  a.bias = bias.data();
  a.dst = dst.data();
  aligned_floats scratch(kernel.scratchpad_bytes() / sizeof(float) + 1);
  kernel.execute(a, scratch.p, default_thread_pool());
  return dst;
}

}  // namespace

TEST_CASE("prepacked defaults: K blocks up to 512 and a panel that fits L2 with src and dst",
          "[cpu][matmul][prepacked]") {
  struct shape {
    std::int64_t m, n, k;
  };
  for (cpu_isa isa : isas()) {
    for (shape s : {shape{128, 768, 3072}, shape{49, 2048, 512}, shape{1, 4096, 4096},
                    shape{300, 1000, 1500}, shape{7, 33, 5}}) {
      for (int nthr : {1, 2}) {
        const matmul_problem p = prepacked(s.m, s.n, s.k, nthr);
        const matmul_config c = default_matmul_config(p, isa);
        INFO(std::string(to_string(isa)) + " " + std::to_string(s.m) + "x" + std::to_string(s.n) +
             "x" + std::to_string(s.k) + " threads " + std::to_string(nthr));
        REQUIRE(validate_matmul_config_for(p, c, isa));
        CHECK_FALSE(c.pack_b);
        CHECK(c.n_inner);
        // As few K blocks as blocks of 512 allow, balanced; a single row
        // block (M <= mr) keeps blocks of 256 and the 1 MiB panel.
        const bool one_row_block = s.m <= c.mr;
        const std::int64_t kc_max = one_row_block ? 256 : 512;
        CHECK(div_up(s.k, c.kc) == div_up(s.k, kc_max));
        CHECK(c.kc <= kc_max + c.k_unroll);
        if (one_row_block) continue;
        const std::int64_t rows = std::min(c.mc, div_up(div_up(s.m, c.mr), c.thr_m) * c.mr);
        const std::int64_t bytes = (c.kc * c.nc + rows * c.kc + rows * c.nc) * 4;
        if (c.nc > c.nr) CHECK(bytes <= 768 * 1024);
      }
    }
  }
  // The shape the rule was made for (avx512: 4 x 96 tiles): kc 512 and a
  // panel of two column blocks, not the 768-column panel of kc 256 that,
  // with its 384 KiB of dst, spilled out of L2 on every K block.
  if (effective_isa() >= cpu_isa::avx512_core) {
    const matmul_config c =
        default_matmul_config(prepacked(128, 768, 3072, 1), cpu_isa::avx512_core);
    CHECK(c.kc == 512);
    CHECK(c.kc * c.nc * 4 <= 512 * 1024);
  }
}

TEST_CASE("prepacked weights: the generic matmul's K blocks give the specialized kernel's bits",
          "[cpu][matmul][prepacked][generic]") {
  // The specialized kernel splits K into blocks of up to 512 (K 700: two of
  // 350; K 1100: three of 367), the generic one into blocks of up to 256
  // (three of 234, five of 220); every output is still one sequential
  // fused multiply-add chain over k, stored and reloaded exactly between
  // blocks, so the results are equal bit for bit.
  struct shape {
    std::int64_t m, n, k;
  };
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> v(-1.f, 1.f);
  for (cpu_isa isa : isas()) {
    const generic_matmul_shape gs = generic_matmul_shape_for(isa);
    for (shape s : {shape{37, 100, 700}, shape{20, 61, 1100}, shape{128, 96, 1024}}) {
      for (int nthr : {1, 2}) {
        matmul_problem p = prepacked(s.m, s.n, s.k, nthr);
        p.with_bias = true;
        matmul_config c = default_matmul_config(p, isa);
        // The generic kernel reads weights packed for its own nr.
        c.mr = static_cast<int>(std::min<std::int64_t>(gs.mr, s.m));
        c.nr = gs.nr();
        c.mc = round_up(c.mc, c.mr);
        c.nc = round_up(c.nc, c.nr);
        c.k_unroll = 1;
        c.kc = div_up(s.k, div_up(s.k, 512));
        INFO(std::string(to_string(isa)) + " " + std::to_string(s.m) + "x" + std::to_string(s.n) +
             "x" + std::to_string(s.k) + " threads " + std::to_string(nthr));
        REQUIRE(validate_matmul_config_for(p, c, isa));
        auto generic = generic_matmul_kernel::create(p, c, isa);
        REQUIRE(generic);
        REQUIRE(generic.value()->config().kc != c.kc);  // the K splits differ
        auto specialized = matmul_kernel::create(p, c, isa);
        REQUIRE(specialized);

        std::vector<float> src(static_cast<std::size_t>(s.m * s.k)),
            wei(static_cast<std::size_t>(s.k * s.n)), bias(static_cast<std::size_t>(s.n));
        for (auto* x : {&src, &wei, &bias})
          for (float& f : *x) f = v(rng);
        const std::vector<float> g = run(*generic.value(), p, src, wei, bias);
        const std::vector<float> sp = run(*specialized.value(), p, src, wei, bias);
        CHECK(std::memcmp(g.data(), sp.data(), g.size() * sizeof(float)) == 0);

        std::vector<float> ref(sp.size());
        matmul_args a;
        a.src = src.data();
        a.weights = wei.data();
        a.bias = bias.data();
        a.dst = ref.data();
        matmul_reference(p, a);
        int bad = 0;
        for (std::size_t i = 0; i < ref.size(); ++i) {
          // |a b| <= 1 per term: the f32 dot-product bound (K + 2) u K, loosely.
          const double tol = (static_cast<double>(s.k) + 2) * 0x1p-24 * static_cast<double>(s.k);
          if (!(std::abs(static_cast<double>(sp[i]) - ref[i]) <= tol)) ++bad;
        }
        CHECK(bad == 0);
      }
    }
  }
}
