#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/metrics/control_collector.hpp"
#include "primcache/metrics/render.hpp"

namespace {

struct toy_stats {
  std::uint64_t hits = 0, misses = 0, waits = 0, evictions = 0, failures = 0;
};

struct entry_cache {
  std::uint64_t capacity() const { return 1024; }
  void set_capacity(std::uint64_t) {}
  std::uint64_t size() const { return 17; }
  toy_stats stats() const { return {5, 2, 1, 3, 4}; }
  void clear() {}
};

struct byte_cache : entry_cache {
  std::uint64_t capacity() const { return primcache::unlimited_capacity; }
  std::uint64_t weight() const { return 4096; }
  std::map<std::string, std::uint64_t> extra_stats() const { return {{"disk_reads", 9}}; }
};

// Runs the real promtool on `text`; returns its exit status and output.
int promtool_check(const std::string& text, std::string& output) {
  char path[] = "/tmp/primcache_metrics_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
  const std::string cmd = std::string(PRIMCACHE_PROMTOOL) + " check metrics < " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (const std::size_t n = fread(buf, 1, sizeof buf, p)) output.append(buf, n);
  const int rc = pclose(p);
  unlink(path);
  return rc;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

}  // namespace

TEST_CASE("promtool is installed, since the exposition is checked with it", "[metrics][promtool]") {
  INFO("promtool path: " << PRIMCACHE_PROMTOOL << " (Debian package `prometheus`)");
  REQUIRE(access(PRIMCACHE_PROMTOOL, X_OK) == 0);
}

TEST_CASE("the exposition of a registry with caches, metrics and switches passes promtool",
          "[metrics][promtool]") {
  primcache::control_registry r;
  entry_cache prim;
  byte_cache weights;
  auto a = r.register_cache("primitive", prim);
  auto b = r.register_cache("constant.cpu", weights, primcache::capacity_unit::bytes);
  auto sw = r.register_switch("tune", "measure configurations", true);
  auto st = r.register_setting(primcache::setting_spec::integer("threads", "", 4, 1, 8));
  auto h = r.histogram("primcache_primitive_create_seconds", "Time to create a primitive",
                       {{"engine", "cpu"}, {"source", "compile"}}, {0.001, 0.01});
  (void)r.histogram("primcache_primitive_create_seconds", "Time to create a primitive",
                    {{"engine", "cpu"}, {"source", "memory"}}, {0.001, 0.01});
  auto ex = r.counter("primcache_primitive_executions_total", "Primitive executions",
                      {{"kind", "matmul"}});
  h.observe(0.005);
  ex.add(3);
  r.set_info("build", "isa", "avx2");

  const std::string text = primcache::render_metrics(r);
  std::string output;
  const int rc = promtool_check(text, output);
  INFO(text);
  INFO("promtool: " << output);
  REQUIRE(rc == 0);

  CHECK(has_line(text, R"(primcache_cache_requests_total{cache="primitive",result="hit"} 5)"));
  CHECK(has_line(text, R"(primcache_cache_requests_total{cache="primitive",result="miss"} 2)"));
  CHECK(has_line(text, R"(primcache_cache_requests_total{cache="primitive",result="wait"} 1)"));
  CHECK(has_line(text, R"(primcache_cache_evictions_total{cache="primitive"} 3)"));
  CHECK(has_line(text, R"(primcache_cache_failures_total{cache="primitive"} 4)"));
  CHECK(has_line(text, R"(primcache_cache_entries{cache="primitive"} 17)"));
  CHECK(text.find(R"(primcache_cache_entries{cache="constant.cpu"})") == std::string::npos);
  CHECK(has_line(text, R"(primcache_cache_weight_bytes{cache="constant.cpu"} 4096)"));
  CHECK(text.find(R"(primcache_cache_weight_bytes{cache="primitive"})") == std::string::npos);
  CHECK(has_line(text, R"(primcache_cache_capacity{cache="primitive",unit="entries"} 1024)"));
  CHECK(has_line(text, R"(primcache_cache_capacity{cache="constant.cpu",unit="bytes"} +Inf)"));
  CHECK(has_line(text, R"(primcache_cache_extra{cache="constant.cpu",stat="disk_reads"} 9)"));
  CHECK(has_line(text, R"(primcache_switch{name="tune"} 1)"));
  CHECK(has_line(text, R"(primcache_setting{name="threads"} 4)"));
  CHECK(has_line(text, R"(primcache_build_info{isa="avx2",llvm="unknown",version="0.1.0"} 1)"));
  CHECK(has_line(text, R"(primcache_primitive_executions_total{kind="matmul"} 3)"));
  CHECK(has_line(
      text,
      R"(primcache_primitive_create_seconds_bucket{engine="cpu",source="compile",le="0.01"} 1)"));
  CHECK(has_line(
      text,
      R"(primcache_primitive_create_seconds_bucket{engine="cpu",source="compile",le="0.001"} 0)"));
  CHECK(has_line(
      text,
      R"(primcache_primitive_create_seconds_bucket{engine="cpu",source="memory",le="+Inf"} 0)"));
  CHECK(has_line(text,
                 R"(primcache_primitive_create_seconds_count{engine="cpu",source="memory"} 0)"));
  CHECK(has_line(text, "# TYPE primcache_primitive_create_seconds histogram"));
  CHECK(has_line(text, "# TYPE primcache_cache_requests_total counter"));
  for (const char* name : {"process_cpu_seconds_total ", "process_resident_memory_bytes ",
                           "process_start_time_seconds ", "process_open_fds "}) {
    CHECK(text.find(std::string("\n") + name) != std::string::npos);
  }
}

TEST_CASE("an empty registry still exports every built-in family and passes promtool",
          "[metrics][promtool]") {
  primcache::control_registry r;
  const std::string text = primcache::render_metrics(r);
  std::string output;
  INFO(text);
  REQUIRE(promtool_check(text, output) == 0);
  CHECK(has_line(text, "# TYPE primcache_cache_requests_total counter"));
  CHECK(has_line(text, "# TYPE primcache_switch gauge"));
  CHECK(has_line(text, "# TYPE primcache_primitive_create_seconds histogram"));
  CHECK(has_line(text, "# TYPE primcache_primitive_executions_total counter"));
  CHECK(has_line(text, R"(primcache_build_info{isa="unknown",llvm="unknown",version="0.1.0"} 1)"));
}

TEST_CASE("process metrics read /proc: resident memory and start time are plausible",
          "[metrics][process]") {
  std::map<std::string, double> values;
  for (const auto& f : primcache::collect_process_metrics()) {
    values[f.name] = f.metric.at(0).gauge.value + f.metric.at(0).counter.value;
  }
  CHECK(values.at("process_resident_memory_bytes") > 1e5);
  CHECK(values.at("process_start_time_seconds") > 1.5e9);
  CHECK(values.at("process_open_fds") >= 3);
  CHECK(values.count("process_cpu_seconds_total") == 1);
}

TEST_CASE("a registered metric whose name a built-in series uses is left out, not duplicated",
          "[metrics]") {
  primcache::control_registry r;
  (void)r.gauge("primcache_switch", "clash");
  const std::string text = primcache::render_metrics(r);
  std::size_t n = 0;
  for (std::size_t p = 0; (p = text.find("# TYPE primcache_switch ", p)) != std::string::npos;
       ++p) {
    ++n;
  }
  CHECK(n == 1);
}

TEST_CASE("a label value that is not UTF-8 is refused at registration, so the scrape stays valid",
          "[metrics][promtool][utf8]") {
  primcache::control_registry r;
  auto good = r.counter("primcache_graph_runs_total", "Graph executor runs",
                        {{"graph", "r\xc3\xa9sum\xc3\xa9 \"one\" \\ two\nlines"}});
  good.add();
  CHECK_THROWS_AS(
      r.counter("primcache_graph_runs_total", "Graph executor runs", {{"graph", "r\xe9sum\xe9"}}),
      primcache::error);
  const std::string text = primcache::render_metrics(r);
  std::string output;
  const int rc = promtool_check(text, output);
  INFO(text);
  INFO("promtool: " << output);
  CHECK(rc == 0);
  CHECK(has_line(
      text,
      "primcache_graph_runs_total{graph=\"r\xc3\xa9sum\xc3\xa9 \\\"one\\\" \\\\ two\\nlines\"} 1"));
  CHECK(text.find("r\xe9sum\xe9") == std::string::npos);
}

TEST_CASE("help text with backslashes and newlines is escaped, so the scrape stays valid",
          "[metrics][promtool]") {
  primcache::control_registry r;
  (void)r.counter("x_total", "one \\ two\nthree \\n four");
  (void)r.gauge("y", "C:\\path\\\n");
  (void)r.histogram("z_seconds", "\n\\", {}, {1.0});
  const std::string text = primcache::render_metrics(r);
  std::string output;
  const int rc = promtool_check(text, output);
  INFO(text);
  INFO("promtool: " << output);
  CHECK(rc == 0);
  CHECK(has_line(text, R"(# HELP x_total one \\ two\nthree \\n four)"));
  CHECK(has_line(text, R"(# HELP y C:\\path\\\n)"));
  CHECK(has_line(text, R"(# HELP z_seconds \n\\)"));
}
