// primcached's graph workloads (docs/primcached.md, "Graph workloads"): the
// loader directly (shipped files, a graph document as the workload, inline
// graphs, every refusal naming the file and the JSON pointer), and the daemon
// as a process: it runs a graph, its transforms reach control's metrics on
// /metrics (checked with promtool), a bad graph exits non-zero with one line,
// a graph that needs an OpenCL device fails cleanly without one, and one
// that fails every time it runs gives exit status 3 (the runner's per-entry
// counts tell it from one that fails now and then).
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "config.hpp"
#include "http_client.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/graph/graph_json.hpp"
#include "primcache/graph/op_registry.hpp"
#include "process.hpp"
#include "runner.hpp"
#include "support/sanitizers.hpp"
#include "workload.hpp"

namespace {

using namespace std::chrono_literals;
using namespace primcache;
using namespace primcache::primcached;
using primcache::test::child_process;
using primcache::test::run_program;
using primcache::test::temp_path;
using primcache::test::write_text;

const std::string source_dir = PRIMCACHE_SOURCE_DIR;
const std::string workloads_dir = source_dir + "/configs/workloads";

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The error load_workload refuses `text` with (file "w.json", graph files
// relative to `base_dir`).
error refusal(const std::string& text, const std::string& base_dir = "") {
  try {
    load_workload(text, "w.json", base_dir);
  } catch (const error& e) {
    return e;
  }
  FAIL("the workload was accepted: " << text);
  return error(status::success, "");
}

// A one-op graph: y = relu(x), 4x8.
const std::string tiny_graph = R"({"name": "tiny",
  "tensors": [{"name": "x", "shape": [4, 8], "type": "f32", "role": "input"},
              {"name": "y", "role": "output"}],
  "ops": [{"name": "act", "kind": "eltwise", "inputs": ["x"], "outputs": ["y"],
           "attributes": {"algorithm": "relu"}}]})";

// The value of control()'s series `name` whose labels include every one of
// `want` (summed over the matching series).
double metric_value(const std::string& name, const metric_labels& want) {
  double sum = 0;
  for (const metric_family_info& f : control().list_metrics()) {
    if (f.name != name) continue;
    for (const metric_sample& s : f.samples) {
      bool all = true;
      for (const auto& w : want) {
        bool found = false;
        for (const auto& l : s.labels) found = found || l == w;
        all = all && found;
      }
      if (all) sum += s.value;
    }
  }
  return sum;
}

// Whether control() has the series `name` with exactly `labels`.
bool has_series(const std::string& name, const metric_labels& labels) {
  for (const metric_family_info& f : control().list_metrics()) {
    if (f.name != name) continue;
    for (const metric_sample& s : f.samples) {
      if (s.labels == labels) return true;
    }
  }
  return false;
}

// The value of the exposition's series `name` whose label text contains
// every one of `parts` (summed), or -1 when there is none.
double exposition_value(const std::string& text, const std::string& name,
                        std::initializer_list<std::string> parts) {
  double sum = -1;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(name + "{")) continue;
    const std::size_t close = line.rfind('}');
    bool all = true;
    for (const std::string& p : parts) all = all && line.find(p) < close;
    if (!all) continue;
    sum = (sum < 0 ? 0 : sum) + std::stod(line.substr(close + 1));
  }
  return sum;
}

int promtool_check(const std::string& text, std::string& output) {
  const std::string in = temp_path("metrics.txt");
  const std::string out = temp_path("promtool.txt");
  write_text(in, text);
  const std::string command =
      std::string(PRIMCACHE_PROMTOOL) + " check metrics < " + in + " > " + out + " 2>&1";
  const int rc = std::system(command.c_str());
  output = read(out);
  return rc;
}

// A daemon on an ephemeral loopback port, running `workload`.
struct graph_daemon {
  child_process process;
  std::uint16_t port = 0;

