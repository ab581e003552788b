// A fleet on one machine (issue 10): 8 processes, each with its own empty
// persistent cache directory, sharing one real redis-server, run the same
// workload (two matmuls, a convolution, an eltwise with a nested reorder)
// — first one after another, then all at once — and the compilations
// across the fleet are counted.
//
// Each member is this binary run again with the hidden tag [.fleet_member]
// and the environment a fleet member has: PRIMCACHE_PERSISTENT_CACHE_DIR
// (its own directory), PRIMCACHE_PERSISTENT_CACHE_REDIS (the shared
// server), PRIMCACHE_JIT_MODE=sync (every creation the store does not serve
// is one compilation, on the creating thread) and PRIMCACHE_VERBOSE=1. A
// member does what an application does — create, run, exit — and nothing
// more: its writes reach Redis through the runtime's write-behind queue
// and the tiered store's background writer before it exits, or not at all.
//
// Counted per member: the runtime's persistent-cache misses (creations the
// store did not serve: compiled), the `persistent_cache_miss` verbose lines
// (the same, counted from the trace), the CPU backend's compiled objects,
// hits and Redis hits, and a digest of the outputs.
//
// No timing is asserted: the Redis timeouts in the URL are 20 s (a loaded
// 2-core machine under a sanitizer must not turn a healthy server into
// misses), and each wait is bounded only to turn a hang into a failure.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cases.hpp"
#include "jit/compiler.hpp"
#include "primcache/persist/blob_store.hpp"
#include "primcache/runtime/persistent_cache.hpp"
#include "primcache/runtime/runtime.hpp"
#include "redis_test_support.hpp"

extern char** environ;

using namespace primcache;
using namespace primcache::test;

namespace {

constexpr int fleet_size = 8;
constexpr auto member_bound = std::chrono::minutes(10);  // a hang, not a slow machine

std::vector<a_case> workload() {
  return {matmul_case(19), matmul_case(23), conv_case(), eltwise_case(format_tag::nhwc)};
}

struct member_report {
  std::uint64_t compiled = 0;     // objects the CPU backend compiled
  std::uint64_t misses = 0;       // creations the store did not serve (created afresh)
  std::uint64_t hits = 0;         // creations the store served
  std::uint64_t remote_hits = 0;  // of the store's hits, from Redis
  std::uint64_t miss_lines = 0;   // create:[nested_]persistent_cache_miss lines
  std::string digest;
  std::string output;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::uint64_t count_of(const std::string& text, const std::string& what) {
  std::uint64_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// One member process: this binary, with the fleet member's environment.
class member {
 public:
  member(const std::string& dir, const std::string& url, const std::string& out_path)
      : out_(out_path) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "PRIMCACHE_", 10) != 0) env.emplace_back(*e);
    }
    env.push_back("PRIMCACHE_PERSISTENT_CACHE_DIR=" + dir);
    env.push_back("PRIMCACHE_PERSISTENT_CACHE_REDIS=" + url);
    env.push_back("PRIMCACHE_JIT_MODE=sync");
    env.push_back("PRIMCACHE_VERBOSE=1");
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string exe = "/proc/self/exe", tag = "[.fleet_member]", colour = "--use-colour", no = "no";
    char* argv[] = {exe.data(), tag.data(), colour.data(), no.data(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    // The member's own binary: /proc/self/exe is read by the kernel at exec.
    const int rc = ::posix_spawn(&pid_, "/proc/self/exe", &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      FAIL("cannot spawn a fleet member: " << std::strerror(rc));
    }
  }
  ~member() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  member(const member&) = delete;
  member& operator=(const member&) = delete;

  // Waits for the member (killing it past member_bound) and parses its report.
  member_report finish() {
    const auto end = std::chrono::steady_clock::now() + member_bound;
    int st = 0;
    for (;;) {
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) break;
      if (std::chrono::steady_clock::now() > end) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &st, 0);
        pid_ = -1;
        FAIL("a fleet member did not finish within 10 minutes:\n" << read_all(out_));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
    member_report m;
    m.output = read_all(out_);
    INFO(m.output);
    REQUIRE(WIFEXITED(st));
    REQUIRE(WEXITSTATUS(st) == 0);
    std::smatch match;
    static const std::regex line(
        "fleet_member compiled ([0-9]+) misses ([0-9]+) hits ([0-9]+) remote_hits ([0-9]+) "
        "digest ([0-9a-f]+)");
    REQUIRE(std::regex_search(m.output, match, line));
    m.compiled = std::stoull(match[1]);
    m.misses = std::stoull(match[2]);
    m.hits = std::stoull(match[3]);
    m.remote_hits = std::stoull(match[4]);
    m.digest = match[5];
    m.miss_lines = count_of(m.output, "persistent_cache_miss,");
    return m;
  }

