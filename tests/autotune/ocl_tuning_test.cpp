// Tune mode on the OpenCL backend (PoCL on CI) with real kernels: the
// candidate spaces of the matmul and the convolution, every configuration
// tuning may choose computing the reference, the first execution tuning
// into a table keyed by the device, later descriptors taking the winner,
// and the control entries and metrics tuning reports through.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "kernels/config_space.hpp"
#include "ocl_support.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/metrics/render.hpp"
#include "primcache/runtime/version.hpp"

using namespace primcache;
using namespace ocl_tune_test;

namespace {

// Every configuration of the space validates, converts back to itself and
// appears once; the default is accepted too.
void check_space(const primitive_desc& pd) {
  const auto& pdi = backend::impl_of(pd);
  const auto def = pdi.default_config();
  REQUIRE(def);
  CHECK(pdi.validate_config(*def));
  CHECK(pdi.config() == def);  // no table entry, no source: the heuristic's
  const backend::config_space space = pdi.config_candidates();
  REQUIRE(space.size() > 1);
  std::set<std::string> seen;
  for (std::uint64_t i = 0; i < space.size(); ++i) {
    const backend::kernel_config c = space.at(i);
    const std::string json = c.to_json();
    INFO(json);
    CHECK(seen.insert(json).second);
    CHECK(pdi.validate_config(c));
    auto back = backend::kernel_config::from_json(json);
    REQUIRE(back);
    CHECK(back.value() == c);
  }
}

std::uint64_t counter_value(const std::string& name, const std::string& result) {
  for (const metric_family_info& f : control().list_metrics()) {
    if (f.name != name) continue;
    for (const metric_sample& s : f.samples) {
      for (const auto& [k, v] : s.labels) {
        if (k == "result" && v == result) return static_cast<std::uint64_t>(s.value);
      }
    }
  }
  return ~std::uint64_t{0};
}

}  // namespace

TEST_CASE("OpenCL matmul and convolution candidate spaces are valid and distinct",
          "[autotune][ocl][space]") {
  for (auto [m, n, k] : {std::tuple{7, 13, 5}, std::tuple{64, 64, 64}, std::tuple{1, 300, 20}}) {
    INFO(m << "x" << n << "x" << k);
    check_space(matmul_case(m, n, k, 1).pd());
  }
  check_space(conv_case(16, 24, 14, 3, 1, 1, 1).pd());
  check_space(conv_case(3, 8, 9, 1, 2, 0, 1).pd());
}

// The convolution's space on a CPU device (PoCL) is the register tile's:
// no local tiling, the channel loop unrolled 1, 2, 4 or 8 times up to the
// group's input channels; on a GPU local tiling too (ic_unroll canonical 0).
TEST_CASE("the OpenCL convolution's space unrolls the register tile's channel loop",
          "[autotune][ocl][space]") {
  using namespace ocl_internal;
  auto problem = [](std::int64_t ic) {
    conv_problem p;
    p.src = memory_desc({1, ic, 14, 14}, data_type::f32, format_tag::nhwc);
    p.weights = memory_desc({24, ic, 3, 3}, data_type::f32, format_tag::hwio);
    p.dst = memory_desc({1, 24, 14, 14}, data_type::f32, format_tag::nhwc);
    p.pad_t = p.pad_l = p.pad_b = p.pad_r = 1;
    return p;
  };
  device_entry cpu, gpu;
  cpu.type = CL_DEVICE_TYPE_CPU;
  gpu.type = CL_DEVICE_TYPE_GPU;
  cpu.max_work_group_size = gpu.max_work_group_size = 1024;
  cpu.local_mem_size = gpu.local_mem_size = 64 * 1024;
  auto unrolls = [](const std::vector<conv_config>& space, bool local) {
    std::set<int> u;
    for (const conv_config& c : space) {
      if (c.local_tiling == local) u.insert(c.ic_unroll);
    }
    return u;
  };
  const auto on_cpu = conv_config_candidates(cpu, problem(16));
  REQUIRE(!on_cpu.empty());
  CHECK(unrolls(on_cpu, true).empty());
  CHECK(unrolls(on_cpu, false) == std::set<int>{1, 2, 4, 8});
  CHECK(unrolls(conv_config_candidates(cpu, problem(3)), false) == std::set<int>{1, 2});
  const auto on_gpu = conv_config_candidates(gpu, problem(16));
  CHECK(unrolls(on_gpu, true) == std::set<int>{0});
  CHECK(unrolls(on_gpu, false) == std::set<int>{1, 2, 4, 8});
  // Each converts to fields and back unchanged.
  for (const conv_config& c : on_cpu) {
    auto back = conv_config_from_fields(to_fields(c));
    REQUIRE(back);
    CHECK(back.value() == c);
  }
}

