// `primcache tune WORKLOAD -o TABLE`, run as a process: the table it writes,
// the summary it prints, and every failure.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "primcache/autotune/tune_table.hpp"
#include "process.hpp"

using primcache::test::run_program;
using primcache::test::run_result;
using primcache::test::temp_path;
using primcache::test::write_text;

namespace {

const char* kWorkload = R"({"name": "tune test", "primitives": [
  {"name": "mm 16x24x32", "kind": "matmul",
   "shapes": {"src": [16, 32], "weights": [32, 24], "dst": [16, 24]}},
  {"name": "conv 3x3 8->8 6x6", "kind": "convolution",
   "shapes": {"src": [1, 8, 6, 6], "weights": [8, 8, 3, 3]}, "padding": [1, 1]},
  {"name": "relu 8x8", "kind": "eltwise", "algorithm": "relu", "shapes": {"src": [8, 8]}}
]})";

run_result tune(std::vector<std::string> args) {
  args.insert(args.begin(), {PRIMCACHE_CLI_PATH, "tune"});
  return run_program(args, std::chrono::seconds(240));
}

}  // namespace

TEST_CASE("primcache tune writes a table and prints default against tuned time",
          "[services][cli][tune]") {
  const std::string workload = temp_path("workload.json"), table = temp_path("tune.json");
  write_text(workload, kWorkload);
  const run_result r = tune({workload, "-o", table, "--max-nconfigs", "3"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("speed-up") != std::string::npos);
  CHECK(r.out.find("relu 8x8") != std::string::npos);
  CHECK(r.out.find("not tuned (matmul and convolution only)") != std::string::npos);
  CHECK(r.out.find("wrote 2 entries to " + table) != std::string::npos);
  CHECK(r.err.find("configurations, best") != std::string::npos);  // the progress bar
  primcache::tune_table t;
  auto loaded = t.load_file(table, PRIMCACHE_VERSION);
  REQUIRE(loaded);
  CHECK(loaded.value().taken == 2);
  for (const auto& row : t.rows()) CHECK(row.entry.time_ns <= row.entry.default_time_ns);
  SECTION("a second run finds them in the table") {
    const run_result again = tune({workload, "-o", table, "--max-nconfigs", "3"});
    INFO(again.out << again.err);
    REQUIRE(again.status == 0);
    CHECK(again.out.find("in the table already") != std::string::npos);
    CHECK(again.out.find("wrote 2 entries") != std::string::npos);
  }
}

TEST_CASE("primcache tune tunes a graph workload's matmuls in one run of the graph",
          "[services][cli][tune][graph]") {
  // The shipped MLP workload names its graph relative to its own folder.
  const std::string workload = PRIMCACHE_SOURCE_DIR "/configs/workloads/graph_mlp.json";
  const std::string table = temp_path("graph_tune.json");
  const run_result r = tune({workload, "-o", table, "--max-nconfigs", "2"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("graph mlp") != std::string::npos);
  CHECK(r.out.find("3 primitives tuned") != std::string::npos);  // fc1, fc2, fc3
  CHECK(r.out.find("wrote 3 entries to " + table) != std::string::npos);
  SECTION("a second run finds them in the table") {
    const run_result again = tune({workload, "-o", table, "--max-nconfigs", "2"});
    INFO(again.out << again.err);
    REQUIRE(again.status == 0);
    CHECK(again.out.find("0 primitives tuned (in the table already") != std::string::npos);
    CHECK(again.out.find("wrote 3 entries") != std::string::npos);
  }
}

#if PRIMCACHE_CLI_HAS_OCL
TEST_CASE("primcache tune tunes OpenCL matmuls and convolutions beside CPU ones",
          "[services][cli][tune][ocl]") {
  // PoCL is the OpenCL device everywhere the suite runs (scripts/install-deps).
  const std::string workload = temp_path("ocl_workload.json"), table = temp_path("ocl_tune.json");
  write_text(workload, R"({"name": "ocl tune test", "primitives": [
    {"name": "gpu mm 16x24x32", "kind": "matmul", "engine": "gpu",
     "shapes": {"src": [16, 32], "weights": [32, 24], "dst": [16, 24]}},
    {"name": "gpu conv 3x3 4->8 6x6", "kind": "convolution", "engine": "gpu",
     "shapes": {"src": [1, 4, 6, 6], "weights": [8, 4, 3, 3]}, "padding": [1, 1]},
    {"name": "cpu mm 16x24x32", "kind": "matmul",
     "shapes": {"src": [16, 32], "weights": [32, 24], "dst": [16, 24]}}
  ]})");
  const run_result r = tune({workload, "-o", table, "--max-nconfigs", "3"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("wrote 3 entries to " + table) != std::string::npos);
  primcache::tune_table t;
  REQUIRE(t.load_file(table, PRIMCACHE_VERSION));
  int ocl_rows = 0, cpu_rows = 0;
  for (const auto& row : t.rows()) {
    INFO(row.device);
    CHECK(row.entry.time_ns <= row.entry.default_time_ns);
    if (row.device.starts_with("ocl:")) {
      ++ocl_rows;
    } else {
      ++cpu_rows;
    }
  }
  CHECK(ocl_rows == 2);
  CHECK(cpu_rows == 1);
  SECTION("a second run finds the OpenCL entries in the table") {
    const run_result again = tune({workload, "-o", table, "--max-nconfigs", "3"});
    INFO(again.out << again.err);
    REQUIRE(again.status == 0);
    std::size_t found = 0;
    for (std::size_t at = again.out.find("in the table already"); at != std::string::npos;
         at = again.out.find("in the table already", at + 1)) {
      ++found;
    }
    CHECK(found == 3);  // nothing is tuned again
    CHECK(again.out.find("wrote 3 entries") != std::string::npos);
  }
}

#endif  // PRIMCACHE_CLI_HAS_OCL

TEST_CASE("primcache tune refuses bad usage and reports failures", "[services][cli][tune]") {
  const std::string workload = temp_path("workload.json");
  write_text(workload, kWorkload);
  SECTION("usage errors exit 2") {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {workload},
             {"-o", temp_path("t.json")},
             {workload, "-o"},
             {workload, "-o", temp_path("t.json"), "--max-nconfigs", "0"},
             {workload, "-o", temp_path("t.json"), "--max-nconfigs", "x"},
             {workload, "-o", temp_path("t.json"), "--bogus"},
             {workload, workload, "-o", temp_path("t.json")}}) {
      const run_result r = tune(args);
      INFO(r.err);
      CHECK(r.status == 2);
      CHECK(r.err.find("usage: primcache tune") != std::string::npos);
    }
  }
  SECTION("help") {
    const run_result r = tune({"--help"});
    CHECK(r.status == 0);
    CHECK(r.out.find("usage: primcache tune") != std::string::npos);
  }
  SECTION("a missing workload") {
    const std::string none = temp_path("none.json");
    const run_result r = tune({none, "-o", temp_path("t.json")});
    CHECK(r.status == 1);
    CHECK(r.err ==
          "primcache tune: cannot read the workload " + none + ": No such file or directory\n");
  }
  SECTION("a malformed workload") {
    const std::string bad = temp_path("bad.json");
    write_text(bad, R"({"primitives": [{"kind": "matmul"}]})");
    const run_result r = tune({bad, "-o", temp_path("t.json")});
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(r.err.find(bad) != std::string::npos);
  }
  SECTION("a table that cannot be written") {
    const run_result r =
        tune({workload, "-o", "/nonexistent-primcache-dir/t.json", "--max-nconfigs", "2"});
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(r.err.find("cannot create") != std::string::npos);
  }
  SECTION("a corrupt table is replaced") {
    const std::string table = temp_path("corrupt.json");
    write_text(table, "not json");
    const run_result r = tune({workload, "-o", table, "--max-nconfigs", "2"});
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.err.find("it will be replaced") != std::string::npos);
    primcache::tune_table t;
    CHECK(t.load_file(table, PRIMCACHE_VERSION));
  }
}

