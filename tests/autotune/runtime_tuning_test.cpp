// Tune mode through the public API with the CPU backend's real kernels:
// the first execution tunes, the winner goes into the table, later
// descriptors get it, and every configuration tuning may choose computes
// what plain loops compute.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "primcache/control/registry.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/backend/registry.hpp"
#include "primcache/runtime/primcache_tune.h"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/tuning.hpp"
#include "primcache/runtime/version.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

memory make(memory::dims dims, tag t, unsigned seed) {
  memory m(memory::desc(dims, data_type::f32, t), cpu());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto* p = static_cast<float*>(m.get_data_handle());
  const std::size_t n = m.get_desc().size_bytes() / sizeof(float);
  for (std::size_t i = 0; i < n; ++i) p[i] = dist(rng);
  return m;
}

const float* data(const memory& m) {
  return static_cast<const float*>(m.get_data_handle());
}

// relu(src x wei + bias), in double.
std::vector<double> matmul_reference(const memory& src, const memory& wei, const memory& bias,
                                     int m, int n, int k) {
  std::vector<double> out(static_cast<std::size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = data(bias)[j];
      for (int x = 0; x < k; ++x) acc += double(data(src)[i * k + x]) * data(wei)[x * n + j];
      out[static_cast<std::size_t>(i) * n + j] = acc > 0 ? acc : 0;
    }
  }
  return out;
}

// Mismatches beyond 1e-4 relative to the magnitude.
int mismatches(const std::vector<double>& ref, const memory& got) {
  int bad = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::abs(data(got)[i] - ref[i]) > 1e-4 * (1 + std::abs(ref[i]))) ++bad;
  }
  return bad;
}

struct matmul_case {
  int m, n, k;
  memory src, wei, bias, dst;
  primitive_attr attr;
  matmul_case(int m_, int n_, int k_, unsigned seed)
      : m(m_),
        n(n_),
        k(k_),
        src(make({m_, k_}, tag::ab, seed)),
        wei(make({k_, n_}, tag::ab, seed + 1)),
        bias(make({1, n_}, tag::ab, seed + 2)),
        dst(memory::desc({m_, n_}, data_type::f32, tag::ab), cpu()) {
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  matmul::primitive_desc pd() const {
    return matmul::primitive_desc(
        matmul::desc(src.get_desc(), wei.get_desc(), bias.get_desc(), dst.get_desc()), attr, cpu());
  }
  void run(const primitive& p) const {
    std::memset(dst.get_data_handle(), 0xff, dst.get_desc().size_bytes());  // NaN
    p.execute(stream(cpu()), {{PRIMCACHE_ARG_SRC, src},
                              {PRIMCACHE_ARG_WEIGHTS, wei},
                              {PRIMCACHE_ARG_BIAS, bias},
                              {PRIMCACHE_ARG_DST, dst}});
  }
  int bad() const { return mismatches(matmul_reference(src, wei, bias, m, n, k), dst); }
};

std::string table_config(const primitive_desc& pd) {
  auto e =
      global_tune_table().find(tune_device_of(pd.get_engine()), backend::impl_of(pd).problem_key());
  return e ? e->config : std::string();
}

// Configurations spread over the descriptor's space that it accepts: what
// tuning measures (spread_search with the same pruning).
std::vector<backend::kernel_config> sampled_configs(const primitive_desc& pd, std::size_t n) {
  const auto& pdi = backend::impl_of(pd);
  const backend::config_space space = pdi.config_candidates();
  std::vector<backend::kernel_config> out;
  const std::uint64_t size = space.size();
  for (std::uint64_t s = 0; s < n && size; ++s) {
    for (std::uint64_t i = s * size / n; i < (s + 1) * size / n; ++i) {
      backend::kernel_config c = space.at(i);
      if (pdi.validate_config(c)) {
        out.push_back(std::move(c));
        break;
      }
    }
  }
  return out;
}

// Primitive descriptors created while `source` gives `cfg`, compiled
// synchronously: what is checked is the specialized code of each
// configuration (what tuning measures), not a tiered creation's generic
// kernel running first.
struct forced_config {
  explicit forced_config(const backend::kernel_config& cfg, jit_mode mode = jit_mode::sync)
      : mode_(get_jit_mode()) {
    set_jit_mode(mode);
    backend::set_config_source(
        [cfg](const backend::primitive_desc_impl&) -> std::optional<backend::kernel_config> {
          return cfg;
        });
  }
  ~forced_config() {
    backend::set_config_source({});
    set_jit_mode(mode_);
  }

