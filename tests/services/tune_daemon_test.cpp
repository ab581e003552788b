// primcached in tune mode, run as a process: the table it writes at stop,
// a second run creating its primitives with the tuned configurations, the
// console switching tuning on, the precedence of the command line over the
// config over the environment, and every failure (a corrupt or foreign
// table, a table that cannot be written, bad flags and config values).
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "http_client.hpp"
#include "primcache/autotune/tune_table.hpp"
#include "process.hpp"

namespace {

using namespace std::chrono_literals;
using primcache::tune_row;
using primcache::tune_table;
using primcache::test::child_process;
using primcache::test::run_program;
using primcache::test::run_result;
using primcache::test::temp_path;
using primcache::test::write_text;

// A matmul and a convolution small enough to tune in a second or two with a
// few candidates, and an eltwise, which has nothing to tune.
const char* kWorkload = R"({"name": "tune", "primitives": [
  {"name": "mm", "kind": "matmul", "shapes": {"src": [16, 32], "weights": [32, 24]}},
  {"name": "conv", "kind": "convolution",
   "shapes": {"src": [1, 8, 6, 6], "weights": [8, 8, 3, 3]}, "padding": [1, 1]},
  {"name": "relu", "kind": "eltwise", "algorithm": "relu", "shapes": {"src": [8, 8]}}]})";
const char* kMatmulOnly = R"({"name": "tune-mm", "primitives": [
  {"name": "mm", "kind": "matmul", "shapes": {"src": [8, 16], "weights": [16, 8]}}]})";

std::string file_with(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  write_text(path, text);
  return path;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string read_text(const std::string& path) {
  const run_result r = run_program({"/bin/cat", path});
  return r.out;
}

// primcached on a workload, with `env` (NAME=value) in its environment
// (through env(1)), bounded well above any tuning here.
run_result primcached(const std::string& workload, std::vector<std::string> args,
                      std::vector<std::string> env = {}) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {PRIMCACHED_PATH, "--workload", workload, "--admin", "127.0.0.1:0",
                           "--token-file", temp_path("token")});
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv, 240s);
}

