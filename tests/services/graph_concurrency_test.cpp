// primcached's workload threads sharing one graph executor (runner.hpp): 4
// threads run a graph with per-run transforms and a constant transform; every
// run is counted once, per-run transforms ran once per run, the constant was
// transformed once and taken from the cache by every other run, and
// control()'s primcache_graph_* series say the same as executor::stats().
// Part of concurrency_tests (the tsan job runs it under ThreadSanitizer).
#include <chrono>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "primcache/control/registry.hpp"
#include "runner.hpp"
#include "workload.hpp"

namespace {

using namespace std::chrono_literals;
using namespace primcache;
using namespace primcache::primcached;

// x (nchw) -> conv in nhwc -> y delivered in nchw: two transforms a run;
// w2 stored transposed (ba): transformed once into the constant cache.
const std::string graph_workload = R"({"name": "conc", "graphs": [{"name": "conc_graph",
  "graph": {"name": "g",
    "tensors": [
      {"name": "x", "shape": [1, 8, 6, 6], "type": "f32", "role": "input"},
      {"name": "w", "shape": [8, 8, 3, 3], "type": "f32", "role": "constant"},
      {"name": "a", "shape": [4, 16], "type": "f32", "role": "input"},
      {"name": "w2", "shape": [16, 8], "type": "f32", "layout": "ba", "role": "constant"},
      {"name": "y", "layout": "abcd", "role": "output"},
      {"name": "z", "role": "output"}],
    "ops": [
      {"name": "conv", "kind": "convolution", "inputs": ["x", "w"], "outputs": ["y"],
       "layout": "acdb", "attributes": {"padding": [1, 1]}},
      {"name": "fc", "kind": "matmul", "inputs": ["a", "w2"], "outputs": ["z"]}]}}]})";

double series_value(const std::string& name, const metric_labels& labels) {
  for (const metric_family_info& f : control().list_metrics()) {
    if (f.name != name) continue;
    for (const metric_sample& s : f.samples) {
      if (s.labels == labels) return s.value;
    }
  }
  return -1;
}

}  // namespace

TEST_CASE("Workload threads share one graph executor and count each run and transform once",
          "[services][graph][concurrency]") {
  const workload w = load_workload(graph_workload, "conc.json");
  REQUIRE(w.graphs.size() == 1);
  const executor& exec = *w.graphs[0].exec;

  workload_runner runner(w, 4);
  runner.start();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (exec.stats().runs < 200 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  runner.stop();
  const interval_stats counted = runner.take_interval();
  const executor_stats s = exec.stats();

  CHECK(counted.failures == 0);
  CHECK(counted.executions == 0);  // no primitives in this workload
  REQUIRE(s.runs >= 8);
  CHECK(counted.graph_runs == s.runs);

  std::uint64_t constant_sites = 0;
  for (const transform_record& r : s.transforms) {
    INFO(r.tensor << ": " << r.from.to_string() << " -> " << r.to.to_string());
    if (r.constant) {
      ++constant_sites;
      CHECK(r.executions == 1);  // once, however many threads raced for it
    } else {
      CHECK(r.executions == s.runs);
    }
    std::string steps;
    for (transform_kind k : r.steps)
      steps += (steps.empty() ? "" : ",") + std::string(to_string(k));
    const metric_labels labels = {{"from", r.from.to_string()},
                                  {"graph", "conc_graph"},
                                  {"steps", steps},
                                  {"to", r.to.to_string()}};
    CHECK(series_value("primcache_graph_transform_executions_total", labels) ==
          static_cast<double>(r.executions));
    CHECK(series_value("primcache_graph_transform_bytes_total", labels) ==
          static_cast<double>(r.executions * r.bytes));
  }
  CHECK(s.transforms.size() == 3);  // x in, y out, w2 once
  REQUIRE(constant_sites == 1);
  CHECK(s.constant_transforms == 1);
  CHECK(s.constant_cache_hits == s.runs - 1);
  CHECK(series_value("primcache_graph_runs_total", {{"graph", "conc_graph"}}) ==
        static_cast<double>(s.runs));
  CHECK(series_value("primcache_graph_constant_transforms_total", {{"graph", "conc_graph"}}) == 1);
  CHECK(series_value("primcache_graph_constant_cache_hits_total", {{"graph", "conc_graph"}}) ==
        static_cast<double>(s.constant_cache_hits));
}