 private:
  jit_mode mode_;
};

bool jit() {
  return effective_isa() >= cpu_isa::avx2;
}

}  // namespace

TEST_CASE("the first execution of a tunable matmul tunes it, later descriptors get the winner",
          "[autotune][runtime]") {
  if (!jit()) {
    WARN("the JIT matmul needs avx2: this host runs the reference, which has nothing to tune");
    CHECK(effective_isa() < cpu_isa::avx2);
    return;
  }
  set_tune_max_nconfigs(6);
  matmul_case c(37, 70, 96, 11);
  const matmul::primitive_desc before_pd = c.pd();
  const matmul first(before_pd);
  CHECK(table_config(before_pd).empty());
  const tune_stats s0 = get_tune_stats();

  set_tune(true);
  CHECK(get_tune());
  c.run(first);  // tunes, then runs with its own (default) configuration
  CHECK(c.bad() == 0);
  const tune_stats s1 = get_tune_stats();
  CHECK(s1.tuned == s0.tuned + 1);
  CHECK(s1.failed == s0.failed);
  CHECK(s1.wrong_candidates == s0.wrong_candidates);
  CHECK(s1.seconds > s0.seconds);
  CHECK(s1.device_timed_runs == s0.device_timed_runs);  // CPU kernels: the clock times them
  const std::string winner = table_config(before_pd);
  REQUIRE_FALSE(winner.empty());
  auto entry =
      global_tune_table().find(tune_device_of(cpu()), backend::impl_of(before_pd).problem_key());
  REQUIRE(entry);
  CHECK(entry->implementation == "jit:matmul");
  CHECK(entry->time_ns > 0);
  CHECK(entry->time_ns <= entry->default_time_ns);
  CHECK(entry->description.rfind("matmul src:", 0) == 0);
  // A winner that replaced the default passed the warm confirmation (both
  // built at once, run by index): it was not slower warm. When the default
  // stood there is no warm figure.
  REQUIRE(backend::impl_of(before_pd).config());
  if (winner != backend::impl_of(before_pd).config()->to_json()) {
    CHECK(entry->warm_time_ns > 0);
    CHECK(entry->warm_time_ns <= entry->warm_default_time_ns);
  } else {
    CHECK(entry->warm_time_ns == 0);
    CHECK(entry->warm_default_time_ns == 0);
  }

  // Later executions never tune again, of this primitive or another of
  // the same problem.
  c.run(first);
  c.run(matmul(before_pd));
  CHECK(get_tune_stats().tuned == s1.tuned);
  CHECK(c.bad() == 0);

  // With tuning off, a new descriptor has the winner's configuration.
  set_tune(false);
  const matmul::primitive_desc after_pd = c.pd();
  REQUIRE(backend::impl_of(after_pd).config());
  CHECK(backend::impl_of(after_pd).config()->to_json() == winner);
  CHECK(backend::impl_of(after_pd).problem_key() == backend::impl_of(before_pd).problem_key());
  const matmul tuned(after_pd);
  c.run(tuned);
  CHECK(c.bad() == 0);
  CHECK(get_tune_stats().tuned == s1.tuned);
  set_tune(false);
  set_tune_max_nconfigs(40);
}