// The table's rows whose problem description starts with `kind`.
std::vector<tune_row> rows_of(const tune_table& t, const std::string& kind) {
  std::vector<tune_row> out;
  for (const tune_row& r : t.rows()) {
    if (r.entry.description.rfind(kind + " ", 0) == 0) out.push_back(r);
  }
  return out;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("primcached --tune writes the table at stop, and a second run creates tuned primitives",
          "[services][daemon][tune]") {
  const std::string workload = file_with("w.json", kWorkload);
  const std::string table = temp_path("tune.json");
  // Two threads: while one tunes a primitive the other goes on picking, so
  // both the matmul and the convolution are tuned within the duration.
  const run_result first = primcached(workload,
                                      {"--tune", "--tune-table", table, "--tune-max-nconfigs", "3",
                                       "--threads", "2", "--duration", "2"},
                                      {"PRIMCACHE_VERBOSE=1"});
  INFO(first.out << first.err);
  REQUIRE(first.status == 0);
  CHECK_THAT(first.out,
             Catch::Contains("primcached: tuning on (at most 3 configurations per primitive); "
                             "tune table " +
                             table + ": not found (written at stop)"));
  // The runtime's verbose lines: one tuning per problem.
  CHECK(count(first.out, "primcache_verbose,tune,matmul ") == 1);
  CHECK(count(first.out, "primcache_verbose,tune,convolution ") == 1);
  CHECK_THAT(first.out, Catch::Contains("primcached: tuning: 2 tuned ("));
  CHECK_THAT(first.out, Catch::Contains("primcached: tune table " + table + ": wrote 2 entries"));
  tune_table t;
  auto loaded = t.load_file(table, PRIMCACHE_VERSION);
  REQUIRE(loaded);
  CHECK(loaded.value().entries == 2);
  const std::vector<tune_row> mm = rows_of(t, "matmul"), conv = rows_of(t, "convolution");
  REQUIRE(mm.size() == 1);
  REQUIRE(conv.size() == 1);
  CHECK(mm[0].entry.implementation == "jit:matmul");
  for (const tune_row& r : t.rows()) {
    CHECK(r.entry.time_ns > 0);
    CHECK(r.entry.time_ns <= r.entry.default_time_ns);
  }

  // Tuning off, the same table: the primitive descriptors have its
  // configurations, nothing is tuned, the file is left as it was.
  const std::string before = read_text(table);
  const run_result second =
      primcached(workload, {"--tune-table", table, "--duration", "0.5"}, {"PRIMCACHE_VERBOSE=1"});
  INFO(second.out << second.err);
  REQUIRE(second.status == 0);
  CHECK_THAT(second.out,
             Catch::Contains("primcached: tuning off; tune table " + table + ": 2 entries"));
  CHECK_THAT(second.out, Catch::Contains("primcached: tuned mm: " + mm[0].entry.implementation +
                                         " " + mm[0].entry.config + "\n"));
  CHECK_THAT(second.out, Catch::Contains("primcached: tuned conv: " + conv[0].entry.implementation +
                                         " " + conv[0].entry.config + "\n"));
  CHECK_THAT(second.out, !Catch::Contains("was refused"));
  CHECK_THAT(second.out, !Catch::Contains("primcache_verbose,tune,"));
  CHECK_THAT(second.out, Catch::Contains("primcached: tune table " + table +
                                         ": nothing tuned in this run, not written"));
  CHECK(read_text(table) == before);
}

TEST_CASE("primcached writes its table at stop when the console switched tuning on",
          "[services][daemon][tune][console]") {
  const std::string workload = file_with("w.json", kWorkload);
  const std::string table = temp_path("tune.json"), token_file = temp_path("token");
  child_process p({PRIMCACHED_PATH, "--workload", workload, "--admin", "127.0.0.1:0",
                   "--token-file", token_file, "--tune-table", table, "--tune-max-nconfigs", "2",
                   "--threads", "2"});
  REQUIRE(p.wait_for_output("primcached: workload", 30s));
  CHECK_THAT(p.out(), Catch::Contains("primcached: tuning off; tune table " + table +
                                      ": not found (written at stop)"));
  const std::string out = p.out();
  const std::string marker = "primcached: console http://127.0.0.1:";
  const std::size_t at = out.find(marker);
  REQUIRE(at != std::string::npos);
  const auto port = static_cast<std::uint16_t>(std::stoi(out.substr(at + marker.size())));
  const std::string token = read_text(token_file).substr(0, 64);
  const auto flipped = primcache::cli::http_request(
      "127.0.0.1", port, "POST", "/api/v1/switches/tune", R"({"on": true})", token);
  REQUIRE(flipped.status == 200);
  // Both problems tuned, as the metrics say.
  auto tuned = [&] {
    const auto m = primcache::cli::http_request("127.0.0.1", port, "GET", "/metrics", "", "");
    REQUIRE(m.status == 200);
    double n = 0;
    for (const char* result : {"kept", "replaced"}) {
      const std::string series =
          std::string("primcache_tune_primitives_total{result=\"") + result + "\"} ";
      const std::size_t s = m.body.find(series);
      if (s != std::string::npos) n += std::stod(m.body.substr(s + series.size()));
    }
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (tuned() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(200ms);
  }
  REQUIRE(tuned() == 2);
  p.signal(SIGTERM);
  REQUIRE(p.wait(60s) == 0);
  INFO(p.out() << p.err());
  CHECK_THAT(p.out(), Catch::Contains("primcached: tune table " + table + ": wrote 2 entries"));
  tune_table t;
  auto loaded = t.load_file(table, PRIMCACHE_VERSION);
  REQUIRE(loaded);
  CHECK(rows_of(t, "matmul").size() == 1);
  CHECK(rows_of(t, "convolution").size() == 1);
}

TEST_CASE("primcached's tune settings: command line over config over environment",
          "[services][daemon][tune]") {
  const std::string workload = file_with("mm.json", kMatmulOnly);
  const std::string env_table = temp_path("env-table.json");
  const std::vector<std::string> env = {"PRIMCACHE_TUNE=1", "PRIMCACHE_TUNE_TABLE=" + env_table};

  SECTION("PRIMCACHE_TUNE and PRIMCACHE_TUNE_TABLE where the config and flags say nothing") {
    // The config sets the budget alone (for a short test): each field it
    // leaves out is the environment's.
    const std::string config = file_with("budget.json", R"({"tune": {"max_nconfigs": 2}})");
    const run_result r = primcached(workload, {"--config", config, "--duration", "0.5"}, env);
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("primcached: tuning on (at most 2 configurations per "
                                      "primitive); tune table " +
                                      env_table + ": 0 entries (PRIMCACHE_TUNE_TABLE)"));
    CHECK_THAT(r.out, Catch::Contains("primcached: tune table " + env_table + ": wrote 1 entry"));
    tune_table t;
    REQUIRE(t.load_file(env_table, PRIMCACHE_VERSION));
    CHECK(rows_of(t, "matmul").size() == 1);
    SECTION("a second run loads it from there") {
      const run_result again =
          primcached(workload, {"--duration", "0.3"}, {"PRIMCACHE_TUNE_TABLE=" + env_table});
      INFO(again.out << again.err);
      REQUIRE(again.status == 0);
      CHECK_THAT(again.out, Catch::Contains("primcached: tuning off; tune table " + env_table +
                                            ": 1 entry (PRIMCACHE_TUNE_TABLE)"));
      CHECK_THAT(again.out, Catch::Contains("primcached: tuned mm: jit:matmul " +
                                            rows_of(t, "matmul")[0].entry.config + "\n"));
    }
  }
  SECTION("the config over the environment: its table, relative to its folder, and budget") {
    const std::string dir = temp_path("config-dir");
    REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
    write_text(dir + "/primcached.json",
               R"({"tune": {"enabled": true, "table": "t.json", "max_nconfigs": 2}})");
    const run_result r =
        primcached(workload, {"--config", dir + "/primcached.json", "--duration", "0.5"}, {env[1]});
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("primcached: tuning on (at most 2 configurations per "
                                      "primitive); tune table " +
                                      dir + "/t.json: not found"));
    CHECK_THAT(r.out, Catch::Contains("wrote 1 entry"));
    tune_table t;
    REQUIRE(t.load_file(dir + "/t.json", PRIMCACHE_VERSION));
    CHECK(rows_of(t, "matmul").size() == 1);
    CHECK_FALSE(exists(env_table));
  }
  SECTION("\"enabled\": false over PRIMCACHE_TUNE=1") {
    const std::string config = file_with("off.json", R"({"tune": {"enabled": false}})");
    const run_result r = primcached(workload, {"--config", config, "--duration", "0.3"}, env);
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("primcached: tuning off; tune table " + env_table));
    CHECK_THAT(r.out, Catch::Contains("nothing tuned in this run, not written"));
    CHECK_FALSE(exists(env_table));
  }
  SECTION("--no-tune over \"enabled\": true") {
    const std::string config = file_with("on.json", R"({"tune": {"enabled": true}})");
    const run_result r =
        primcached(workload, {"--config", config, "--no-tune", "--duration", "0.3"});
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, !Catch::Contains("primcached: tuning"));
  }
  SECTION("--tune, --tune-table and --tune-max-nconfigs over the config and the environment") {
    const std::string config_table = temp_path("config-table.json");
    const std::string config =
        file_with("off.json", R"({"tune": {"enabled": false, "max_nconfigs": 5, "table": ")" +
                                  config_table + R"("}})");
    const std::string table = temp_path("flag-table.json");
    const run_result r = primcached(workload,
                                    {"--config", config, "--tune", "--tune-table", table,
                                     "--tune-max-nconfigs", "2", "--duration", "0.5"},
                                    env);
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("primcached: tuning on (at most 2 configurations per "
                                      "primitive); tune table " +
                                      table + ": not found"));
    tune_table t;
    REQUIRE(t.load_file(table, PRIMCACHE_VERSION));
    CHECK(rows_of(t, "matmul").size() == 1);
    CHECK_FALSE(exists(config_table));
    CHECK_FALSE(exists(env_table));
  }
  SECTION("tuning with no table file: said at start and at stop") {
    const run_result r =
        primcached(workload, {"--tune", "--tune-max-nconfigs", "2", "--duration", "0.5"});
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("no tune table file: what is tuned is not kept"));
    CHECK_THAT(r.out, Catch::Contains("primcached: the tuned entries are not kept"));
  }
}