  explicit graph_daemon(const std::string& workload)
      : process({PRIMCACHED_PATH, "--workload", workload, "--admin", "127.0.0.1:0", "--token-file",
                 temp_path("token"), "--threads", "2"}) {}
  // False when the daemon exited instead of starting. One still starting
  // after 120 s fails the test here, with what it printed so far: a slow
  // start must not read as a daemon that refused its workload.
  bool started() {
    if (!process.wait_for_output("primcached: workload", 120s)) {
      if (!process.wait(0ms)) {
        FAIL("primcached had not started its workload after 120 s\nstdout:\n"
             << process.out() << "\nstderr:\n"
             << process.err());
      }
      return false;
    }
    const std::string out = process.out();
    const std::string marker = "primcached: console http://127.0.0.1:";
    const std::size_t at = out.find(marker);
    REQUIRE(at != std::string::npos);
    port = static_cast<std::uint16_t>(std::stoi(out.substr(at + marker.size())));
    return true;
  }
  std::string metrics() const {
    const auto r = primcache::cli::http_request("127.0.0.1", port, "GET", "/metrics", "", "");
    REQUIRE(r.status == 200);
    return r.body;
  }
  // Scrapes until `done(text)` or 60 s; returns the last scrape.
  template <typename Done>
  std::string metrics_until(Done&& done) const {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    std::string text = metrics();
    while (!done(text) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(100ms);
      text = metrics();
    }
    return text;
  }
};

// A graph the loader accepts whose every run fails for want of memory under
// the limit of run_with_memory_limit: y = x * w is 32768x32000 f32,
// 4194304000 bytes (under the 4 GiB a graph tensor may take), allocated by
// each run.
const std::string outgrows_memory_graph = R"({"name": "outgrows_memory",
  "tensors": [{"name": "x", "shape": [32768, 1], "type": "f32", "role": "input"},
              {"name": "w", "shape": [1, 32000], "type": "f32", "role": "constant"},
              {"name": "y", "role": "output"}],
  "ops": [{"name": "outer", "kind": "matmul", "inputs": ["x", "w"], "outputs": ["y"]}]})";

constexpr bool sanitized = PRIMCACHE_TEST_ASAN || PRIMCACHE_TEST_TSAN;

// primcached on `workload` for 1.5 s, its address space capped at 3.5 GiB
// (`ulimit -v`, as a container's memory limit caps a service): the daemon
// itself needs well under that, and a run of outgrows_memory_graph more.
// Two threads in the runtime's pool keep the daemon's own threads small on a
// machine of many cores. Under AddressSanitizer or ThreadSanitizer, whose
// shadow memory no address-space limit admits, it runs without the limit.
primcache::test::run_result run_with_memory_limit(const std::string& workload) {
  const std::string limit = sanitized ? "" : "ulimit -v 3670016 && ";
  return run_program({"/bin/sh", "-c", limit + "PRIMCACHE_NUM_THREADS=2 exec \"$0\" \"$@\"",
                      PRIMCACHED_PATH, "--workload", workload, "--admin", "127.0.0.1:0",
                      "--token-file", temp_path("token"), "--duration", "1.5", "--threads", "2"},
                     60s);
}

// Op kinds whose kernel throws when it runs, registered in the global
// registry as a library registers its kernels (so load_workload takes graphs
// that use them): "fails_every_run", and "fails_every_other_run" (its first
// run fails, the next succeeds, and so on, over every thread). y = x.
class throwing_kernel final : public op_kernel {
 public:
  explicit throwing_kernel(unsigned fail_one_in) : fail_one_in_(fail_one_in) {}
  std::unique_ptr<bound_kernel> bind(const kernel_binding&) const override {
    return std::make_unique<bound>(fail_one_in_);
  }

 private:
  struct bound final : bound_kernel {
    explicit bound(unsigned n) : fail_one_in(n) {}
    void execute(const stream&, std::span<const memory>, std::span<const memory>) const override {
      if (runs.fetch_add(1) % fail_one_in == 0) {
        throw error(status::runtime_error, "the device stopped answering");
      }
    }
    const unsigned fail_one_in;
    mutable std::atomic<unsigned> runs{0};
  };
  const unsigned fail_one_in_;
};

void register_throwing_ops() {
  static const bool registered = [] {
    op_registry& ops = op_registry::global();
    const shape_function same_as_input = [](const op_spec&, std::span<const tensor_shape> in) {
      return std::vector<tensor_shape>{in[0]};
    };
    ops.add_kind("fails_every_run", same_as_input, {});
    ops.add_kernel("fails_every_run", engine_kind::cpu, "jit",
                   std::make_shared<throwing_kernel>(1));
    ops.add_kind("fails_every_other_run", same_as_input, {});
    ops.add_kernel("fails_every_other_run", engine_kind::cpu, "jit",
                   std::make_shared<throwing_kernel>(2));
    return true;
  }();
  (void)registered;
}