TEST_CASE("the tunable attribute overrides the switch and stays out of the key",
          "[autotune][runtime]") {
  if (!jit()) {
    CHECK(effective_isa() < cpu_isa::avx2);
    return;
  }
  set_tune_max_nconfigs(3);
  set_tune(true);
  matmul_case off(19, 33, 40, 21);
  off.attr.set_tunable(false);
  const tune_stats s0 = get_tune_stats();
  off.run(matmul(off.pd()));
  CHECK(get_tune_stats().tuned == s0.tuned);
  CHECK(table_config(off.pd()).empty());

  set_tune(false);
  matmul_case on(19, 33, 40, 21);
  on.attr.set_tunable(true);
  // The same primitive key (and blob id) whatever `tunable` says.
  CHECK(on.pd().cache_blob_id() == off.pd().cache_blob_id());
  matmul_case unset(19, 33, 40, 21);
  CHECK(unset.pd().cache_blob_id() == off.pd().cache_blob_id());
  on.run(matmul(on.pd()));
  CHECK(get_tune_stats().tuned == s0.tuned + 1);
  CHECK_FALSE(table_config(on.pd()).empty());
  CHECK(on.bad() == 0);
  set_tune_max_nconfigs(40);
}

TEST_CASE("every matmul configuration tuning may choose computes the reference",
          "[autotune][runtime]") {
  if (!jit()) {
    CHECK(effective_isa() < cpu_isa::avx2);
    return;
  }
  auto [m, n, k] =
      GENERATE(std::tuple<int, int, int>{1, 1, 1}, std::tuple<int, int, int>{13, 29, 7},
               std::tuple<int, int, int>{64, 64, 64}, std::tuple<int, int, int>{50, 130, 300});
  matmul_case c(m, n, k, 5);
  const auto configs = sampled_configs(c.pd(), 10);
  REQUIRE_FALSE(configs.empty());
  for (const backend::kernel_config& cfg : configs) {
    INFO(cfg.to_json());
    const forced_config force(cfg);
    const matmul::primitive_desc pd = c.pd();
    REQUIRE(backend::impl_of(pd).config() == cfg);
    c.run(matmul(pd));
    CHECK(c.bad() == 0);
  }
}

// Run alone by CTest (tests/autotune/CMakeLists.txt): the same creations,
// tiered, so the process exits while the background pool still compiles
// specialized kernels. That used to crash the exit (LLVM state the exit had
// destroyed, 8 exits out of 8 in a shared build); the exit must be clean.
TEST_CASE("exit while tiered compilations of many configurations run", "[.][tiered_exit]") {
  if (!jit()) return;
  for (auto [m, n, k] :
       {std::tuple<int, int, int>{13, 29, 7}, std::tuple<int, int, int>{64, 64, 64},
        std::tuple<int, int, int>{50, 130, 300}}) {
    matmul_case c(m, n, k, 5);
    for (const backend::kernel_config& cfg : sampled_configs(c.pd(), 10)) {
      const forced_config force(cfg, jit_mode::tiered);
      c.run(matmul(c.pd()));
      CHECK(c.bad() == 0);
    }
  }
}