TEST_CASE("OpenCL configurations a descriptor cannot run are refused with a reason",
          "[autotune][ocl][space]") {
  const matmul::primitive_desc mpd = matmul_case(33, 17, 65, 2).pd();
  const auto& mm = backend::impl_of(mpd);
  backend::kernel_config good = *mm.default_config();
  auto with = [&](const backend::kernel_config& base, const std::string& name, std::int64_t v) {
    backend::kernel_config c;
    for (const auto& f : base.fields()) c.add(f.name, f.name == name ? v : f.value);
    return c;
  };
  auto refused = [](const result<bool>& r, const std::string& what) {
    INFO(what);
    REQUIRE_FALSE(r);
    CHECK(r.why().code == status::invalid_arguments);
    CHECK_THAT(r.why().message, Catch::Contains(what));
  };
  refused(mm.validate_config(with(good, "vec_width", 3)), "vec_width not 1/2/4/8/16");
  refused(mm.validate_config(with(good, "tile_m", 0)), "tile_m must be in 1..1024");
  refused(mm.validate_config(with(good, "local_tiling", 2)), "local_tiling must be in 0..1");
  // 4 * 1024 * (256 * 16 + 1 * 16) bytes = 16.8 MB of local memory, in a work-group of 256
  // that every device allows: PoCL offers one core's L2 cache (1 MiB on some machines, 2 MiB on
  // others), GPUs 48-64 KiB.
  backend::kernel_config big = good;
  for (auto [name, v] :
       {std::pair{"wg_m", 256}, std::pair{"wg_n", 1}, std::pair{"tile_m", 16},
        std::pair{"tile_n", 16}, std::pair{"tile_k", 1024}, std::pair{"local_tiling", 1}}) {
    big = with(big, name, v);
  }
  refused(mm.validate_config(big), "bytes of local memory exceed");
  refused(mm.validate_config(backend::kernel_config().add("wg_m", 1)), "matmul config");
  const convolution_forward::primitive_desc cpd = conv_case(8, 8, 7, 3, 1, 1, 3).pd();
  const auto& cv = backend::impl_of(cpd);
  refused(cv.validate_config(good), "convolution config");  // the matmul's fields
  refused(cv.validate_config(with(*cv.default_config(), "vec_width", 16)),
          "vec_width does not divide tile_oc");
  refused(cv.validate_config(with(*cv.default_config(), "ic_unroll", 17)),
          "ic_unroll must be in 0..16");
  // create_impl_with refuses them too, by throwing.
  CHECK_THROWS_WITH(mm.create_impl_with(gpu(), with(good, "vec_width", 3)),
                    Catch::Contains("vec_width not 1/2/4/8/16"));
}

TEST_CASE("every OpenCL matmul configuration tuning may choose computes the reference",
          "[autotune][ocl][reference][kernel_sweep]") {
  for (auto [m, n, k] : {std::tuple{7, 13, 5}, std::tuple{33, 17, 65}, std::tuple{64, 64, 64}}) {
    matmul_case c(m, n, k, 5);
    const auto configs = sampled_configs(c.pd(), 6);
    REQUIRE(configs.size() >= 4);
    for (const backend::kernel_config& cfg : configs) {
      INFO(m << "x" << n << "x" << k << " " << cfg.to_json());
      const forced_config force(cfg);
      const matmul::primitive_desc pd = c.pd();
      REQUIRE(backend::impl_of(pd).config() == cfg);
      c.run(matmul(pd));
      CHECK(c.bad() == 0);
    }
  }
}

TEST_CASE("every OpenCL convolution configuration tuning may choose computes the reference",
          "[autotune][ocl][reference][kernel_sweep]") {
  // 3x3 with padding; a strided 1x1 with odd sizes.
  for (auto shape : {std::tuple{8, 16, 9, 3, 1, 1}, std::tuple{5, 12, 11, 1, 2, 0}}) {
    auto [ic, oc, hw, kk, stride, pad] = shape;
    conv_case c(ic, oc, hw, kk, stride, pad, 7);
    const auto configs = sampled_configs(c.pd(), 6);
    REQUIRE(configs.size() >= 4);
    for (const backend::kernel_config& cfg : configs) {
      INFO(ic << "->" << oc << " " << hw << " k" << kk << " s" << stride << " " << cfg.to_json());
      const forced_config force(cfg);
      const convolution_forward::primitive_desc pd = c.pd();
      REQUIRE(backend::impl_of(pd).config() == cfg);
      c.run(convolution_forward(pd));
      CHECK(c.bad() == 0);
    }
  }
}

