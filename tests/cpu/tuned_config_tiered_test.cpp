// Tuned configurations and tiered creation (the cold-creation rule that
// tuning must keep): a matmul created tiered with any configuration of its
// candidate space — what tuning may install — either runs a generic kernel
// whose outputs equal the specialized kernel's bit for bit, or declines the
// generic kernel, so that the primitive is created synchronously. Checked on
// the kernels directly over configurations spread across each space (K
// blocking, register blocks, unroll, packing, loop order, thread grids),
// and through the public API with tune-table entries: the primitive serves
// the generic kernel first (the background pool held busy, so it cannot
// swap before the first execution), and its outputs before and after the
// swap are the same bits as a synchronous creation's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "aligned_buffer.hpp"
#include "kernels/generic_matmul_kernel.hpp"
#include "kernels/matmul_config.hpp"
#include "kernels/matmul_kernel.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primcache/runtime/tuning.hpp"
#include "test_isas.hpp"
#include "tiered/background_compiler.hpp"
#include "tiered/generic_code.hpp"
#include "tiered_test_support.hpp"

using namespace primcache;
using namespace primcache::cpu_internal;
using cpu_test::test_isas;

using cpu_test::aligned_buffer;

namespace {

// A problem with its inputs: dense batches (weights shared or not), bias,
// and a chain of post-ops with a per-column binary operand.
struct matmul_data {
  matmul_problem p;
  std::vector<float> src, wei, bias, addend;

  matmul_data(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
              bool shared_weights, bool prepacked, unsigned seed) {
    p = matmul_problem::dense(batch, m, n, k);
    if (shared_weights) p.wei_strides[0] = 0;
    p.with_bias = true;
    p.nthr = default_thread_pool().size();
    p.prepacked_weights = prepacked;
    post_op gelu;
    gelu.eltwise.alg = eltwise_alg::gelu_tanh;
    post_op add;
    add.what = post_op::kind::binary_add;
    add.binary.arg_index = 0;
    add.binary.broadcast = binary_broadcast::per_channel;
    p.post_ops = {gelu, add};
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> v(-1.f, 1.f);
    auto fill = [&](std::vector<float>& x, std::int64_t count) {
      x.resize(static_cast<std::size_t>(count));
      for (float& f : x) f = v(rng);
    };
    fill(src, batch * m * k);
    fill(wei, (shared_weights ? 1 : batch) * k * n);
    fill(bias, n);
    fill(addend, n);
  }