TEST_CASE("every convolution configuration tuning may choose computes the reference",
          "[autotune][runtime]") {
  if (!jit()) {
    CHECK(effective_isa() < cpu_isa::avx2);
    return;
  }
  struct shape {
    int n, ic, ih, iw, oc, kh, kw, stride, pad;
  };
  // The last two have K panels (ic_block) in their spaces: odd channel
  // counts, a 3x3 and a 1x1 kernel.
  const shape s = GENERATE(shape{1, 16, 8, 8, 32, 3, 3, 1, 1}, shape{2, 3, 11, 9, 5, 3, 3, 2, 1},
                           shape{1, 8, 6, 6, 12, 1, 1, 1, 0}, shape{1, 37, 7, 9, 50, 3, 3, 1, 1},
                           shape{2, 70, 6, 6, 33, 1, 1, 1, 0});
  const int oh = (s.ih + 2 * s.pad - s.kh) / s.stride + 1;
  const int ow = (s.iw + 2 * s.pad - s.kw) / s.stride + 1;
  memory src = make({s.n, s.ic, s.ih, s.iw}, tag::nchw, 1);
  memory wei = make({s.oc, s.ic, s.kh, s.kw}, tag::oihw, 2);
  memory bias = make({s.oc}, tag::a, 3);
  memory dst(memory::desc({s.n, s.oc, oh, ow}, data_type::f32, tag::nchw), cpu());
  std::vector<double> ref(static_cast<std::size_t>(s.n) * s.oc * oh * ow);
  for (int b = 0; b < s.n; ++b)
    for (int o = 0; o < s.oc; ++o)
      for (int y = 0; y < oh; ++y)
        for (int x = 0; x < ow; ++x) {
          double acc = data(bias)[o];
          for (int i = 0; i < s.ic; ++i)
            for (int ky = 0; ky < s.kh; ++ky)
              for (int kx = 0; kx < s.kw; ++kx) {
                const int iy = y * s.stride - s.pad + ky, ix = x * s.stride - s.pad + kx;
                if (iy < 0 || iy >= s.ih || ix < 0 || ix >= s.iw) continue;
                acc += double(data(src)[((b * s.ic + i) * s.ih + iy) * s.iw + ix]) *
                       data(wei)[((o * s.ic + i) * s.kh + ky) * s.kw + kx];
              }
          ref[((static_cast<std::size_t>(b) * s.oc + o) * oh + y) * ow + x] = acc;
        }
  const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                    src.get_desc(), wei.get_desc(), bias.get_desc(), dst.get_desc(),
                                    {s.stride, s.stride}, {s.pad, s.pad}, {s.pad, s.pad});
  const convolution_forward::primitive_desc heuristic(d, cpu());
  auto configs = sampled_configs(heuristic, 8);
  REQUIRE_FALSE(configs.empty());
  // And the heuristic's configuration with a K panel, an N panel and each
  // thread partition, where the descriptor takes them.
  const backend::kernel_config def = *backend::impl_of(heuristic).config();
  const std::vector<std::vector<std::pair<std::string, int>>> blockings = {
      {{"ic_block", 16}}, {{"order", 1}, {"oc_panel", 2}}, {{"thr_oc", 1}}, {{"thr_oc", 2}}};
  for (const auto& values : blockings) {
    backend::kernel_config cfg;
    for (const auto& f : def.fields()) {
      std::int64_t v = f.value;
      for (const auto& [name, value] : values) {
        if (name == f.name) v = value;
      }
      cfg.add(f.name, v);
    }
    if (backend::impl_of(heuristic).validate_config(cfg)) configs.push_back(cfg);
  }
  for (const backend::kernel_config& cfg : configs) {
    INFO(cfg.to_json());
    const forced_config force(cfg);
    const convolution_forward::primitive_desc pd(d, cpu());
    REQUIRE(backend::impl_of(pd).config() == cfg);
    std::memset(dst.get_data_handle(), 0xff, dst.get_desc().size_bytes());
    convolution_forward(pd).execute(stream(cpu()), {{PRIMCACHE_ARG_SRC, src},
                                                    {PRIMCACHE_ARG_WEIGHTS, wei},
                                                    {PRIMCACHE_ARG_BIAS, bias},
                                                    {PRIMCACHE_ARG_DST, dst}});
    CHECK(mismatches(ref, dst) == 0);
  }
}