TEST_CASE("primcached reports a corrupt or foreign tune table and runs",
          "[services][daemon][tune]") {
  const std::string workload = file_with("mm.json", kMatmulOnly);
  SECTION("not JSON: reported, left alone when nothing is tuned") {
    const std::string table = file_with("bad.json", "{ not a table");
    const run_result r = primcached(workload, {"--tune-table", table, "--duration", "0.3"});
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.err, Catch::StartsWith("primcached: ignoring the tune table: " + table + ": "));
    CHECK_THAT(r.out, Catch::Contains("tune table " + table + ": ignored"));
    CHECK_THAT(r.out, Catch::Contains("primcached: stopping (duration)"));
    CHECK(read_text(table) == "{ not a table");
  }
  SECTION("not JSON: replaced when the run tunes") {
    const std::string table = file_with("bad.json", "[1, 2");
    const run_result r = primcached(workload, {"--tune", "--tune-table", table,
                                               "--tune-max-nconfigs", "2", "--duration", "0.5"});
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.err, Catch::Contains("primcached: ignoring the tune table: " + table));
    tune_table t;
    REQUIRE(t.load_file(table, PRIMCACHE_VERSION));
    CHECK(t.size() == 1);
  }
  SECTION("another library version's table") {
    const std::string table = file_with(
        "old.json",
        R"({"format": "primcache-tune-table", "format_version": 1, "library_version": "0.0.1-old", "entries": []})");
    const run_result r = primcached(workload, {"--tune-table", table, "--duration", "0.3"});
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.err, Catch::Contains("primcached: ignoring the tune table: " + table +
                                      " was written by primcache 0.0.1-old"));
  }
}

