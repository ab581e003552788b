#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <string>

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "http_client.hpp"

#include "process.hpp"

namespace {

using namespace std::chrono_literals;
using primcache::test::child_process;
using primcache::test::run_program;
using primcache::test::temp_path;
using primcache::test::write_text;

// Two small primitives: fast to compile, so the daemon is up at once.
const std::string tiny_workload = R"({"name": "tiny", "primitives": [
  {"kind": "eltwise", "algorithm": "relu", "shapes": {"src": [16, 16]}, "recreate": 0.5},
  {"kind": "reorder", "shapes": {"src": [16, 16]}, "layouts": {"dst": "ba"}}]})";

std::string tiny_workload_file() {
  const std::string path = temp_path("tiny.json");
  write_text(path, tiny_workload);
  return path;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("primcached runs a workload for --duration seconds and exits 0", "[services][daemon]") {
  const std::string token_file = temp_path("token");
  const auto r =
      run_program({PRIMCACHED_PATH, "--workload", tiny_workload_file(), "--admin", "127.0.0.1:0",
                   "--token-file", token_file, "--duration", "1.5", "--threads", "2"});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("primcached: token file " + token_file));
  CHECK_THAT(r.out, Catch::Contains("primcached: stopping (duration)"));
  CHECK_THAT(r.out, Catch::Contains("primcached: total"));
  CHECK_THAT(r.out, Catch::Contains("executions/s"));
  CHECK_FALSE(exists(token_file));  // removed on a clean exit
}

TEST_CASE("primcached stops on SIGTERM or SIGINT with exit 0", "[services][daemon]") {
  const int sig = GENERATE(SIGTERM, SIGINT);
  const std::string token_file = temp_path("token");
  child_process p({PRIMCACHED_PATH, "--workload", tiny_workload_file(), "--admin", "127.0.0.1:0",
                   "--token-file", token_file});
  REQUIRE(p.wait_for_output("primcached: workload", 20s));
  CHECK(exists(token_file));
  struct stat st {};
  REQUIRE(::stat(token_file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  p.signal(sig);
  REQUIRE(p.wait(10s) == 0);
  CHECK_THAT(p.out(), Catch::Contains(sig == SIGTERM ? "stopping (SIGTERM)" : "stopping (SIGINT)"));
  CHECK_FALSE(exists(token_file));
}

TEST_CASE("primcached refuses a malformed workload or config naming the field",
          "[services][daemon]") {
  SECTION("a workload with a bad shape") {
    const std::string path = temp_path("bad.json");
    write_text(path, R"({"primitives": [{"kind": "eltwise", "algorithm": "relu",
                                         "shapes": {"src": [0]}}]})");
    const auto r = run_program({PRIMCACHED_PATH, "--workload", path, "--duration", "1"});
    CHECK(r.status == 2);
    CHECK(r.err == "primcached: " + path +
                       ": primitives[0].shapes.src: expected an array of positive integers\n");
  }
  SECTION("a config with a bad field") {
    const std::string path = temp_path("bad-config.json");
    write_text(path, R"({"threads": 0})");
    const auto r = run_program({PRIMCACHED_PATH, "--config", path, "--duration", "1"});
    CHECK(r.status == 2);
    CHECK(r.err == "primcached: " + path + ": threads: expected an integer in [1, 1024]\n");
  }
  SECTION("a config naming a cache that does not exist") {
    const std::string path = temp_path("bad-cache.json");
    write_text(path, R"({"caches": {"nope": 3}})");
    const auto r = run_program(
        {PRIMCACHED_PATH, "--config", path, "--workload", tiny_workload_file(), "--duration", "1"});
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::StartsWith("primcached: " + path + ": caches.nope: no cache"));
  }
  SECTION("a workload file that does not exist") {
    const auto r = run_program({PRIMCACHED_PATH, "--workload", "/nonexistent/w.json"});
    CHECK(r.status == 1);
    CHECK(r.err == "primcached: cannot read /nonexistent/w.json\n");
  }
  SECTION("a malformed option") {
    const auto r = run_program({PRIMCACHED_PATH, "--admin", "localhost"});
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::StartsWith("primcached: --admin localhost: expected HOST:PORT"));
  }
  SECTION("an admin host that is a name: a usage error, before the workload is read") {
    const auto r = run_program(
        {PRIMCACHED_PATH, "--workload", "/nonexistent/w.json", "--admin", "localhost:0"});
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::StartsWith("primcached: --admin localhost:0: 'localhost' is not an "
                                        "IP address (such as 127.0.0.1 or ::1; primcached "
                                        "resolves no names)"));
  }
}