TEST_CASE("a tunable OpenCL matmul tunes on its first execution, later descriptors get the winner",
          "[autotune][ocl][tune]") {
  set_tune_max_nconfigs(5);
  const tune_stats s0 = get_tune_stats();
  const std::uint64_t kept0 = counter_value("primcache_tune_primitives_total", "kept");
  const std::uint64_t replaced0 = counter_value("primcache_tune_primitives_total", "replaced");
  const std::uint64_t measured0 = counter_value("primcache_tune_candidates_total", "measured");
  matmul_case c(40, 72, 56, 11);
  c.attr.set_tunable(true);
  const matmul::primitive_desc pd = c.pd();
  CHECK(table_config(pd).empty());
  const matmul tuned_on_first(pd);
  c.run(tuned_on_first);  // tunes, then runs with its own code
  CHECK(c.bad() == 0);
  const tune_stats s1 = get_tune_stats();
  CHECK(s1.tuned == s0.tuned + 1);
  CHECK(s1.failed == s0.failed);
  CHECK(s1.wrong_candidates == s0.wrong_candidates);
  // Every run was timed by PoCL's profiling events: at least the default's
  // five runs twice and five runs of another candidate.
  CHECK(s1.device_timed_runs >= s0.device_timed_runs + 15);
  // The table's entry: this device, this implementation, a configuration
  // the descriptor accepts.
  const std::string device = tune_device_of(gpu());
  CHECK(device.rfind("ocl:", 0) == 0);
  auto e = global_tune_table().find(device, backend::impl_of(pd).problem_key());
  REQUIRE(e);
  CHECK(e->implementation == "ocl:matmul");
  CHECK(e->time_ns > 0);
  CHECK(e->time_ns <= e->default_time_ns);
  auto cfg = backend::kernel_config::from_json(e->config);
  REQUIRE(cfg);
  CHECK(backend::impl_of(pd).validate_config(cfg.value()));
  // Metrics: one more primitive kept or replaced; the candidates measured.
  const std::uint64_t kept1 = counter_value("primcache_tune_primitives_total", "kept");
  const std::uint64_t replaced1 = counter_value("primcache_tune_primitives_total", "replaced");
  CHECK(kept1 + replaced1 == kept0 + replaced0 + 1);
  CHECK(counter_value("primcache_tune_candidates_total", "measured") >= measured0 + 2);
  // A new descriptor, tuning off: the winner's configuration, correct.
  c.attr.set_tunable(false);
  const matmul::primitive_desc again = c.pd();
  CHECK(backend::impl_of(again).config() == cfg.value());
  c.run(matmul(again));
  CHECK(c.bad() == 0);
  // Later executions never tune again.
  c.run(tuned_on_first);
  CHECK(get_tune_stats().tuned == s1.tuned);
  set_tune_max_nconfigs(40);
}

TEST_CASE("a tunable OpenCL convolution tunes on its first execution", "[autotune][ocl][tune]") {
  set_tune_max_nconfigs(5);
  const tune_stats s0 = get_tune_stats();
  conv_case c(12, 32, 10, 3, 1, 1, 21);
  c.attr.set_tunable(true);
  const convolution_forward::primitive_desc pd = c.pd();
  c.run(convolution_forward(pd));
  CHECK(c.bad() == 0);
  const tune_stats s1 = get_tune_stats();
  CHECK(s1.tuned == s0.tuned + 1);
  CHECK(s1.failed == s0.failed);
  CHECK(s1.wrong_candidates == s0.wrong_candidates);
  const std::string json = table_config(pd);
  REQUIRE_FALSE(json.empty());
  c.attr.set_tunable(false);
  const convolution_forward::primitive_desc again = c.pd();
  CHECK(backend::impl_of(again).config()->to_json() == json);
  c.run(convolution_forward(again));
  CHECK(c.bad() == 0);
  set_tune_max_nconfigs(40);
}