// tiny_graph with its op of kind `kind`.
std::string tiny_graph_of_kind(const std::string& kind) {
  std::string g = tiny_graph;
  const std::string_view eltwise = R"("kind": "eltwise")";
  g.replace(g.find(eltwise), eltwise.size(), R"("kind": ")" + kind + '"');
  const std::string_view attributes = R"(,
           "attributes": {"algorithm": "relu"})";
  g.erase(g.find(attributes), attributes.size());
  return g;
}

// What a failed stop shows: how the daemon ended and what it said.
std::string exit_report(const std::optional<int>& status, const child_process& p) {
  return "exit status " + (status ? std::to_string(*status) : std::string("none: still running")) +
         "; stderr:\n" + p.err();
}

}  // namespace

TEST_CASE("The shipped graph workloads load: one executor per graph, named after it",
          "[services][graph]") {
  SECTION("graph_mlp.json: the MLP example, by a path relative to the workload") {
    const std::string path = workloads_dir + "/graph_mlp.json";
    const workload w = load_workload(read(path), path, workloads_dir);
    CHECK(w.name == "graph_mlp");
    CHECK(w.primitives.empty());
    REQUIRE(w.graphs.size() == 1);
    const graph_entry& g = w.graphs[0];
    CHECK(g.name == "mlp");
    CHECK(g.source == workloads_dir + "/../../libs/graph/examples/mlp.json");
    CHECK(g.weight == 1.0);
    CHECK(g.options.metrics_label == "mlp");
    REQUIRE(g.exec);
    CHECK(g.exec->stats().runs == 0);
    // The executor is built and runs; its transform reaches control().
    const double bytes_before =
        metric_value("primcache_graph_transform_bytes_total", {{"graph", "mlp"}});
    const double runs_before = metric_value("primcache_graph_runs_total", {{"graph", "mlp"}});
    const executor::tensor_map out = g.exec->run(make_inputs(*g.graph));
    CHECK(out.count("logits") == 1);
    const executor_stats s = g.exec->stats();
    CHECK(s.runs == 1);
    REQUIRE(s.transforms.size() == 1);  // w2, stored transposed
    CHECK(s.transforms[0].tensor == "w2");
    CHECK(s.transforms[0].from.to_string() == "cpu/f32/ba/jit");
    CHECK(s.transforms[0].to.to_string() == "cpu/f32/ab/jit");
    CHECK(s.constant_transforms == 1);
    CHECK(metric_value("primcache_graph_runs_total", {{"graph", "mlp"}}) == runs_before + 1);
    CHECK(metric_value("primcache_graph_transform_bytes_total", {{"graph", "mlp"},
                                                                 {"from", "cpu/f32/ba/jit"},
                                                                 {"to", "cpu/f32/ab/jit"},
                                                                 {"steps", "layout"}}) ==
          bytes_before + static_cast<double>(s.bytes_transformed));
  }
  SECTION("graphs.json: the MLP and the bottleneck, by weight") {
    const std::string path = workloads_dir + "/graphs.json";
    const workload w = load_workload(read(path), path, workloads_dir);
    REQUIRE(w.graphs.size() == 2);
    CHECK(w.graphs[0].name == "mlp");
    CHECK(w.graphs[0].weight == 4.0);
    CHECK(w.graphs[1].name == "resnet50_bottleneck");
    CHECK(w.graphs[1].weight == 1.0);
    CHECK(w.graphs[1].exec->stats().transforms.size() >= 2);  // x in, y out
  }
  SECTION("graph_resnet50_bottleneck.json") {
    const std::string path = workloads_dir + "/graph_resnet50_bottleneck.json";
    const workload w = load_workload(read(path), path, workloads_dir);
    REQUIRE(w.graphs.size() == 1);
    CHECK(w.graphs[0].name == "resnet50_bottleneck");
  }
}

TEST_CASE("The shipped graph configs choose the graph workloads", "[services][graph]") {
  const std::string configs = source_dir + "/configs";
  SECTION("graphs.json: the CPU examples") {
    const daemon_config c = load_config(read(configs + "/graphs.json"), "graphs.json", configs);
    CHECK(c.workload == configs + "/workloads/graphs.json");
    const std::string dir = c.workload.substr(0, c.workload.rfind('/'));
    CHECK(load_workload(read(c.workload), c.workload, dir).graphs.size() == 2);
  }
  SECTION("graphs_ocl.json: the mixed graph, a GPU constant cache") {
    const daemon_config c =
        load_config(read(configs + "/graphs_ocl.json"), "graphs_ocl.json", configs);
    CHECK(c.workload == configs + "/workloads/graph_mixed_cpu_ocl.json");
    bool gpu = false;
    for (const auto& [kind, mb] : c.constant_caches) gpu = gpu || kind == engine_kind::gpu;
    CHECK(gpu);
  }
}

