// The output check at a long accumulation: a candidate that is wrong by
// one term in one output element is discarded (wrong_output), whatever K.
//
// Tuning fills its inputs with multiples of 1/4 in [-1, 1], so every sum
// of fewer than 2^20 products is exact in f32 and correct configurations
// agree exactly before post-ops. A tolerance derived from reordering
// bounds alone (2 gamma(K+1) (K+1): 2.0 at K = 4096) would let a
// candidate that skips the bias in its tail columns, or drops one step
// of K (each off by at most 1), pass and win.
//
// A test implementation, "test:bias_matmul", is registered above the JIT
// for one shape (4x4096 by 4096x16, with bias; with or without a gelu_erf
// post-op): plain loops whose configuration `variant` chooses
//   1 (the default)  correct, the product computed 64 times over (slow);
//   2                correct, K summed in another order, the post-op in
//                    float, computed twice (32 times as fast as the
//                    default: twice as fast lost to the default once
//                    under ctest -j3 on 2 cores, eight times as fast once
//                    under ctest -j2 beside two other processes);
//   3                the bias skipped in the last 5 columns (once);
//   4                the last step of K dropped (once).
// So the wrong variants are the fastest: a check that let them through
// would install one.
// The ISA is capped below avx2 for the test, so the JIT matmul declines
// the op and the variants are the only candidates.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/tuning.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

constexpr std::int64_t kM = 4, kK = 4096, kN = 16, kTail = 5;

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

class bias_matmul_impl final : public backend::primitive_impl {
 public:
  bias_matmul_impl(std::shared_ptr<const backend::primitive_desc_impl> pd, std::int64_t variant,
                   bool gelu)
      : primitive_impl(std::move(pd)), variant_(variant), gelu_(gelu) {}
  void execute(const backend::exec_ctx& ctx) const override {
    const auto* a = static_cast<const float*>(ctx.arg_ptr(PRIMCACHE_ARG_SRC));
    const auto* b = static_cast<const float*>(ctx.arg_ptr(PRIMCACHE_ARG_WEIGHTS));
    const auto* bias = static_cast<const float*>(ctx.arg_ptr(PRIMCACHE_ARG_BIAS));
    auto* c = static_cast<float*>(ctx.arg_ptr(PRIMCACHE_ARG_DST));
    const int passes = variant_ == 1 ? 64 : variant_ == 2 ? 2 : 1;
    for (int pass = 0; pass < passes; ++pass) {
      for (std::int64_t i = 0; i < kM; ++i) {
        for (std::int64_t j = 0; j < kN; ++j) {
          float acc = variant_ == 3 && j >= kN - kTail ? 0.f : bias[j];
          if (variant_ == 2) {
            // Even and odd steps of K in two sums, added last: another order.
            float even = 0, odd = 0;
            for (std::int64_t k = 0; k < kK; k += 2) {
              even += a[i * kK + k] * b[k * kN + j];
              odd += a[i * kK + k + 1] * b[(k + 1) * kN + j];
            }
            acc += odd + even;
          } else {
            const std::int64_t last = variant_ == 4 ? kK - 1 : kK;
            for (std::int64_t k = 0; k < last; ++k) acc += a[i * kK + k] * b[k * kN + j];
          }
          c[i * kN + j] = gelu_ ? post_op(acc) : acc;
        }
      }
    }
  }

 private:
  // gelu_erf: the default in double (erfc, free of cancellation), the
  // others in float: implementations of one post-op differ by a few ulp.
  float post_op(float v) const {
    if (variant_ == 1) {
      return static_cast<float>(0.5 * v * std::erfc(-static_cast<double>(v) / std::sqrt(2.0)));
    }
    return 0.5f * v * (1.f + std::erf(v * 0.707106781f));
  }
  std::int64_t variant_;
  bool gelu_;
};

backend::kernel_config variant(std::int64_t v) {
  backend::kernel_config c;
  c.add("variant", v);
  return c;
}

class bias_matmul_pd final : public backend::primitive_desc_impl {
 public:
  bias_matmul_pd(const primitive_attr& attr, backend::matmul_op op)
      : primitive_desc_impl(backend::primitive_kind::matmul, attr, "test:bias_matmul"),
        op_(std::move(op)) {}

  memory_desc arg_md(int arg) const override {
    if (arg == PRIMCACHE_ARG_SRC) return op_.src;
    if (arg == PRIMCACHE_ARG_WEIGHTS) return op_.weights;
    if (arg == PRIMCACHE_ARG_BIAS) return op_.bias;
    if (arg == PRIMCACHE_ARG_DST) return op_.dst;
    return {};
  }
  void write_op_key(key_writer& w) const override {
    op_.src.write_key(w);
    op_.weights.write_key(w);
    op_.bias.write_key(w);
    op_.dst.write_key(w);
  }
  std::shared_ptr<const backend::primitive_impl> create_impl(const engine& eng) const override {
    return create_impl_with(eng, config() ? *config() : variant(1));
  }
  std::optional<backend::kernel_config> default_config() const override { return variant(1); }
  backend::config_space config_candidates() const override {
    return backend::config_space::of({variant(2), variant(3), variant(4)});
  }
  result<bool> validate_config(const backend::kernel_config& cfg) const override {
    if (auto ok = cfg.expect({"variant"}); !ok) return ok;
    const std::int64_t v = *cfg.get("variant");
    if (v < 1 || v > 4) return failure{status::invalid_arguments, "variant out of 1-4"};
    return true;
  }
  std::shared_ptr<const backend::primitive_impl> create_impl_with(
      const engine&, const backend::kernel_config& cfg) const override {
    if (auto ok = validate_config(cfg); !ok) throw error(ok.why().code, ok.why().message);
    return std::make_shared<const bias_matmul_impl>(shared_from_this(), *cfg.get("variant"),
                                                    !attr().get_post_ops().entries().empty());
  }