TEST_CASE("a convolution tunes on its first execution", "[autotune][runtime]") {
  if (!jit()) {
    CHECK(effective_isa() < cpu_isa::avx2);
    return;
  }
  set_tune_max_nconfigs(4);
  memory src = make({1, 8, 10, 10}, tag::nchw, 1);
  memory wei = make({16, 8, 3, 3}, tag::oihw, 2);
  memory dst(memory::desc({1, 16, 10, 10}, data_type::f32, tag::nchw), cpu());
  const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                    src.get_desc(), wei.get_desc(), memory::desc(), dst.get_desc(),
                                    {1, 1}, {1, 1}, {1, 1});
  primitive_attr attr;
  attr.set_tunable(true);
  const convolution_forward::primitive_desc pd(d, attr, cpu());
  const tune_stats s0 = get_tune_stats();
  convolution_forward(pd).execute(
      stream(cpu()),
      {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}});
  const tune_stats s1 = get_tune_stats();
  CHECK(s1.tuned == s0.tuned + 1);
  CHECK(s1.wrong_candidates == s0.wrong_candidates);
  CHECK_FALSE(table_config(pd).empty());
  set_tune_max_nconfigs(40);
}

TEST_CASE("tune settings refuse bad values", "[autotune][runtime]") {
  CHECK_THROWS_AS(set_tune_max_nconfigs(0), error);
  CHECK_THROWS_AS(set_tune_max_nconfigs(1001), error);
  set_tune_max_nconfigs(1000);
  CHECK(get_tune_max_nconfigs() == 1000);
  set_tune_max_nconfigs(40);
  if (get_tune_table_path().empty()) {
    try {
      save_tune_table();
      FAIL("save_tune_table without a path did not throw");
    } catch (const error& e) {
      CHECK(e.code() == status::invalid_arguments);
    }
  }
  try {
    save_tune_table("/nonexistent-dir-primcache/t.json");
    FAIL("saving into a missing directory did not throw");
  } catch (const error& e) {
    CHECK(e.code() == status::runtime_error);
  }
}

TEST_CASE("the C API sets the switch and saves the table", "[autotune][runtime][c_api]") {
  int on = -1;
  CHECK(pc_set_tune(1) == pc_success);
  CHECK(pc_get_tune(&on) == pc_success);
  CHECK(on == 1);
  CHECK(control().get_switch("tune"));  // the console's switch is the same one
  CHECK(pc_set_tune(0) == pc_success);
  CHECK(pc_get_tune(&on) == pc_success);
  CHECK(on == 0);
  control().set_switch("tune", true);
  CHECK(get_tune());
  control().set_switch("tune", false);
  CHECK(pc_get_tune(nullptr) == pc_invalid_arguments);
  CHECK(pc_set_tune_max_nconfigs(0) == pc_invalid_arguments);
  CHECK(pc_set_tune_max_nconfigs(40) == pc_success);
  const std::string path =
      (std::filesystem::temp_directory_path() / "primcache-c-api-tune.json").string();
  global_tune_table().put("cpu:test", key_writer().str("c api").finish(),
                          tune_entry{"jit:matmul", "{}", 1, 2, "c api"});
  std::size_t entries = 0;
  REQUIRE(pc_save_tune_table(path.c_str(), &entries) == pc_success);
  CHECK(entries >= 1);
  tune_table back;
  REQUIRE(back.load_file(path, version().version));
  CHECK(back.find("cpu:test", key_writer().str("c api").finish()));
  std::filesystem::remove(path);
  CHECK(pc_save_tune_table("/nonexistent-dir-primcache/t.json", nullptr) == pc_runtime_error);
  global_tune_table().erase("cpu:test", key_writer().str("c api").finish().bytes());
}