 private:
  std::string out_;
  pid_t pid_ = -1;
};

std::string fleet_url(const redis_server& server) {
  // A GET that timed out in the client could still run in the server after
  // another member's SET and spoil the count: the server never fails here,
  // so the timeouts are only a bound on a hang.
  return server.url("fleet") + "?connect_timeout_ms=20000&command_timeout_ms=20000";
}

std::uint64_t redis_keys(raw_redis& raw) {
  return std::stoull(raw.command({"DBSIZE"}));
}

// The commands the server ran, in its order, from a MONITOR connection:
// which client asked GET or SET for which key. Stops at a marker command.
struct monitored_command {
  std::string client, command, key;
};

class monitor {
 public:
  explicit monitor(int port) : raw_(port) {
    if (raw_.command({"MONITOR"}) != "OK") FAIL("MONITOR was refused");
    thread_ = std::thread([this] {
      static const std::regex line(
          R"re(^[0-9.]+ \[[0-9]+ ([^\]]+)\] "([A-Za-z]+)"(?: "([^"]*)")?)re");
      for (;;) {
        std::string text;
        try {
          text = raw_.next_reply();
        } catch (const std::exception& e) {
          error_ = e.what();
          return;
        }
        text.resize(std::min<std::size_t>(text.size(), 300));  // a SET's value is not needed
        std::smatch m;
        if (!std::regex_search(text, m, line)) continue;
        monitored_command c{m[1], m[2], m[3]};
        std::transform(c.command.begin(), c.command.end(), c.command.begin(), ::toupper);
        if (c.command == "ECHO" && c.key == "primcache-fleet-test-done") return;
        if (c.client.find("lua") != std::string::npos) continue;
        if (c.command == "GET" || c.command == "SET") commands_.push_back(std::move(c));
      }
    });
  }
  ~monitor() {
    if (thread_.joinable()) thread_.join();
  }
  // Sends the marker from another connection and waits for the stream to
  // reach it: every command before it has been seen.
  std::vector<monitored_command> stop(raw_redis& other) {
    other.command({"ECHO", "primcache-fleet-test-done"});
    thread_.join();
    if (!error_.empty()) FAIL("the MONITOR connection failed: " << error_);
    return std::move(commands_);
  }

 private:
  raw_redis raw_;
  std::thread thread_;
  std::vector<monitored_command> commands_;
  std::string error_;
};

}  // namespace

// A member: create and run the workload, print what it took, exit.
TEST_CASE("fleet member: create and run the workload", "[.fleet_member]") {
  std::shared_ptr<blob_store> store = get_persistent_cache();
  REQUIRE(store != nullptr);
  REQUIRE(store->describe().find("then redis") != std::string::npos);  // the tiered store
  const std::uint64_t compiled_before = cpu_internal::objects_compiled();
  std::uint64_t digest = 1469598103934665603ull;
  for (const a_case& c : workload()) {
    for (std::uint8_t b : run(primitive(c.make_pd()), c)) digest = (digest ^ b) * 1099511628211ull;
  }
  const persistent_cache_stats st = get_persistent_cache_stats();
  std::printf("fleet_member compiled %llu misses %llu hits %llu remote_hits %llu digest %016llx\n",
              static_cast<unsigned long long>(cpu_internal::objects_compiled() - compiled_before),
              static_cast<unsigned long long>(st.misses), static_cast<unsigned long long>(st.hits),
              static_cast<unsigned long long>(store->stats().remote_hits),
              static_cast<unsigned long long>(digest));
  std::fflush(stdout);
}