TEST_CASE("A graph document is a workload; graphs may be inline, beside primitives",
          "[services][graph]") {
  SECTION("a graph document as the whole workload") {
    const workload w = load_workload(tiny_graph, "tiny.json");
    CHECK(w.name == "tiny");
    REQUIRE(w.graphs.size() == 1);
    CHECK(w.graphs[0].source == "tiny.json");
    CHECK(w.graphs[0].exec->describe().find("op act (eltwise)") != std::string::npos);
  }
  SECTION("inline, named, placed, beside a primitive") {
    const workload w = load_workload(
        R"({"primitives": [{"kind": "eltwise", "algorithm": "relu", "shapes": {"src": [4]}}],
            "graphs": [{"name": "g1", "weight": 3, "place": "cpu", "library": "jit",
                        "ignore_op_places": true, "graph": )" +
            tiny_graph + "}]}",
        "w.json");
    REQUIRE(w.primitives.size() == 1);
    REQUIRE(w.graphs.size() == 1);
    const graph_entry& g = w.graphs[0];
    CHECK(g.name == "g1");
    CHECK(g.source == "w.json graphs[0].graph");
    CHECK(g.weight == 3.0);
    CHECK(g.options.ignore_op_places);
    CHECK(g.options.metrics_label == "g1");
    const double runs = metric_value("primcache_graph_runs_total", {{"graph", "g1"}});
    g.exec->run(make_inputs(*g.graph));
    CHECK(metric_value("primcache_graph_runs_total", {{"graph", "g1"}}) == runs + 1);
  }
}

TEST_CASE("A bad graph is refused naming the workload, the entry and the JSON pointer",
          "[services][graph]") {
  SECTION("a graph file with a bad shape") {
    const std::string path = temp_path("bad-graph.json");
    write_text(path, R"({"tensors": [{"name": "x", "shape": [4, "8"], "type": "f32",
                                      "role": "input"}], "ops": []})");
    const error e = refusal(R"({"graphs": [{"file": ")" + path + R"("}]})");
    CHECK(e.code() == status::invalid_arguments);
    CHECK(e.message() == "w.json: graphs[0].file: " + path +
                             ": graph JSON /tensors/0/shape/1: expected an integer, got a string");
  }
  SECTION("a graph file relative to the workload's folder") {
    const std::string dir = temp_path("graphs");
    ::mkdir(dir.c_str(), 0700);
    write_text(dir + "/g.json", R"({"tensors": [], "ops": [], "opz": 1})");
    const error e = refusal(R"({"graphs": [{"file": "g.json"}]})", dir);
    CHECK_THAT(e.message(), Catch::StartsWith("w.json: graphs[0].file: " + dir +
                                              "/g.json: graph JSON /opz: unknown key \"opz\""));
  }
  SECTION("a graph document workload with an unknown key") {
    const error e = refusal(R"({"tensors": [], "ops": [{"name": "f", "kind": "eltwise",
                              "inputs2": ["x"]}]})");
    CHECK(e.code() == status::invalid_arguments);
    CHECK_THAT(e.message(), Catch::StartsWith("w.json: graph JSON /ops/0/inputs2: unknown key"));
  }
  SECTION("an inline graph that is not valid") {
    const error e = refusal(R"({"graphs": [{"graph": {"tensors": [{"name": "x"}], "ops": []}}]})");
    CHECK_THAT(e.message(), Catch::StartsWith("w.json: graphs[0].graph: graph JSON /tensors/0"));
  }
  SECTION("an op kind the executor does not know") {
    std::string g = tiny_graph;
    g.replace(g.find("\"eltwise\""), 9, "\"eltwyse\"");
    const error e = refusal(R"({"graphs": [{"graph": )" + g + "}]}");
    CHECK(e.code() == status::invalid_arguments);
    CHECK_THAT(e.message(),
               Catch::StartsWith("w.json: graphs[0] (tiny): op 'act': unknown op kind 'eltwyse'"));
  }
  SECTION("a graph file that does not exist") {
    const error e = refusal(R"({"graphs": [{"file": "/nonexistent/g.json"}]})");
    CHECK(e.code() == status::not_found);
    CHECK(e.message() == "w.json: graphs[0].file: graph file /nonexistent/g.json: cannot be read");
  }
  SECTION("file and graph, or neither") {
    CHECK_THAT(refusal(R"({"graphs": [{"file": "a.json", "graph": {}}]})").message(),
               Catch::StartsWith("w.json: graphs[0]: expected either file"));
    CHECK_THAT(refusal(R"({"graphs": [{"weight": 2}]})").message(),
               Catch::StartsWith("w.json: graphs[0]: expected either file"));
  }
  SECTION("fields of a graph entry") {
    const std::string g = R"("graph": )" + tiny_graph;
    CHECK_THAT(refusal(R"({"graphs": [{"place": "tpu:0", )" + g + "}]}").message(),
               Catch::StartsWith("w.json: graphs[0].place: expected a place"));
    CHECK(refusal(R"({"graphs": [{"weight": 0, )" + g + "}]}").message() ==
          "w.json: graphs[0].weight: expected a number > 0");
    CHECK_THAT(refusal(R"({"graphs": [{"library": "a/b", )" + g + "}]}").message(),
               Catch::StartsWith("w.json: graphs[0].library: expected a library name"));
    CHECK_THAT(refusal(R"({"graphs": [{"fille": "x", )" + g + "}]}").message(),
               Catch::StartsWith("w.json: graphs[0].fille: unknown field"));
    CHECK(refusal(R"({"graphs": []})").message() == "w.json: graphs: expected at least one graph");
    CHECK_THAT(refusal(R"({"name": "nothing"})").message(),
               Catch::StartsWith("w.json: (top level): missing field primitives (or graphs"));
  }
}