TEST_CASE("primitives tune from several threads at once", "[autotune][runtime][threads]") {
  if (!jit()) {
    CHECK(effective_isa() < cpu_isa::avx2);
    return;
  }
  set_tune_max_nconfigs(3);
  const tune_stats s0 = get_tune_stats();
  // Threads 0 and 1 share a problem (one tunes it, the other runs it as it
  // is or after it); 2 and 3 have their own.
  const int shapes[4][3] = {{23, 45, 67}, {23, 45, 67}, {31, 17, 50}, {8, 90, 33}};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      matmul_case c(shapes[t][0], shapes[t][1], shapes[t][2], 40 + t);
      c.attr.set_tunable(true);
      const matmul p(c.pd());
      for (int i = 0; i < 3; ++i) {
        c.run(p);
        bad += c.bad();
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(bad.load() == 0);
  const tune_stats s1 = get_tune_stats();
  CHECK(s1.tuned == s0.tuned + 3);
  CHECK(s1.failed == s0.failed);
  set_tune_max_nconfigs(40);
}

TEST_CASE("the C API sets the tunable attribute", "[autotune][runtime][c_api]") {
  CHECK(pc_primitive_attr_set_tunable(nullptr, 1) == pc_invalid_arguments);
  if (!jit()) {
    CHECK(effective_isa() < cpu_isa::avx2);
    return;
  }
  set_tune(false);
  set_tune_max_nconfigs(2);
  pc_engine_t eng = nullptr;
  REQUIRE(pc_engine_create(&eng, pc_engine_cpu, 0) == pc_success);
  const int64_t a_dims[2] = {12, 28}, b_dims[2] = {28, 20}, c_dims[2] = {12, 20};
  pc_memory_desc_t a = nullptr, b = nullptr, c = nullptr;
  REQUIRE(pc_memory_desc_create_with_tag(&a, 2, a_dims, pc_f32, pc_tag_ab) == pc_success);
  REQUIRE(pc_memory_desc_create_with_tag(&b, 2, b_dims, pc_f32, pc_tag_ab) == pc_success);
  REQUIRE(pc_memory_desc_create_with_tag(&c, 2, c_dims, pc_f32, pc_tag_ab) == pc_success);
  pc_primitive_attr_t attr = nullptr;
  REQUIRE(pc_primitive_attr_create(&attr) == pc_success);
  REQUIRE(pc_primitive_attr_set_tunable(attr, 1) == pc_success);
  pc_primitive_desc_t pd = nullptr;
  REQUIRE(pc_matmul_primitive_desc_create(&pd, eng, a, b, nullptr, c, attr) == pc_success);
  pc_primitive_t prim = nullptr;
  REQUIRE(pc_primitive_create(&prim, pd) == pc_success);
  pc_memory_t ma = nullptr, mb = nullptr, mc = nullptr;
  REQUIRE(pc_memory_create(&ma, a, eng, PC_MEMORY_ALLOCATE) == pc_success);
  REQUIRE(pc_memory_create(&mb, b, eng, PC_MEMORY_ALLOCATE) == pc_success);
  REQUIRE(pc_memory_create(&mc, c, eng, PC_MEMORY_ALLOCATE) == pc_success);
  pc_stream_t strm = nullptr;
  REQUIRE(pc_stream_create(&strm, eng) == pc_success);
  const tune_stats s0 = get_tune_stats();
  pc_exec_arg_t args[3] = {
      {PRIMCACHE_ARG_SRC, ma}, {PRIMCACHE_ARG_WEIGHTS, mb}, {PRIMCACHE_ARG_DST, mc}};
  CHECK(pc_primitive_execute(prim, strm, 3, args) == pc_success);
  CHECK(get_tune_stats().tuned == s0.tuned + 1);  // tunable although the switch is off
  pc_stream_destroy(strm);
  pc_memory_destroy(ma);
  pc_memory_destroy(mb);
  pc_memory_destroy(mc);
  pc_primitive_destroy(prim);
  pc_primitive_desc_destroy(pd);
  pc_primitive_attr_destroy(attr);
  pc_memory_desc_destroy(a);
  pc_memory_desc_destroy(b);
  pc_memory_desc_destroy(c);
  pc_engine_destroy(eng);
  set_tune_max_nconfigs(40);
}

TEST_CASE("use_tune_table_file replaces the table with a file's and writes there",
          "[autotune][runtime][table_file]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("primcache-use-table-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "t.json").string();
  CHECK_THROWS_AS(use_tune_table_file(""), error);

  SECTION("a missing file: a first run, the table empty, saved there") {
    global_tune_table().put("cpu:test", key_writer().str("before").finish(),
                            tune_entry{"jit:matmul", "{}", 1, 2, "before"});
    const tune_table_file_report r = use_tune_table_file(path);
    CHECK_FALSE(r.found);
    CHECK(r.entries == 0);
    CHECK(r.ignored.empty());
    CHECK(global_tune_table().size() == 0);  // what was there before is dropped
    CHECK(get_tune_table_path() == path);
    global_tune_table().put("cpu:test", key_writer().str("after").finish(),
                            tune_entry{"jit:matmul", "{}", 1, 2, "after"});
    CHECK(save_tune_table() == 1);
    tune_table back;
    REQUIRE(back.load_file(path, version().version));
    CHECK(back.find("cpu:test", key_writer().str("after").finish()));
  }
  SECTION("a table's entry is what the next descriptor of its problem is created with") {
    if (!jit()) {
      CHECK(effective_isa() < cpu_isa::avx2);
      return;
    }
    matmul_case c(21, 43, 58, 3);
    const matmul::primitive_desc cached = c.pd();  // in the descriptor cache from now on
    const auto configs = sampled_configs(cached, 8);
    REQUIRE_FALSE(configs.empty());
    // A configuration other than the heuristic's.
    const backend::kernel_config* other = nullptr;
    for (const auto& cfg : configs) {
      if (cfg != *backend::impl_of(cached).config()) other = &cfg;
    }
    REQUIRE(other != nullptr);
    tune_table file;
    file.put(tune_device_of(cpu()), backend::impl_of(cached).problem_key(),
             tune_entry{"jit:matmul", other->to_json(), 1, 2, "from a file"});
    REQUIRE(file.save_file(path, version().version));
    const tune_table_file_report r = use_tune_table_file(path);
    CHECK(r.found);
    CHECK(r.entries == 1);
    CHECK(r.ignored.empty());
    // The cached descriptor was invalidated: a new one reads the entry.
    const matmul::primitive_desc pd = c.pd();
    REQUIRE(backend::impl_of(pd).config());
    CHECK(*backend::impl_of(pd).config() == *other);
    c.run(matmul(pd));
    CHECK(c.bad() == 0);
  }
  SECTION("a corrupt file: ignored with its reason, the table empty") {
    std::ofstream(path) << "{\"format\": 7";
    global_tune_table().put("cpu:test", key_writer().str("before").finish(),
                            tune_entry{"jit:matmul", "{}", 1, 2, "before"});
    const tune_table_file_report r = use_tune_table_file(path);
    CHECK(r.found);
    CHECK(r.entries == 0);
    CHECK_THAT(r.ignored, Catch::StartsWith(path + ": "));
    CHECK(global_tune_table().size() == 0);
    CHECK(get_tune_table_path() == path);
  }
  SECTION("another library version's file: ignored, saying whose") {
    tune_table file;
    file.put("cpu:test", key_writer().str("old").finish(),
             tune_entry{"jit:matmul", "{}", 1, 2, "old"});
    REQUIRE(file.save_file(path, "0.0.1-old"));
    const tune_table_file_report r = use_tune_table_file(path);
    CHECK(r.found);
    CHECK(r.entries == 0);
    CHECK(r.ignored == path + " was written by primcache 0.0.1-old, this is " + version().version);
    CHECK(global_tune_table().size() == 0);
  }
  SECTION("an unreadable path (a directory): ignored with its reason") {
    const tune_table_file_report r = use_tune_table_file(dir.string());
    CHECK(r.found);
    CHECK_FALSE(r.ignored.empty());
    CHECK(r.entries == 0);
  }
  std::filesystem::remove_all(dir);
  global_tune_table().clear();
}
