#include <signal.h>
#include <sys/stat.h>

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
    const std::string wrong = temp_path("wrong-token");
    write_text(wrong, "0123456789abcdef\n");
    const auto r = run_program({PRIMCACHE_CLI_PATH, "--admin", d.admin(), "--token-file", wrong,
                                "set-capacity", "primitive", "3"});
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::StartsWith("primcache: set-capacity primitive: HTTP 401: "));
    CHECK_THAT(r.err, Catch::Contains("was refused"));
    CHECK(d.get("/api/v1/caches/primitive").at("capacity").to_number<std::uint64_t>() == 14);
  }
}