TEST_CASE("A graph that could only fail when it runs is refused when the workload loads",
          "[services][graph]") {
  // Each used to load and then fail every run (or allocate per run).
  auto inline_graph = [](std::string_view from, std::string_view to) {
    std::string g = tiny_graph;
    g.replace(g.find(from), from.size(), to);
    return R"({"graphs": [{"graph": )" + g + "}]}";
  };
  SECTION("an input on a device that does not exist") {
    const error e = refusal(inline_graph(R"("role": "input")", R"("role": "input",
                                                                 "place": "gpu:99")"));
    CHECK(e.code() == status::invalid_arguments);
    CHECK_THAT(e.message(), Catch::StartsWith("w.json: graphs[0] (tiny): tensor 'x' (input) is on "
                                              "gpu:99: "));
  }
  SECTION("a misspelt attribute") {
    const error e = refusal(inline_graph(R"("relu")", R"("relu", "alpah": 1)"));
    CHECK(e.code() == status::invalid_arguments);
    CHECK(e.message() ==
          "w.json: graphs[0] (tiny): op 'act' (eltwise): unknown attribute "
          "'alpah' (accepted: algorithm, alpha, beta)");
  }
  SECTION("an input larger than a graph tensor may be") {
    const error e = refusal(inline_graph("[4, 8]", "[65536, 65536]"));
    CHECK(e.code() == status::invalid_arguments);
    CHECK(e.message() ==
          "w.json: graphs[0].graph: graph JSON /tensors/0/shape: tensor \"x\" "
          "(input) is 65536x65536 f32: 17179869184 bytes, more than the limit of "
          "4294967296 bytes per graph tensor");
  }
}

TEST_CASE("primcached refuses a graph whose output is on a missing device: exit 2, one line",
          "[services][graph][daemon]") {
  std::string g = tiny_graph;
  const std::string_view output = R"("role": "output")";
  g.replace(g.find(output), output.size(), R"("role": "output", "place": "gpu:99")");
  const std::string path = temp_path("far-output-graph.json");
  write_text(path, g);
  const auto r = run_program({PRIMCACHED_PATH, "--workload", path, "--duration", "1"}, 60s);
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::StartsWith("primcached: " + path +
                                      " (tiny): tensor 'y' (output) is on gpu:99: "));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("primcached runs a graph workload and its transforms reach /metrics",
          "[services][graph][daemon]") {
  graph_daemon d(workloads_dir + "/graph_mlp.json");
  REQUIRE(d.started());
  // Both: a constant-cache hit comes from a second run that may start
  // before the first has finished and been counted (the workload runs the
  // graph on two threads).
  const std::string text = d.metrics_until([](const std::string& t) {
    return exposition_value(t, "primcache_graph_constant_cache_hits_total", {"graph=\"mlp\""}) >
               0 &&
           exposition_value(t, "primcache_graph_runs_total", {"graph=\"mlp\""}) > 1;
  });
  INFO(text);
  const std::initializer_list<std::string> w2 = {"from=\"cpu/f32/ba/jit\"", "graph=\"mlp\"",
                                                 "steps=\"layout\"", "to=\"cpu/f32/ab/jit\""};
  // w2 (512x256 f32, read and written: 8 bytes an element) transformed once,
  // then taken from the constant tensor cache by every run.
  CHECK(exposition_value(text, "primcache_graph_transform_executions_total", w2) == 1);
  CHECK(exposition_value(text, "primcache_graph_transform_bytes_total", w2) == 512 * 256 * 8);
  CHECK(exposition_value(text, "primcache_graph_constant_transforms_total", {"graph=\"mlp\""}) ==
        1);
  CHECK(exposition_value(text, "primcache_graph_constant_cache_hits_total", {"graph=\"mlp\""}) > 0);
  CHECK(exposition_value(text, "primcache_graph_runs_total", {"graph=\"mlp\""}) > 1);
  std::string promtool;
  CHECK(promtool_check(text, promtool) == 0);
  INFO("promtool: " << promtool);

  d.process.signal(SIGTERM);
  const std::optional<int> status = d.process.wait(30s);
  INFO(exit_report(status, d.process));
  REQUIRE(status == 0);
  const std::string out = d.process.out();
  CHECK_THAT(out, Catch::Contains("primcached: workload graph_mlp: 0 primitives and 1 graph on 2 "
                                  "threads"));
  CHECK_THAT(out, Catch::Contains("primcached: graph mlp ("));
  CHECK_THAT(out, Catch::Contains("transform w2: cpu/f32/ba/jit -> cpu/f32/ab/jit [layout]"));
  CHECK_THAT(out, Catch::Contains("; graphs "));
  CHECK_THAT(out, Catch::Contains(" runs/s, "));
  CHECK(d.process.err().empty());
}

TEST_CASE("primcached refuses a bad graph with one line naming it and exits non-zero",
          "[services][graph][daemon]") {
  SECTION("malformed: exit 2, the file and the JSON pointer") {
    const std::string path = temp_path("bad-graph-workload.json");
    write_text(path, R"({"tensors": [{"name": "x", "shape": [4, -8], "type": "f32",
                                      "role": "input"}], "ops": []})");
    const auto r = run_program({PRIMCACHED_PATH, "--workload", path, "--duration", "1"});
    CHECK(r.status == 2);
    CHECK_THAT(r.err,
               Catch::StartsWith("primcached: " + path + ": graph JSON /tensors/0/shape/1: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  SECTION("a graph file that is missing: exit 1") {
    const std::string path = temp_path("missing-graph-workload.json");
    write_text(path, R"({"graphs": [{"file": "nope.json"}]})");
    const auto r = run_program({PRIMCACHED_PATH, "--workload", path, "--duration", "1"});
    CHECK(r.status == 1);
    const std::string dir = path.substr(0, path.rfind('/'));
    CHECK(r.err == "primcached: " + path + ": graphs[0].file: graph file " + dir +
                       "/nope.json: cannot be read\n");
  }
}