TEST_CASE("a fleet of 8 processes sharing one Redis compiles each kernel once",
          "[persistent][fleet]") {
  redis_server server;
  raw_redis raw(server.port());
  const std::string url = fleet_url(server);
  temp_dir work;
  const std::size_t top_level = workload().size();

  // One after another: the first compiles every kernel, the others none.
  std::vector<member_report> seq;
  for (int i = 0; i < fleet_size; ++i) {
    const std::string dir = work.path() + "/seq-" + std::to_string(i);
    member m(dir, url, work.path() + "/seq-" + std::to_string(i) + ".out");
    seq.push_back(m.finish());
  }
  const std::uint64_t distinct = redis_keys(raw);  // one key per kernel
  INFO("first member:\n" << seq[0].output);
  REQUIRE(distinct >= top_level);  // and the nested reorder
  CHECK(seq[0].misses == distinct);
  CHECK(seq[0].miss_lines == distinct);
  // Objects: a composing primitive (the eltwise via a reorder) compiles
  // none of its own; its nested ones do.
  CHECK(seq[0].compiled > 0);
  CHECK(seq[0].compiled <= distinct);
  CHECK(seq[0].hits == 0);
  std::uint64_t fleet_misses = 0, fleet_compiled = 0;
  for (int i = 0; i < fleet_size; ++i) {
    INFO("member " << i << ":\n" << seq[i].output);
    fleet_misses += seq[i].misses;
    fleet_compiled += seq[i].compiled;
    CHECK(seq[i].digest == seq[0].digest);  // loaded code computes the same bits
    if (i == 0) continue;
    // Warm from Redis: every top-level creation a Redis hit, nothing compiled.
    CHECK(seq[i].misses == 0);
    CHECK(seq[i].miss_lines == 0);
    CHECK(seq[i].compiled == 0);
    CHECK(seq[i].hits == top_level);
    CHECK(seq[i].remote_hits == top_level);
  }
  CHECK(fleet_misses == distinct);
  CHECK(fleet_compiled == seq[0].compiled);

  // All at once, on an empty Redis: a member compiles a kernel only when
  // its GET for it reached the server before the first SET of it did.
  raw.command({"FLUSHALL"});
  std::vector<member_report> together;
  std::vector<monitored_command> commands;
  {
    monitor watch(server.port());
    std::vector<std::unique_ptr<member>> members;
    for (int i = 0; i < fleet_size; ++i) {
      members.push_back(
          std::make_unique<member>(work.path() + "/par-" + std::to_string(i), url,
                                   work.path() + "/par-" + std::to_string(i) + ".out"));
    }
    for (auto& m : members) together.push_back(m->finish());
    commands = watch.stop(raw);
  }
  CHECK(redis_keys(raw) == distinct);

  // Per key: the GETs before its first SET (the members that missed it and
  // raced to compile it), and the SETs (every compilation is written once).
  std::map<std::string, std::uint64_t> gets_before_set;
  std::set<std::string> set_seen;
  std::uint64_t sets = 0;
  for (const monitored_command& c : commands) {
    if (c.command == "SET") {
      ++sets;
      set_seen.insert(c.key);
    } else if (!set_seen.count(c.key)) {
      ++gets_before_set[c.key];
    }
  }
  std::uint64_t raced = 0;  // members beyond the first that missed the same key
  for (const auto& [key, n] : gets_before_set) raced += n - 1;
  CHECK(set_seen.size() == distinct);
  CHECK(gets_before_set.size() == distinct);

  std::uint64_t misses = 0, miss_lines = 0;
  for (int i = 0; i < fleet_size; ++i) {
    INFO("member " << i << ":\n" << together[i].output);
    CHECK(together[i].digest == seq[0].digest);
    CHECK(together[i].misses <= distinct);  // no member compiles a kernel twice
    CHECK(together[i].miss_lines == together[i].misses);
    misses += together[i].misses;
    miss_lines += together[i].miss_lines;
  }
  INFO("distinct " << distinct << ", raced " << raced << ", compilations " << misses);
  CHECK(misses >= distinct);          // Redis was empty: each compiled somewhere
  CHECK(misses <= distinct + raced);  // and again only by a member that raced on its miss
  CHECK(raced <= (fleet_size - 1) * distinct);
  CHECK(sets == misses);  // every compilation written once, none lost
  CHECK(miss_lines == misses);
  std::printf(
      "fleet of %d: %llu distinct kernels; one after another %llu creations compiled; all at "
      "once %llu (bound %llu: distinct + %llu raced on a miss)\n",
      fleet_size, static_cast<unsigned long long>(distinct),
      static_cast<unsigned long long>(fleet_misses), static_cast<unsigned long long>(misses),
      static_cast<unsigned long long>(distinct + raced), static_cast<unsigned long long>(raced));

  // A member started after them starts warm.
  member late(work.path() + "/late", url, work.path() + "/late.out");
  const member_report l = late.finish();
  INFO(l.output);
  CHECK(l.misses == 0);
  CHECK(l.compiled == 0);
  CHECK(l.remote_hits == top_level);
}
