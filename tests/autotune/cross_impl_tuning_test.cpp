// Tuning across implementations: the candidates of a primitive include the
// configurations of every other registered implementation that accepts its
// op with the same arguments, and a winner from another implementation is
// what later descriptors of that op are made by.
//
// A test implementation, "test:loop_matmul", is registered above the JIT
// for one matmul shape only (37x41 by 41x43, no bias, no post-ops): plain
// loops with a configuration that changes nothing, which also sleep 20 ms
// on every run: slower than the JIT matmul (an alternative with
// configurations) by more than a loaded machine's scheduling delays. (The
// loops alone, about 25 times slower, lost to a JIT matmul whose pool
// thread waited for a core: 2 of 12 runs failed beside a build.)
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/tuning.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

constexpr std::int64_t kM = 37, kK = 41, kN = 43;

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

class loop_matmul_impl final : public backend::primitive_impl {
 public:
  using primitive_impl::primitive_impl;
  void execute(const backend::exec_ctx& ctx) const override {
    const auto* a = static_cast<const float*>(ctx.arg_ptr(PRIMCACHE_ARG_SRC));
    const auto* b = static_cast<const float*>(ctx.arg_ptr(PRIMCACHE_ARG_WEIGHTS));
    auto* c = static_cast<float*>(ctx.arg_ptr(PRIMCACHE_ARG_DST));
    for (std::int64_t i = 0; i < kM; ++i) {
      for (std::int64_t j = 0; j < kN; ++j) {
        float acc = 0;
        for (std::int64_t k = 0; k < kK; ++k) acc += a[i * kK + k] * b[k * kN + j];
        c[i * kN + j] = acc;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
};

backend::kernel_config row_step(std::int64_t v) {
  backend::kernel_config c;
  c.add("row_step", v);
  return c;
}

class loop_matmul_pd final : public backend::primitive_desc_impl {
 public:
  loop_matmul_pd(const primitive_attr& attr, memory_desc src, memory_desc wei, memory_desc dst)
      : primitive_desc_impl(backend::primitive_kind::matmul, attr, "test:loop_matmul"),
        src_(std::move(src)),
        wei_(std::move(wei)),
        dst_(std::move(dst)) {}

  memory_desc arg_md(int arg) const override {
    if (arg == PRIMCACHE_ARG_SRC) return src_;
    if (arg == PRIMCACHE_ARG_WEIGHTS) return wei_;
    if (arg == PRIMCACHE_ARG_DST) return dst_;
    return {};
  }
  void write_op_key(key_writer& w) const override {
    src_.write_key(w);
    wei_.write_key(w);
    dst_.write_key(w);
  }
  std::shared_ptr<const backend::primitive_impl> create_impl(const engine&) const override {
    return std::make_shared<const loop_matmul_impl>(shared_from_this());
  }
  std::optional<backend::kernel_config> default_config() const override { return row_step(1); }
  backend::config_space config_candidates() const override {
    return backend::config_space::of({row_step(2), row_step(3)});
  }
  result<bool> validate_config(const backend::kernel_config& cfg) const override {
    if (auto ok = cfg.expect({"row_step"}); !ok) return ok;
    const std::int64_t v = *cfg.get("row_step");
    if (v < 1 || v > 3) return failure{status::invalid_arguments, "row_step out of 1-3"};
    return true;
  }
  std::shared_ptr<const backend::primitive_impl> create_impl_with(
      const engine&, const backend::kernel_config& cfg) const override {
    if (auto ok = validate_config(cfg); !ok) throw error(ok.why().code, ok.why().message);
    return std::make_shared<const loop_matmul_impl>(shared_from_this());
  }

 private:
  memory_desc src_, wei_, dst_;
};

result<std::shared_ptr<const backend::primitive_desc_impl>> make_loop_matmul_pd(
    const backend::op_desc& op, const primitive_attr& attr, const backend::engine_impl& eng) {
  const auto& m = std::get<backend::matmul_op>(op);
  const memory_desc src({kM, kK}, data_type::f32, tag::ab);
  const memory_desc wei({kK, kN}, data_type::f32, tag::ab);
  const memory_desc dst({kM, kN}, data_type::f32, tag::ab);
  if (!(m.src == src) || !(m.weights == wei) || !(m.dst == dst) || !m.bias.is_zero() ||
      !attr.get_post_ops().entries().empty()) {
    return failure{status::unimplemented, "test:loop_matmul takes one shape only"};
  }
  auto pd = std::make_shared<loop_matmul_pd>(attr, src, wei, dst);
  pd->finalize(eng, 1);
  return std::shared_ptr<const backend::primitive_desc_impl>(std::move(pd));
}

void register_loop_matmul() {
  static const bool registered = [] {
    backend::register_implementation({"test:loop_matmul", engine_kind::cpu,
                                      backend::primitive_kind::matmul, 200, &make_loop_matmul_pd});
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

struct loop_case {
  memory src = filled({kM, kK}, 5);
  memory wei = filled({kK, kN}, 6);
  memory dst{memory::desc({kM, kN}, data_type::f32, tag::ab), cpu()};

  matmul::primitive_desc pd() const {
    return matmul::primitive_desc(matmul::desc(src.get_desc(), wei.get_desc(), dst.get_desc()),
                                  cpu());
  }
  // Runs `p` and returns the largest difference from plain loops in double.
  double run(const primitive& p) const {
    std::memset(dst.get_data_handle(), 0xff, dst.get_desc().size_bytes());  // NaN
    p.execute(stream(cpu()),
              {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}});
    const auto* a = static_cast<const float*>(src.get_data_handle());
    const auto* b = static_cast<const float*>(wei.get_data_handle());
    const auto* c = static_cast<const float*>(dst.get_data_handle());
    double worst = 0;
    for (std::int64_t i = 0; i < kM; ++i) {
      for (std::int64_t j = 0; j < kN; ++j) {
        double want = 0;
        for (std::int64_t k = 0; k < kK; ++k) want += double(a[i * kK + k]) * b[k * kN + j];
        const double d = std::abs(c[i * kN + j] - want);
        worst = d > worst || d != d ? d : worst;  // NaN: never written
      }
    }
    return worst;
  }
};

bool jit_here() {
  return effective_isa() >= cpu_isa::avx2;
}

}  // namespace

TEST_CASE("tuning measures other implementations and later descriptors use the winner's",
          "[autotune][runtime][cross_impl]") {
  if (!jit_here()) {
    WARN("the JIT matmul needs avx2: no configurable implementation to stand in");
    return;
  }
  register_loop_matmul();
  set_tune(false);
  set_tune_max_nconfigs(6);
  loop_case c;
  const matmul::primitive_desc before_pd = c.pd();
  REQUIRE(std::string(backend::impl_of(before_pd).name()) == "test:loop_matmul");
  const matmul first(before_pd);
  CHECK(c.run(first) < 1e-4);
  const tune_stats s0 = get_tune_stats();

  set_tune(true);
  CHECK(c.run(first) < 1e-4);  // tunes, then runs as it was made
  set_tune(false);
  const tune_stats s1 = get_tune_stats();
  CHECK(s1.tuned == s0.tuned + 1);
  CHECK(s1.wrong_candidates == s0.wrong_candidates);
  CHECK(s1.failed == s0.failed);
  const std::string device = tune_device_of(cpu());
  auto entry = global_tune_table().find(device, backend::impl_of(before_pd).problem_key());
  REQUIRE(entry);
  // The JIT matmul is far faster than the sleeping loops: one of its
  // configurations wins, whatever the noise.
  CHECK(entry->implementation == "jit:matmul");
  CHECK(entry->time_ns < entry->default_time_ns);

  // A new descriptor of the op is the JIT's, with the winning
  // configuration, and its own problem has the entry too (never tuned
  // again).
  const matmul::primitive_desc after_pd = c.pd();
  const backend::primitive_desc_impl& after = backend::impl_of(after_pd);
  CHECK(std::string(after.name()) == "jit:matmul");
  REQUIRE(after.config());
  CHECK(after.config()->to_json() == entry->config);
  auto own = global_tune_table().find(device, after.problem_key());
  REQUIRE(own);
  CHECK(own->implementation == "jit:matmul");
  CHECK(own->config == entry->config);
  set_tune(true);
  const matmul tuned(after_pd);
  CHECK(c.run(tuned) < 1e-4);
  CHECK(get_tune_stats().tuned == s1.tuned);
  set_tune(false);
  set_tune_max_nconfigs(40);
}

TEST_CASE("a table entry naming an implementation that is not registered leaves the first one",
          "[autotune][runtime][cross_impl]") {
  register_loop_matmul();
  global_tune_table().clear();  // no winner from the case above
  backend::set_config_source({});
  loop_case c;
  const matmul::primitive_desc pd = c.pd();
  const backend::primitive_desc_impl& first = backend::impl_of(pd);
  REQUIRE(std::string(first.name()) == "test:loop_matmul");
  const std::string device = tune_device_of(cpu());
  // An entry from a build with another implementation list (or a bad file).
  global_tune_table().put(device, first.problem_key(),
                          tune_entry{"jit:gone", "{\"row_step\":2}", 1, 2, "matmul"});
  backend::set_config_source({});  // cached descriptors are made again: the table is asked
  set_tune(false);
  const matmul::primitive_desc again = c.pd();
  CHECK(&backend::impl_of(again) != &first);  // made again, not the cached one
  CHECK(std::string(backend::impl_of(again).name()) == "test:loop_matmul");
  CHECK(c.run(matmul(again)) < 1e-4);
  CHECK(global_tune_table().erase(device, first.problem_key().bytes()));
}

TEST_CASE("a table entry naming an implementation without configurations leaves the first one",
          "[autotune][runtime][cross_impl]") {
  if (!jit_here()) {
    WARN("the JIT matmul needs avx2: ref:matmul is the first implementation here");
    return;
  }
  global_tune_table().clear();
  backend::set_config_source({});
  set_tune(false);
  // Not the loop matmul's shape: the JIT is the first to accept it.
  const memory::desc a({32, 48}, data_type::f32, tag::ab), b({48, 40}, data_type::f32, tag::ab),
      d({32, 40}, data_type::f32, tag::ab);
  auto make = [&] { return matmul::primitive_desc(matmul::desc(a, b, d), cpu()); };
  const matmul::primitive_desc pd = make();
  const backend::primitive_desc_impl& first = backend::impl_of(pd);
  REQUIRE(std::string(first.name()) == "jit:matmul");
  const std::string device = tune_device_of(cpu());
  // ref:matmul accepts the op with the same arguments but has no
  // configurations, so no tuning ever chose it: an entry naming it (a
  // hand-written or tampered file) would put the plain loops in for good.
  global_tune_table().put(device, first.problem_key(),
                          tune_entry{"ref:matmul", "{}", 1, 2, "matmul"});
  backend::set_config_source({});  // cached descriptors are made again: the table is asked
  const matmul::primitive_desc again = make();
  CHECK(&backend::impl_of(again) != &first);  // made again, not the cached one
  CHECK(std::string(backend::impl_of(again).name()) == "jit:matmul");
  CHECK(global_tune_table().erase(device, first.problem_key().bytes()));
}