TEST_CASE("the runner counts each entry's runs and tells one that never succeeded",
          "[services][graph]") {
  register_throwing_ops();
  const workload w = load_workload(
      R"({"primitives": [{"name": "relu", "kind": "eltwise", "algorithm": "relu",
                          "shapes": {"src": [16, 16]}}],
          "graphs": [{"name": "broken", "graph": )" +
          tiny_graph_of_kind("fails_every_run") + R"(},
                     {"name": "flaky", "graph": )" +
          tiny_graph_of_kind("fails_every_other_run") + "}]}",
      "w.json");
  workload_runner runner(w, 2);
  runner.start();
  // Until each entry has shown what it does (a failure sleeps 10 ms).
  auto shown = [](const std::vector<entry_outcome>& o) {
    return o[0].succeeded > 0 && o[1].failed >= 3 && o[2].succeeded > 0 && o[2].failed > 0;
  };
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!shown(runner.outcomes()) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  runner.stop();
  const std::vector<entry_outcome> o = runner.outcomes();
  REQUIRE(o.size() == 3);

  CHECK(o[0].label == "primitives[0] (relu)");
  CHECK(o[0].succeeded > 0);
  CHECK(o[0].failed == 0);
  CHECK_FALSE(o[0].never_succeeded());

  CHECK(o[1].label == "graphs[0] (broken)");
  CHECK(o[1].succeeded == 0);
  CHECK(o[1].failed >= 3);
  CHECK(o[1].never_succeeded());

  CHECK(o[2].label == "graphs[1] (flaky)");
  CHECK(o[2].succeeded > 0);
  CHECK(o[2].failed > 0);
  CHECK_FALSE(o[2].never_succeeded());

  // The same runs as the summary's counts.
  const interval_stats counted = runner.take_interval();
  CHECK(counted.executions == o[0].succeeded);
  CHECK(counted.graph_runs == o[2].succeeded);
  CHECK(counted.failures == o[1].failed + o[2].failed);
}