TEST_CASE("primcached says so and exits 1 when the tune table cannot be written",
          "[services][daemon][tune]") {
  const std::string workload = file_with("mm.json", kMatmulOnly);
  const run_result r =
      primcached(workload, {"--tune", "--tune-table", "/nonexistent-primcache-dir/t.json",
                            "--tune-max-nconfigs", "2", "--duration", "0.5"});
  INFO(r.out << r.err);
  CHECK(r.status == 1);
  CHECK_THAT(r.out, Catch::Contains("primcached: tuning: 1 tuned"));
  CHECK_THAT(r.err, Catch::Contains("primcached: cannot write the tune table: "));
  CHECK_THAT(r.err, Catch::Contains("/nonexistent-primcache-dir/t.json"));
}

TEST_CASE("primcached refuses malformed tune flags and config values naming them",
          "[services][daemon][tune]") {
  const std::string workload = file_with("mm.json", kMatmulOnly);
  SECTION("--tune takes no value") {
    const run_result r = run_program({PRIMCACHED_PATH, "--tune=1"});
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::StartsWith("primcached: --tune takes no value\nusage:"));
  }
  SECTION("--tune-max-nconfigs out of range or not a number") {
    const std::string v = GENERATE(std::string("0"), std::string("1001"), std::string("4x"));
    const run_result r = run_program({PRIMCACHED_PATH, "--tune-max-nconfigs", v});
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::StartsWith("primcached: --tune-max-nconfigs " + v +
                                        ": expected an integer in [1, 1000]"));
  }
  SECTION("--tune-table with no path") {
    const run_result r = run_program({PRIMCACHED_PATH, "--tune-table="});
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::StartsWith("primcached: --tune-table: expected a path"));
  }
  SECTION("a config's tune section") {
    const std::string config = file_with("bad.json", R"({"tune": {"max_nconfigs": 0}})");
    const run_result r = run_program(
        {PRIMCACHED_PATH, "--config", config, "--workload", workload, "--duration", "1"});
    CHECK(r.status == 2);
    CHECK(r.err ==
          "primcached: " + config + ": tune.max_nconfigs: expected an integer in [1, 1000]\n");
  }
}