  template <class Kernel>
  std::vector<float> run(const Kernel& kernel) const {
    std::vector<float> dst(static_cast<std::size_t>(p.batch * p.m * p.n),
                           std::numeric_limits<float>::quiet_NaN());
    std::vector<float> packed;
    const float* operands[1] = {addend.data()};
    matmul_args a;
    a.src = src.data();
    a.weights = wei.data();
    if (p.prepacked_weights) {
      const matmul_packing pk = matmul_packing::of(p, kernel.config());
      packed.resize(pk.bytes() / sizeof(float));
      matmul_pack_weights(pk, wei.data(), packed.data(), default_thread_pool());
      a.weights = packed.data();
    }
    a.bias = bias.data();
    a.dst = dst.data();
    a.binary_operands = operands;
    aligned_buffer scratch(kernel.scratchpad_bytes());
    kernel.execute(a, scratch.p, default_thread_pool());
    return dst;
  }
};

std::string describe(const matmul_config& c) {
  return "mr " + std::to_string(c.mr) + " nr " + std::to_string(c.nr) + " kc " +
         std::to_string(c.kc) + " mc " + std::to_string(c.mc) + " nc " + std::to_string(c.nc) +
         " k_unroll " + std::to_string(c.k_unroll) + " pack_b " + std::to_string(c.pack_b) +
         " n_inner " + std::to_string(c.n_inner) + " grid " + std::to_string(c.thr_m) + "x" +
         std::to_string(c.thr_n);
}

// Holds the background pool's threads busy until released (or destroyed),
// so that a tiered creation's specialized compilation stays queued: its
// primitive runs the generic kernel until wait_until_specialized() runs the
// queued compilation on the caller's thread.
class pool_blocker {
 public:
  pool_blocker() {
    auto& pool = background_compiler::instance();
    for (int i = 0; i < pool.threads(); ++i) {
      auto job = background_job::make([this] {
        running_.fetch_add(1);
        while (!released_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      });
      REQUIRE(pool.submit(job));
      jobs_.push_back(job);
    }
    // Every pool thread is inside a blocking job: what is queued next waits.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (running_.load() < pool.threads() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(running_.load() == pool.threads());
  }
  ~pool_blocker() {
    released_.store(true);
    for (auto& job : jobs_) job->wait();
  }
  pool_blocker(const pool_blocker&) = delete;
  pool_blocker& operator=(const pool_blocker&) = delete;

 private:
  std::atomic<bool> released_{false};
  std::atomic<int> running_{0};
  std::vector<std::shared_ptr<background_job>> jobs_;
};

// Nothing kept while alive: each creation is a miss that makes its
// descriptor (reading the tune table) and its impl anew.
struct fresh_creations {
  tiered_support::mode_scope mode{jit_mode::tiered};
  std::uint64_t pd_capacity = control().find_cache("primitive_desc").info().capacity;
  fresh_creations() {
    control().set_capacity("primitive_desc", 0);
    set_primitive_cache_capacity(0);
  }
  ~fresh_creations() { control().set_capacity("primitive_desc", pd_capacity); }
  fresh_creations(const fresh_creations&) = delete;
  fresh_creations& operator=(const fresh_creations&) = delete;
};

// For configurations spread over the problem's candidate space, each
// installed as tuning installs it (the tune table's entry for the problem,
// which the next descriptor takes): the primitive created tiered gives,
// before its swap and after it, the bits of one created synchronously.
// Counts the creations that served the generic kernel first and those that
// were created synchronously (the generic kernel declined).
template <class Make, class Run>
void check_tuned_configs(const char* implementation, Make make_pd, Run run, int samples,
                         int& tiered, int& sync) {
  const primitive_desc probe = make_pd();
  const backend::primitive_desc_impl& probe_impl = backend::impl_of(probe);
  REQUIRE(probe_impl.name() == std::string(implementation));
  const backend::config_space space = probe_impl.config_candidates();
  REQUIRE(space.size() > 0);
  const std::string device = tune_device_of(tiered_support::cpu());
  for (int s = 0; s < samples; ++s) {
    const backend::kernel_config cfg = space.at(static_cast<std::uint64_t>(s) * (space.size() - 1) /
                                                static_cast<std::uint64_t>(samples - 1));
    INFO(cfg.to_json());
    REQUIRE(probe_impl.validate_config(cfg));
    global_tune_table().put(device, probe_impl.problem_key(),
                            tune_entry{implementation, cfg.to_json(), 1, 2, "tiered test"});
    const primitive_desc pd = make_pd();
    REQUIRE(backend::impl_of(pd).config() == cfg);

    std::vector<float> before, after;
    bool was_generic = false;
    {
      const pool_blocker hold;
      const primitive prim(pd);
      was_generic = !prim.specialized();
      before = run(prim);
      // Runs the queued compilation here, on this thread; the blocker still
      // holds the pool.
      prim.wait_until_specialized();
      CHECK(prim.specialized());
      after = run(prim);
    }
    set_jit_mode(jit_mode::sync);
    const std::vector<float> sync_out = run(primitive(pd));
    set_jit_mode(jit_mode::tiered);
    CHECK(tiered_support::same_bits(before, sync_out));
    CHECK(tiered_support::same_bits(after, sync_out));
    (was_generic ? tiered : sync) += 1;
  }
  global_tune_table().erase(device, probe_impl.problem_key().bytes());
}

std::vector<float> floats_of(const memory& m) {
  const auto* p = static_cast<const float*>(m.get_data_handle());
  return std::vector<float>(p, p + m.get_desc().size_bytes() / sizeof(float));
}

memory random_memory(const memory::desc& md, unsigned seed) {
  memory mem(md, tiered_support::cpu());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> v(-1.f, 1.f);
  auto* p = static_cast<float*>(mem.get_data_handle());
  for (std::size_t i = 0; i < md.size_bytes() / sizeof(float); ++i) p[i] = v(rng);
  return mem;
}

}  // namespace

TEST_CASE("every candidate matmul configuration runs a bit-identical generic kernel or declines it",
          "[cpu][tiered][tuned][matmul][kernel_sweep]") {
  struct shape {
    std::int64_t batch, m, n, k;
    bool shared, prepacked;
  };
  // K below, at and above the generic kernel's own K block (256), tails
  // against every register block, shared and per-batch weights, weights
  // prepacked (constant) and not.
  const shape s = GENERATE(shape{1, 13, 29, 7, false, false}, shape{1, 64, 64, 64, false, false},
                           shape{2, 50, 130, 300, true, false}, shape{1, 9, 70, 600, false, false},
                           shape{2, 33, 96, 257, false, false}, shape{1, 40, 112, 300, false, true},
                           shape{1, 17, 48, 40, false, true});
  const matmul_data d(s.batch, s.m, s.n, s.k, s.shared, s.prepacked, 7);
  int compared = 0, declined = 0;
  for (cpu_isa isa : test_isas()) {
    const enumerated_configs<matmul_config> space = matmul_config_candidates(d.p, isa);
    REQUIRE(space.size() > 0);
    const int code_nr =
        generic_matmul_shape_for(generic_isa_for(generic_kernel::matmul, isa).value()).nr();
    // Spread over the space, plus the heuristic's own.
    std::vector<matmul_config> configs = space.sample(14);
    configs.push_back(default_matmul_config(d.p, isa));
    for (const matmul_config& c : configs) {
      INFO(std::string(to_string(isa)) << " " << s.batch << "x" << s.m << "x" << s.n << "x" << s.k
                                       << (s.prepacked ? " prepacked" : "") << ": " << describe(c));
      REQUIRE(validate_matmul_config_for(d.p, c, isa));
      auto generic = generic_matmul_kernel::create(d.p, c, isa);
      if (!generic) {
        // Declined: the primitive is created synchronously. Only weights
        // prepacked for another register width are declined here.
        CHECK(generic.why().code == status::unimplemented);
        CHECK(s.prepacked);
        CHECK(c.nr != code_nr);
        ++declined;
        continue;
      }
      auto specialized = matmul_kernel::create(d.p, c, isa);
      REQUIRE(specialized);
      const std::vector<float> want = d.run(*specialized.value());
      const std::vector<float> got = d.run(*generic.value());
      CHECK(tiered_support::same_bits(got, want));
      ++compared;
    }
  }
  CHECK(compared > 0);
  if (!s.prepacked) CHECK(declined == 0);
}

TEST_CASE("a matmul created tiered with a tuned configuration swaps to the same bits",
          "[cpu][tiered][tuned][matmul]") {
  if (!tiered_support::tiered_here()) return;
  const fresh_creations fresh;
  const bool constant = GENERATE(false, true);
  const int m = 37, n = 80, k = 300;
  const memory src = random_memory({{m, k}, data_type::f32, format_tag::ab}, 1);
  const memory wei = random_memory({{k, n}, data_type::f32, format_tag::ab}, 2);
  const memory bias = random_memory({{1, n}, data_type::f32, format_tag::ab}, 3);
  const memory::desc dst_md({m, n}, data_type::f32, format_tag::ab);
  post_ops ops;
  ops.append_eltwise(1.f, algorithm::eltwise_gelu_tanh, 0.f, 0.f);
  primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_constant_weights(constant);
  const matmul::desc desc(src.get_desc(), wei.get_desc(), bias.get_desc(), dst_md);
  int tiered = 0, sync = 0;
  check_tuned_configs(
      "jit:matmul", [&] { return matmul::primitive_desc(desc, attr, tiered_support::cpu()); },
      [&](const primitive& prim) {
        memory dst(dst_md, tiered_support::cpu());
        prim.execute(stream(tiered_support::cpu()), {{PRIMCACHE_ARG_SRC, src},
                                                     {PRIMCACHE_ARG_WEIGHTS, wei},
                                                     {PRIMCACHE_ARG_BIAS, bias},
                                                     {PRIMCACHE_ARG_DST, dst}});
        return floats_of(dst);
      },
      8, tiered, sync);
  INFO((constant ? "constant weights" : "weights as given"));
  // Weights as given: every configuration can be tiered (the generic kernel
  // reads any of them); constant weights packed for another register width
  // than the generic kernel's are created synchronously.
  CHECK(tiered > 0);
  if (!constant) CHECK(sync == 0);
}

TEST_CASE("a convolution created tiered with a tuned configuration swaps to the same bits",
          "[cpu][tiered][tuned][conv]") {
  if (!tiered_support::tiered_here()) return;
  const fresh_creations fresh;
  struct shape {
    std::int64_t n, ic, oc, ih, iw, k, stride, pad;
    format_tag act;
    bool constant;
  };
  const shape s = GENERATE(shape{1, 16, 32, 9, 11, 3, 1, 1, format_tag::nchw, false},
                           shape{2, 24, 40, 10, 13, 3, 2, 1, format_tag::nhwc, false},
                           shape{1, 32, 48, 7, 7, 1, 1, 0, format_tag::nChw16c, true});
  const std::int64_t oh = (s.ih + 2 * s.pad - s.k) / s.stride + 1;
  const std::int64_t ow = (s.iw + 2 * s.pad - s.k) / s.stride + 1;
  const memory src = random_memory({{s.n, s.ic, s.ih, s.iw}, data_type::f32, s.act}, 4);
  const memory wei = random_memory({{s.oc, s.ic, s.k, s.k}, data_type::f32, format_tag::oihw}, 5);
  const memory bias = random_memory({{s.oc}, data_type::f32, format_tag::a}, 6);
  const memory::desc dst_md({s.n, s.oc, oh, ow}, data_type::f32, s.act);
  post_ops ops;
  ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_constant_weights(s.constant);
  const convolution_forward::desc desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                       src.get_desc(), wei.get_desc(), bias.get_desc(), dst_md,
                                       {s.stride, s.stride}, {s.pad, s.pad}, {s.pad, s.pad});
  int tiered = 0, sync = 0;
  check_tuned_configs(
      "jit:conv",
      [&] { return convolution_forward::primitive_desc(desc, attr, tiered_support::cpu()); },
      [&](const primitive& prim) {
        memory dst(dst_md, tiered_support::cpu());
        prim.execute(stream(tiered_support::cpu()), {{PRIMCACHE_ARG_SRC, src},
                                                     {PRIMCACHE_ARG_WEIGHTS, wei},
                                                     {PRIMCACHE_ARG_BIAS, bias},
                                                     {PRIMCACHE_ARG_DST, dst}});
        return floats_of(dst);
      },
      8, tiered, sync);
  CHECK(tiered > 0);
}