TEST_CASE("primcached exits 3 when a workload entry failed every time it ran, 0 when all ran",
          "[services][graph][daemon]") {
  SECTION("a graph that runs: exit 0, no failure reported") {
    const std::string path = temp_path("fits.json");
    write_text(path, tiny_graph);
    const auto r = run_with_memory_limit(path);
    INFO(r.err);
    REQUIRE(r.status);
    CHECK(*r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("primcached: stopping (duration)"));
    CHECK(r.err.empty());
  }
  if (sanitized) {
    WARN("AddressSanitizer or ThreadSanitizer: no memory limit, the failing graph is not run");
    return;
  }
  SECTION("a graph whose every run runs out of memory: exit 3, the entry named") {
    const std::string path = temp_path("outgrows-memory.json");
    write_text(path, outgrows_memory_graph);
    const auto r = run_with_memory_limit(path);
    INFO(r.err);
    REQUIRE(r.status);
    CHECK(*r.status == 3);
    CHECK_THAT(r.err, Catch::Contains("primcached: graphs[0] (outgrows_memory) failed: "
                                      "out_of_memory: cannot allocate 4194304000 bytes"));
    CHECK_THAT(r.err, Catch::Contains(
                          "primcached: graphs[0] (outgrows_memory) failed every time it ran ("));
    CHECK_THAT(r.err, Catch::Contains("primcached: 1 workload entry failed every time it ran: "
                                      "exit status 3\n"));
    CHECK_THAT(r.out, Catch::Contains("primcached: stopping (duration)"));
  }
  SECTION("beside a graph that runs, one that never does still gives exit 3") {
    const std::string path = temp_path("one-of-two.json");
    write_text(path, R"({"graphs": [{"graph": )" + tiny_graph + R"(},
                                    {"graph": )" +
                         outgrows_memory_graph + "}]}");
    const auto r = run_with_memory_limit(path);
    INFO(r.err);
    REQUIRE(r.status);
    CHECK(*r.status == 3);
    CHECK_THAT(r.err, Catch::Contains(
                          "primcached: graphs[1] (outgrows_memory) failed every time it ran ("));
    CHECK_THAT(r.err, Catch::Contains("primcached: 1 workload entry failed every time it ran: "
                                      "exit status 3\n"));
    CHECK(r.err.find("graphs[0]") == std::string::npos);  // tiny ran every time
  }
}