TEST_CASE(
    "OpenCL tune-table entries apply to their device and configurations the descriptor "
    "accepts only",
    "[autotune][ocl][table]") {
  matmul_case c(24, 40, 16, 31);
  const matmul::primitive_desc first = c.pd();
  const auto& pdi = backend::impl_of(first);
  const backend::kernel_config def = *pdi.default_config();
  const auto configs = sampled_configs(first, 4);
  REQUIRE(configs.size() >= 2);
  const backend::kernel_config other = configs[0] == def ? configs[1] : configs[0];
  const std::string device = tune_device_of(gpu());
  const key k = pdi.problem_key();
  auto entry = [&](const backend::kernel_config& cfg) {
    return tune_entry{"ocl:matmul", cfg.to_json(), 1.0, 2.0, "test"};
  };
  // Another device's entry is not this device's.
  global_tune_table().put("ocl:another device", k, entry(other));
  backend::set_config_source({});  // cached descriptors are not found again
  CHECK(backend::impl_of(c.pd()).config() == def);
  // This device's entry is taken, and the kernel it builds is correct.
  global_tune_table().put(device, k, entry(other));
  backend::set_config_source({});
  const matmul::primitive_desc taken = c.pd();
  CHECK(backend::impl_of(taken).config() == other);
  c.run(matmul(taken));
  CHECK(c.bad() == 0);
  // An entry the descriptor refuses falls back to the heuristic.
  backend::kernel_config bad;
  for (const auto& f : def.fields()) bad.add(f.name, f.name == "vec_width" ? 3 : f.value);
  global_tune_table().put(device, k, entry(bad));
  backend::set_config_source({});
  CHECK(backend::impl_of(c.pd()).config() == def);
  global_tune_table().erase(device, k.bytes());
  global_tune_table().erase("ocl:another device", k.bytes());
}

TEST_CASE("tune mode is in control: the switch, max_nconfigs, the metrics",
          "[autotune][ocl][control]") {
  (void)get_tune();  // the runtime's tuning state registers itself on first use
  const bool was = get_tune();
  control().set_switch("tune", true);
  CHECK(get_tune());
  control().set_switch("tune", false);
  CHECK_FALSE(get_tune());
  control().set_switch("tune", was);
  control().set_setting("tune_max_nconfigs", std::int64_t{7});
  CHECK(get_tune_max_nconfigs() == 7);
  set_tune_max_nconfigs(9);
  CHECK(std::get<std::int64_t>(control().get_setting("tune_max_nconfigs").value) == 9);
  CHECK_THROWS_AS(control().set_setting("tune_max_nconfigs", std::int64_t{0}), error);
  CHECK(get_tune_max_nconfigs() == 9);
  set_tune_max_nconfigs(40);
  std::set<std::string> names;
  for (const metric_family_info& f : control().list_metrics()) names.insert(f.name);
  for (const char* n : {"primcache_tune_primitives_total", "primcache_tune_candidates_total",
                        "primcache_tune_seconds", "primcache_tune_table_entries"}) {
    INFO(n);
    CHECK(names.count(n) == 1);
  }
  CHECK(counter_value("primcache_tune_candidates_total", "wrong") != ~std::uint64_t{0});
}

TEST_CASE("the primcache_tune_* metrics render through libs/metrics and pass promtool",
          "[autotune][ocl][metrics]") {
  (void)get_tune();  // registers the tuning state's metrics
  const std::string text = render_metrics(control());
  for (const char* line :
       {"# TYPE primcache_tune_primitives_total counter",
        "# TYPE primcache_tune_candidates_total counter", "# TYPE primcache_tune_seconds histogram",
        "# TYPE primcache_tune_table_entries gauge",
        "primcache_tune_candidates_total{result=\"wrong\"} ",
        "primcache_tune_primitives_total{result=\"kept\"} ",
        "primcache_tune_seconds_bucket{le=\"+Inf\"} ", "primcache_switch{name=\"tune\"} ",
        "primcache_setting{name=\"tune_max_nconfigs\"} "}) {
    INFO(line);
    CHECK(text.find(line) != std::string::npos);
  }
  char path[] = "/tmp/primcache_tune_metrics_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
  const std::string cmd = std::string(PRIMCACHE_PROMTOOL) + " check metrics < " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string output;
  char buf[4096];
  while (const std::size_t n = fread(buf, 1, sizeof buf, p)) output.append(buf, n);
  const int rc = pclose(p);
  unlink(path);
  INFO(output);
  CHECK(rc == 0);
}