TEST_CASE("primcached exits 2 for a graph workload its executor refuses while loading",
          "[services][daemon]") {
  // y = relu(x), 4x8, with `op_extra` added to the op and `y_extra` to y.
  auto graph = [](const std::string& op_extra, const std::string& y_extra) {
    return R"({"tensors": [{"name": "x", "shape": [4, 8], "type": "f32", "role": "input"},
                          {"name": "y", "role": "output")" +
           y_extra + R"(}],
               "ops": [{"name": "act", "kind": "eltwise", "inputs": ["x"], "outputs": ["y"],
                        "attributes": {"algorithm": "relu"})" +
           op_extra + "}]}";
  };
  SECTION("an op forcing a library no kernel is registered under") {
    const std::string path = temp_path("nolib.json");
    write_text(path, graph(R"(, "library": "nolib")", ""));
    const auto r = run_program({PRIMCACHED_PATH, "--workload", path, "--duration", "1"});
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::StartsWith("primcached: " + path +
                                        " (graph): op 'act' (eltwise): "
                                        "no kernel for cpu/nolib"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  SECTION("an output on a place this machine does not have") {
    const std::string path = temp_path("cpu3.json");
    write_text(path, graph("", R"(, "place": "cpu:3")"));
    const auto r = run_program({PRIMCACHED_PATH, "--workload", path, "--duration", "1"});
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::StartsWith("primcached: " + path + " (graph): "));
    // libs/graph's words: "no transform from cpu/f32/ab/jit to cpu:3/...", or
    // "tensor 'y' (output) is on cpu:3: cpu engine index 3 is out of range".
    CHECK_THAT(r.err, Catch::Contains("cpu:3"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

TEST_CASE("primcached reads only regular files of at most 16 MiB: others exit 1",
          "[services][daemon]") {
  SECTION("a directory as the config") {
    const std::string dir = temp_path("config-dir");
    REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
    const auto r = run_program({PRIMCACHED_PATH, "--config", dir, "--duration", "1"});
    CHECK(r.status == 1);
    CHECK(r.err == "primcached: cannot read " + dir + ": a directory, not a regular file\n");
  }
  SECTION("/dev/zero as the workload: refused at once, not read until memory runs out") {
    const auto r =
        run_program({PRIMCACHED_PATH, "--workload", "/dev/zero", "--duration", "1"}, 10s);
    CHECK(r.status == 1);
    CHECK(r.err == "primcached: cannot read /dev/zero: a character device, not a regular file\n");
  }
  SECTION("a FIFO as the workload: refused at once, not waited on for a writer") {
    const std::string fifo = temp_path("workload.fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const auto r = run_program({PRIMCACHED_PATH, "--workload", fifo, "--duration", "1"}, 10s);
    CHECK(r.status == 1);
    CHECK(r.err == "primcached: cannot read " + fifo + ": a FIFO, not a regular file\n");
  }
  SECTION("a workload over 16 MiB, valid JSON all the same") {
    const std::string path = temp_path("large.json");
    write_text(path, tiny_workload + std::string(std::size_t{16} << 20, ' '));
    const auto r = run_program({PRIMCACHED_PATH, "--workload", path, "--duration", "1"});
    CHECK(r.status == 1);
    CHECK(r.err == "primcached: cannot read " + path +
                       ": larger than 16 MiB, the limit for a config, workload or graph file\n");
  }
  SECTION("a graph file that is a directory") {
    const std::string dir = temp_path("graph-dir");
    REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
    const std::string path = temp_path("graph-dir-workload.json");
    write_text(path, R"({"graphs": [{"file": ")" + dir + R"("}]})");
    const auto r = run_program({PRIMCACHED_PATH, "--workload", path, "--duration", "1"});
    CHECK(r.status == 1);
    CHECK(r.err == "primcached: " + path + ": graphs[0].file: graph file " + dir +
                       ": cannot be read: a directory, not a regular file\n");
  }
}

TEST_CASE("primcached refuses a workload tensor over 4 GiB at load with exit 2",
          "[services][daemon]") {
  // Loaded, each workload thread would allocate and zero three 16 GiB buffers.
  const std::string path = temp_path("huge.json");
  write_text(path, R"({"primitives": [{"kind": "matmul",
      "shapes": {"src": [65536, 65536], "weights": [65536, 65536]}}]})");
  const std::string token_file = temp_path("token");
  const auto r = run_program({PRIMCACHED_PATH, "--workload", path, "--token-file", token_file,
                              "--threads", "1", "--duration", "1"});
  CHECK(r.status == 2);
  CHECK(r.err == "primcached: " + path +
                     ": primitives[0].shapes.src: 65536x65536 f32 takes 16 GiB (17179869184 "
                     "bytes); a workload tensor may take at most 4 GiB\n");
  CHECK_FALSE(exists(token_file));
}

TEST_CASE("primcached refuses a config with a key given twice, exit 2", "[services][daemon]") {
  const std::string path = temp_path("twice.json");
  write_text(path, "{\"threads\": 1,\n \"threads\": 1024}");
  const auto r = run_program(
      {PRIMCACHED_PATH, "--config", path, "--workload", tiny_workload_file(), "--duration", "1"});
  CHECK(r.status == 2);
  CHECK(r.err == "primcached: " + path +
                     ": line 2: duplicate key \"threads\" (a key may appear once in an object)\n");
}

TEST_CASE("primcache fails with one line when no daemon answers", "[services][cli]") {
  const auto r = run_program({PRIMCACHE_CLI_PATH, "--admin", "127.0.0.1:1", "stats"});
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Catch::StartsWith("primcache: no primcached answers at 127.0.0.1:1"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("primcache refuses a malformed command line", "[services][cli]") {
  CHECK(run_program({PRIMCACHE_CLI_PATH}).status == 2);
  CHECK(run_program({PRIMCACHE_CLI_PATH, "frobnicate"}).status == 2);
  const auto r = run_program({PRIMCACHE_CLI_PATH, "set-capacity", "primitive", "-3"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::StartsWith("primcache: set-capacity primitive -3: expected a capacity"));
}

namespace {

namespace json = boost::json;

// A running daemon on an ephemeral loopback port.
struct running_daemon {
  std::string token_file = temp_path("token");
  child_process process{{PRIMCACHED_PATH, "--workload", tiny_workload_file(), "--admin",
                         "127.0.0.1:0", "--token-file", token_file}};
  std::uint16_t port = 0;

  running_daemon() {
    REQUIRE(process.wait_for_output("primcached: workload", 20s));
    const std::string out = process.out();
    const std::string marker = "primcached: console http://127.0.0.1:";
    const std::size_t at = out.find(marker);
    REQUIRE(at != std::string::npos);
    port = static_cast<std::uint16_t>(std::stoi(out.substr(at + marker.size())));
  }
  ~running_daemon() {
    process.signal(SIGTERM);
    process.wait(10s);
  }
  std::string admin() const { return "127.0.0.1:" + std::to_string(port); }
  json::value get(const std::string& target) const {
    const auto r = primcache::cli::http_request("127.0.0.1", port, "GET", target, "", "");
    REQUIRE(r.status == 200);
    return json::parse(r.body);
  }
};

}  // namespace

TEST_CASE("primcached serves /healthz and /api/v1/caches over loopback", "[services][daemon]") {
  running_daemon d;
  CHECK(d.get("/healthz").at("status") == "ok");
  const json::value doc = d.get("/api/v1/caches");
  const json::array& caches = doc.at("caches").as_array();
  bool found = false;
  for (const json::value& c : caches) {
    if (c.at("name") == "primitive") {
      found = true;
      CHECK(c.at("capacity").to_number<std::uint64_t>() == 14);
    }
  }
  CHECK(found);
  d.process.signal(SIGTERM);
  CHECK(d.process.wait(10s) == 0);
}

TEST_CASE("primcache stats, set-capacity and flush work against a running daemon",
          "[services][cli]") {
  running_daemon d;
  const auto base = std::vector<std::string>{PRIMCACHE_CLI_PATH, "--admin", d.admin(),
                                             "--token-file", d.token_file};
  auto cli = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), args.begin(), args.end());
    return run_program(argv);
  };
  SECTION("stats lists every cache with its numbers") {
    const auto r = cli({"stats"});
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("hit rate"));
    CHECK_THAT(r.out, Catch::Contains("primitive "));
    CHECK_THAT(r.out, Catch::Contains("primitive_desc"));
  }
  SECTION("set-capacity changes the capacity the API reports") {
    const auto r = cli({"set-capacity", "primitive", "5"});
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::StartsWith("primitive: capacity 5"));
    CHECK(d.get("/api/v1/caches/primitive").at("capacity").to_number<std::uint64_t>() == 5);
  }
  SECTION("flush reports how many entries went") {
    const auto r = cli({"flush", "primitive"});
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::StartsWith("primitive: flushed "));
  }
  SECTION("an unknown cache is one line naming the server's error") {
    const auto r = cli({"flush", "nope"});
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::StartsWith("primcache: flush nope: HTTP 404: "));
  }
  SECTION("a wrong token is refused with exit 1 and changes nothing") {
    // Of primcached's form (64 hex digits, mode 0600) so that it is sent.
    const std::string wrong = temp_path("wrong-token");
    write_text(wrong, std::string(64, '0') + "\n");
    REQUIRE(::chmod(wrong.c_str(), 0600) == 0);
    const auto r = run_program({PRIMCACHE_CLI_PATH, "--admin", d.admin(), "--token-file", wrong,
                                "set-capacity", "primitive", "3"});
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::StartsWith("primcache: set-capacity primitive: HTTP 401: "));
    CHECK_THAT(r.err, Catch::Contains("was refused"));
    CHECK(d.get("/api/v1/caches/primitive").at("capacity").to_number<std::uint64_t>() == 14);
  }
}