TEST_CASE("A graph that needs an OpenCL device fails cleanly without one",
          "[services][graph][daemon][ocl]") {
  // The ICD loader finds no platform: no gpu engine in the process.
  const std::string vendors = temp_path("no-vendors");
  ::mkdir(vendors.c_str(), 0700);
  const char* saved = std::getenv("OCL_ICD_VENDORS");
  const std::string saved_value = saved ? saved : "";
  ::setenv("OCL_ICD_VENDORS", vendors.c_str(), 1);
  const std::string path = workloads_dir + "/graph_mixed_cpu_ocl.json";
  const auto r = run_program({PRIMCACHED_PATH, "--workload", path, "--duration", "1"}, 60s);
  if (saved) {
    ::setenv("OCL_ICD_VENDORS", saved_value.c_str(), 1);
  } else {
    ::unsetenv("OCL_ICD_VENDORS");
  }
  REQUIRE(r.status);
  CHECK(*r.status != 0);
  CHECK(*r.status < 128);  // exited, not killed by a signal
  INFO(r.err);
  CHECK_THAT(r.err, Catch::StartsWith("primcached: " + path + ": graphs[0] (mixed_cpu_ocl): op '"));
  CHECK_THAT(r.err, Catch::Contains("runs on gpu:0"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("primcached runs the mixed CPU/OpenCL graph where a device is present",
          "[services][graph][daemon][ocl]") {
  graph_daemon d(workloads_dir + "/graph_mixed_cpu_ocl.json");
  if (!d.started()) {  // it exited: without a device, refusing the graph
    const auto status = d.process.wait(10s);
    INFO(exit_report(status, d.process));
    REQUIRE(status);
    REQUIRE(*status < 128);
    WARN("no OpenCL device: primcached refused the mixed graph: " << d.process.err());
    CHECK_THAT(d.process.err(), Catch::Contains("gpu:0"));
    return;
  }
  // Host <-> device copies ran between the CPU and the device ops.
  const std::string text = d.metrics_until([](const std::string& t) {
    return exposition_value(t, "primcache_graph_runs_total", {"graph=\"mixed_cpu_ocl\""}) >= 2;
  });
  INFO(text);
  CHECK(exposition_value(text, "primcache_graph_runs_total", {"graph=\"mixed_cpu_ocl\""}) >= 2);
  CHECK(exposition_value(text, "primcache_graph_transform_bytes_total",
                         {"graph=\"mixed_cpu_ocl\"", "place", "to=\"gpu:0/"}) > 0);
  CHECK(exposition_value(text, "primcache_graph_transform_bytes_total",
                         {"graph=\"mixed_cpu_ocl\"", "place", "to=\"cpu/"}) > 0);
  d.process.signal(SIGTERM);
  const std::optional<int> status = d.process.wait(30s);
  INFO(exit_report(status, d.process));
  CHECK(status == 0);
}

TEST_CASE("make_zeroed_args zeroes every argument, on the CPU and on an OpenCL device",
          "[services][workload][ocl]") {
  for (const std::string engine_name : {"cpu", "gpu"}) {
    workload w;
    try {
      w = load_workload(R"({"primitives": [{"kind": "matmul", "engine": ")" + engine_name +
                            R"(", "shapes": {"src": [8, 16], "weights": [16, 4], "bias": [1, 4]},
          "attributes": {"post_ops": [{"kind": "binary_add"}]}}]})",
                        "w.json");
    } catch (const error& e) {
      // No OpenCL device: the gpu entry is refused at load.
      REQUIRE(engine_name == "gpu");
      WARN("no gpu engine, the device case is not run: " << e.message());
      continue;
    }
    INFO(engine_name);
    const primitive_spec& spec = w.primitives.at(0);
    const engine eng(spec.engine, 0);
    const primitive_desc pd = make_primitive_desc(spec, eng);
    // The handles are device buffers on a GPU: a memset through them (the old
    // zeroing) wrote over the runtime's objects instead of the data.
    const primitive::args args = make_zeroed_args(spec, pd);
    CHECK(args.size() == 5);  // src, weights, bias, dst, the add's operand
    for (const auto& [arg, mem] : args) {
      const std::size_t n = mem.get_desc().size_bytes() / sizeof(float);
      auto* p = static_cast<const float*>(mem.map_data());
      std::size_t nonzero = 0;
      for (std::size_t i = 0; i < n; ++i) nonzero += p[i] != 0.f;
      mem.unmap_data(const_cast<float*>(p));
      CHECK(nonzero == 0);
    }
    // And the primitive runs on them: zeros in, zeros out.
    stream s(eng);
    primitive(pd).execute(s, args);
    s.wait();
  }
}

TEST_CASE("An executor with export_metrics off leaves control's series alone",
          "[services][graph]") {
  const graph g = load_graph_json(tiny_graph);
  executor_options quiet;
  quiet.export_metrics = false;
  quiet.metrics_label = "quiet_graph";
  const executor e(g, quiet);
  e.run(make_inputs(g));
  CHECK(e.stats().runs == 1);
  for (const metric_family_info& f : control().list_metrics()) {
    for (const metric_sample& s : f.samples) {
      for (const auto& l : s.labels) CHECK_FALSE(l.second == "quiet_graph");
    }
  }
  // And one with it on registers its runs at construction, 0 until it runs.
  executor_options loud;
  loud.metrics_label = "loud_graph";
  const executor l(g, loud);
  CHECK(has_series("primcache_graph_runs_total", {{"graph", "loud_graph"}}));
  CHECK(metric_value("primcache_graph_runs_total", {{"graph", "loud_graph"}}) == 0);
  l.run(make_inputs(g));
  CHECK(metric_value("primcache_graph_runs_total", {{"graph", "loud_graph"}}) == 1);
}