// The workload is read as primcached reads its files (docs/primcached.md):
// a regular file of at most 16 MiB; anything else is refused at once.
TEST_CASE("primcache tune reads only a regular workload file of at most 16 MiB: others exit 1",
          "[services][cli][tune]") {
  // Bounded well below tune()'s limit: a refusal is immediate.
  auto tune_quickly = [](const std::string& workload) {
    return run_program({PRIMCACHE_CLI_PATH, "tune", workload, "-o", temp_path("t.json")},
                       std::chrono::seconds(20));
  };
  SECTION("a FIFO: refused at once, not waited on for a writer") {
    const std::string fifo = temp_path("workload.fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const run_result r = tune_quickly(fifo);
    REQUIRE(r.status.has_value());
    CHECK(*r.status == 1);
    CHECK(r.err ==
          "primcache tune: cannot read the workload " + fifo + ": a FIFO, not a regular file\n");
  }
  SECTION("/dev/zero: refused at once, not read until memory runs out") {
    const run_result r = tune_quickly("/dev/zero");
    REQUIRE(r.status.has_value());
    CHECK(*r.status == 1);
    CHECK(r.err ==
          "primcache tune: cannot read the workload /dev/zero: a character device, not a regular "
          "file\n");
  }
  SECTION("a directory: said so, not \"not valid JSON\"") {
    const std::string dir = temp_path("workload-dir");
    REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
    const run_result r = tune_quickly(dir);
    CHECK(r.status == 1);
    CHECK(r.err == "primcache tune: cannot read the workload " + dir +
                       ": a directory, not a regular file\n");
  }
  SECTION("a workload over 16 MiB, valid JSON all the same") {
    const std::string path = temp_path("large.json");
    write_text(path, std::string(kWorkload) + std::string(std::size_t{16} << 20, ' '));
    const run_result r = tune_quickly(path);
    CHECK(r.status == 1);
    CHECK(r.err == "primcache tune: cannot read the workload " + path +
                       ": larger than 16 MiB, the limit for a config, workload or graph file\n");
  }
}