 private:
  backend::matmul_op op_;
};

result<std::shared_ptr<const backend::primitive_desc_impl>> make_bias_matmul_pd(
    const backend::op_desc& op, const primitive_attr& attr, const backend::engine_impl& eng) {
  const auto& m = std::get<backend::matmul_op>(op);
  const memory_desc src({kM, kK}, data_type::f32, tag::ab);
  const memory_desc wei({kK, kN}, data_type::f32, tag::ab);
  const memory_desc bias({1, kN}, data_type::f32, tag::ab);
  const memory_desc dst({kM, kN}, data_type::f32, tag::ab);
  const auto& ops = attr.get_post_ops().entries();
  const bool gelu = ops.size() == 1 && ops[0].kind == post_ops::kind::eltwise &&
                    ops[0].alg == algorithm::eltwise_gelu_erf && ops[0].scale == 1.f;
  if (!(m.src == src) || !(m.weights == wei) || !(m.bias == bias) || !(m.dst == dst) ||
      !(ops.empty() || gelu)) {
    return failure{status::unimplemented, "test:bias_matmul takes one shape only"};
  }
  auto pd = std::make_shared<bias_matmul_pd>(attr, m);
  pd->finalize(eng, 1);
  return std::shared_ptr<const backend::primitive_desc_impl>(std::move(pd));
}

void register_bias_matmul() {
  static const bool registered = [] {
    backend::register_implementation({"test:bias_matmul", engine_kind::cpu,
                                      backend::primitive_kind::matmul, 200, &make_bias_matmul_pd});
    return true;
  }();
  (void)registered;
}

memory filled(memory::dims dims, unsigned seed) {
  memory m(memory::desc(dims, data_type::f32, tag::ab), cpu());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto* p = static_cast<float*>(m.get_data_handle());
  for (std::int64_t i = 0; i < m.get_desc().nelems(); ++i) p[i] = dist(rng);
  return m;
}

// Restores what the test changes: the ISA cap, the switch, max_nconfigs.
struct settings_scope {
  std::optional<cpu_isa> cap = max_cpu_isa();
  bool on = get_tune();
  std::size_t nconfigs = get_tune_max_nconfigs();
  ~settings_scope() {
    if (cap) {
      set_max_cpu_isa(*cap);
    } else {
      clear_max_cpu_isa();
    }
    set_tune(on);
    set_tune_max_nconfigs(nconfigs);
    backend::set_config_source({});
  }
};

}  // namespace

TEST_CASE("a candidate wrong by one term at K = 4096 is discarded, a reordered one wins",
          "[autotune][runtime][output_check]") {
  register_bias_matmul();
  const settings_scope restore;
  set_max_cpu_isa(cpu_isa::avx);  // the JIT matmul declines: only the variants compete
  set_tune(false);
  set_tune_max_nconfigs(4);
  backend::set_config_source({});
  const bool with_gelu = GENERATE(false, true);
  INFO((with_gelu ? "with a gelu_erf post-op" : "without post-ops"));
  primitive_attr attr;
  if (with_gelu) {
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_gelu_erf, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  attr.set_tunable(true);
  memory src = filled({kM, kK}, 11), wei = filled({kK, kN}, 12), bias = filled({1, kN}, 13);
  memory dst(memory::desc({kM, kN}, data_type::f32, tag::ab), cpu());
  const matmul::primitive_desc pd(
      matmul::desc(src.get_desc(), wei.get_desc(), bias.get_desc(), dst.get_desc()), attr, cpu());
  REQUIRE(std::string(backend::impl_of(pd).name()) == "test:bias_matmul");
  const std::string device = tune_device_of(cpu());
  REQUIRE_FALSE(global_tune_table().find(device, backend::impl_of(pd).problem_key()));

  const tune_stats s0 = get_tune_stats();
  matmul(pd).execute(stream(cpu()), {{PRIMCACHE_ARG_SRC, src},
                                     {PRIMCACHE_ARG_WEIGHTS, wei},
                                     {PRIMCACHE_ARG_BIAS, bias},
                                     {PRIMCACHE_ARG_DST, dst}});
  const tune_stats s1 = get_tune_stats();
  CHECK(s1.tuned == s0.tuned + 1);
  CHECK(s1.failed == s0.failed);
  // Variants 3 and 4 are off by one bias or one product: wrong_output.
  CHECK(s1.wrong_candidates == s0.wrong_candidates + 2);
  auto entry = global_tune_table().find(device, backend::impl_of(pd).problem_key());
  REQUIRE(entry);
  CHECK(entry->implementation == "test:bias_matmul");
  // Variant 2 sums in another order (and applies gelu in float): correct,
  // about 32 times as fast as the default, so it wins.
  CHECK(entry->config == variant(2).to_json());
  CHECK(global_tune_table().erase(device, backend::impl_of(pd).problem_key().bytes()));
}
