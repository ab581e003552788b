// The persistent kernel cache: what a first creation costs when the code
// comes from a directory store instead of the compiler, and what a
// restarted process pays to its first outputs.
//
//   BM_FirstCreate/<source>/<op>         pd + primitive + first execution, the in-memory
//                                        primitive cache emptied first (untimed)
//   BM_FirstCreate/<source>/<op>/create  the same without the execution
//   BM_CreateHit/<op>                    the same creation served by the primitive cache
//   BM_NewProcess/<source>               a spawned bench_persist_child: ResNet-50's 11
//                                        convolutions created and run once, from the
//                                        spawn to its first outputs (the child says so
//                                        on a pipe; its exit is not timed: exit_ms)
// <source>: compile (no store attached), persistent_dir (a warmed directory
// store), persistent_redis (a warmed Redis store on a redis-server the bench
// starts on a free loopback port; skipped with the reason when
// redis-server is missing).
// <op>: matmul 128x768x3072, conv3x3 (ResNet-50 conv3_x, 128->128 at 28x28).
// Everything here, the child included, runs in the sync JIT mode: what a
// store replaces is the compilation of the specialized kernel, which a
// tiered creation would move to the background (bench_create measures that).
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "primcache/persist/blob_store.hpp"
#include "primcache/runtime/runtime.hpp"

extern char** environ;

namespace {

namespace pc = primcache;
using tag = pc::format_tag;

pc::engine& cpu() {
  static pc::engine e(pc::engine_kind::cpu, 0);
  return e;
}

// A private directory for the bench's stores, removed at exit.
const std::string& bench_dir() {
  static const std::string dir = [] {
    std::string t = (std::filesystem::temp_directory_path() / "primcache-bench-XXXXXX").string();
    if (::mkdtemp(t.data()) == nullptr) std::abort();
    std::atexit([] { std::filesystem::remove_all(bench_dir()); });
    return t;
  }();
  return dir;
}

// An op: its descriptor, arguments, and one creation + optional execution.
struct op {
  virtual ~op() = default;
  virtual pc::primitive_desc make_pd() const = 0;
  pc::primitive::args args;
  void run(bool execute) const {
    pc::primitive p(make_pd());
    if (!execute) return;
    pc::stream s(cpu());
    p.execute(s, args);
    s.wait();
  }
};

pc::memory filled(const pc::memory::desc& md) {
  pc::memory m(md, cpu());
  auto* p = static_cast<float*>(m.get_data_handle());
  for (std::size_t i = 0; i < md.size_bytes() / 4; ++i) p[i] = 0.001f * static_cast<float>(i % 13);
  return m;
}

struct matmul_op final : op {
  static constexpr std::int64_t kM = 128, kN = 768, kK = 3072;
  pc::memory::desc a{{kM, kK}, pc::data_type::f32, tag::ab};
  pc::memory::desc b{{kK, kN}, pc::data_type::f32, tag::ab};
  pc::memory::desc c{{kM, kN}, pc::data_type::f32, tag::ab};
  matmul_op() {
    args = {{PRIMCACHE_ARG_SRC, filled(a)},
            {PRIMCACHE_ARG_WEIGHTS, filled(b)},
            {PRIMCACHE_ARG_DST, filled(c)}};
  }
  pc::primitive_desc make_pd() const override {
    return pc::matmul::primitive_desc(pc::matmul::desc(a, b, c), cpu());
  }
};

struct conv_op final : op {
  static constexpr std::int64_t kC = 128, kHW = 28;
  pc::memory::desc src{{1, kC, kHW, kHW}, pc::data_type::f32, tag::nChw16c};
  pc::memory::desc wei_any{{kC, kC, 3, 3}, pc::data_type::f32, tag::any};
  pc::memory::desc bias{{kC}, pc::data_type::f32, tag::a};
  pc::memory::desc dst{{1, kC, kHW, kHW}, pc::data_type::f32, tag::nChw16c};
  conv_op() {
    args = {{PRIMCACHE_ARG_SRC, filled(src)},
            {PRIMCACHE_ARG_WEIGHTS, filled(make_pd().weights_desc())},
            {PRIMCACHE_ARG_BIAS, filled(bias)},
            {PRIMCACHE_ARG_DST, filled(dst)}};
  }
  pc::primitive_desc make_pd() const override {
    return pc::convolution_forward::primitive_desc(
        pc::convolution_forward::desc(pc::prop_kind::forward_inference,
                                      pc::algorithm::convolution_direct, src, wei_any, bias, dst,
                                      {1, 1}, {1, 1}, {1, 1}),
        cpu());
  }
};

const op& the_op(int which) {
  static const matmul_op m;
  static const conv_op c;
  return which == 0 ? static_cast<const op&>(m) : c;
}

void empty_primitive_cache() {
  pc::set_primitive_cache_capacity(0);
  pc::set_primitive_cache_capacity(1024);
}

enum source { compile = 0, persistent_dir = 1, persistent_redis = 2 };

// A redis-server on a free loopback port for the bench's life (no
// persistence), or the reason there is none.
class redis_server {
 public:
  redis_server() {
    std::string exe;
    for (const char* d : {"/usr/bin", "/usr/local/bin", "/usr/sbin"}) {
      if (::access((std::string(d) + "/redis-server").c_str(), X_OK) == 0) {
        exe = std::string(d) + "/redis-server";
        break;
      }
    }
    if (exe.empty()) {
      why_ = "skipped: redis-server is not installed (scripts/install-deps installs it)";
      return;
    }
    port_ = free_port();
    const std::string port = std::to_string(port_);
    const char* argv[] = {exe.c_str(), "--port", port.c_str(),   "--bind", "127.0.0.1",
                          "--save",    "",       "--appendonly", "no",     nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    const int rc = posix_spawn(&pid_, exe.c_str(), &fa, nullptr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      pid_ = -1;
      why_ = "skipped: redis-server did not start";
      return;
    }
    for (int i = 0; i < 500; ++i) {  // up to 5 s
      if (connects(port_)) return;
      ::usleep(10000);
    }
    why_ = "skipped: redis-server did not listen within 5 s";
  }
  ~redis_server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  const std::string& why_not() const { return why_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/bench"; }

 private:
  static int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    ::close(fd);
    return ntohs(a.sin_port);
  }
  static bool connects(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }
  pid_t pid_ = -1;
  int port_ = 0;
  std::string why_;
};

redis_server& the_redis() {
  static redis_server r;
  return r;
}

// Attaches what `src` needs (a warmed store for persistent_dir), or skips.
bool attach(benchmark::State& state, source src, const op& o) {
  if (src == compile) {
    pc::set_persistent_cache(nullptr);
    return true;
  }
  if (src == persistent_redis) {
    if (!the_redis().why_not().empty()) {
      std::printf("%s\n", the_redis().why_not().c_str());
      state.SkipWithError(the_redis().why_not().c_str());
      return false;
    }
    pc::set_persistent_cache(pc::open_persistent_cache("", 1024, the_redis().url()));
  } else {
    pc::set_persistent_cache(pc::open_persistent_cache_dir(bench_dir() + "/first-create", 1024));
  }
  empty_primitive_cache();
  o.run(false);  // writes the entry
  pc::flush_persistent_cache_writes();
  return true;
}

void BM_FirstCreate(benchmark::State& state, source src, int which, bool execute) {
  const op& o = the_op(which);
  if (!attach(state, src, o)) return;
  const auto before = pc::get_persistent_cache_stats();
  std::vector<double> ms;
  for (auto _ : state) {
    empty_primitive_cache();
    const auto start = std::chrono::steady_clock::now();
    o.run(execute);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(seconds);
    ms.push_back(seconds * 1e3);
  }
  const auto after = pc::get_persistent_cache_stats();
  std::sort(ms.begin(), ms.end());
  state.counters["median_ms"] = ms[ms.size() / 2];
  state.counters["p90_ms"] = ms[ms.size() * 9 / 10];
  state.counters["store_hits"] = static_cast<double>(after.hits - before.hits);
  pc::flush_persistent_cache_writes();
  pc::set_persistent_cache(nullptr);
}

void BM_CreateHit(benchmark::State& state) {
  const op& o = the_op(static_cast<int>(state.range(0)));
  pc::set_persistent_cache(nullptr);
  o.run(false);
  for (auto _ : state) o.run(false);
}

std::string child_path() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "bench_persist_child")
      .string();
}

// What a spawned child took: from the spawn to its first outputs (its byte
// on the pipe) and to its exit, and its exit status (-1: failed to spawn or
// did not exit).
struct child_run {
  int status = -1;
  double outputs_seconds = 0, exit_seconds = 0;
};

// Spawns the child with `env` added to this process's environment (less the
// persistent cache's variables, and in the sync JIT mode), its descriptor 3
// the write end of a pipe on which it reports its first outputs.
child_run spawn_child(const std::vector<std::string>& env, bool expect_hits) {
  std::vector<std::string> strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var(*e);
    if (var.rfind("PRIMCACHE_PERSISTENT_CACHE_", 0) != 0 &&
        var.rfind("PRIMCACHE_JIT_MODE=", 0) != 0)
      strings.push_back(var);
  }
  strings.emplace_back("PRIMCACHE_JIT_MODE=sync");
  strings.insert(strings.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& s : strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  const std::string path = child_path();
  char ready[] = "--ready-fd=3";
  char expect[] = "--expect-hits";
  char* argv[] = {const_cast<char*>(path.c_str()), ready, expect_hits ? expect : nullptr, nullptr};
  child_run run;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return run;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 3);  // dup2 clears FD_CLOEXEC on 3
  pid_t pid = 0;
  const auto start = std::chrono::steady_clock::now();
  const int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return run;
  }
  char byte = 0;
  ssize_t got = 0;
  do {
    got = ::read(fds[0], &byte, 1);
  } while (got < 0 && errno == EINTR);
  const auto outputs = std::chrono::steady_clock::now();
  ::close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const auto exited = std::chrono::steady_clock::now();
  run.outputs_seconds =
      std::chrono::duration<double>((got == 1 ? outputs : exited) - start).count();
  run.exit_seconds = std::chrono::duration<double>(exited - start).count();
  // No byte: the child failed before its outputs.
  run.status = WIFEXITED(status) ? (got == 1 ? WEXITSTATUS(status) : 3) : -1;
  return run;
}

void BM_NewProcess(benchmark::State& state) {
  const auto src = static_cast<source>(state.range(0));
  std::vector<std::string> env;
  if (src == persistent_dir) {
    const std::string dir = bench_dir() + "/new-process";
    env.push_back("PRIMCACHE_PERSISTENT_CACHE_DIR=" + dir);
    if (spawn_child(env, false).status != 0) {  // warms the directory
      state.SkipWithError("the child failed");
      return;
    }
  }
  double exit_seconds = 0;
  for (auto _ : state) {
    const child_run r = spawn_child(env, src == persistent_dir);
    if (r.status != 0) {
      state.SkipWithError("the child failed (or found nothing in the warmed directory)");
      return;
    }
    state.SetIterationTime(r.outputs_seconds);
    exit_seconds += r.exit_seconds;
  }
  state.counters["exit_ms"] =
      benchmark::Counter(exit_seconds * 1e3, benchmark::Counter::kAvgIterations);
}

}  // namespace

// Each (source, op, execute) is one registration, named as in
// docs/PERFORMANCE.md. Per-creation times are taken by hand (manual time):
// the counters median_ms and p90_ms are over the iterations of the run.
void first_create(const char* name, source s, int o, bool execute, int iterations) {
  benchmark::RegisterBenchmark(
      (std::string("BM_FirstCreate/") + name).c_str(),
      [=](benchmark::State& state) { BM_FirstCreate(state, s, o, execute); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(iterations);
}
[[maybe_unused]] const bool registered = [] {
  pc::set_jit_mode(pc::jit_mode::sync);
  first_create("compile/matmul", compile, 0, true, 5);
  first_create("compile/matmul/create", compile, 0, false, 5);
  first_create("compile/conv3x3", compile, 1, true, 5);
  first_create("compile/conv3x3/create", compile, 1, false, 5);
  first_create("persistent_dir/matmul", persistent_dir, 0, true, 200);
  first_create("persistent_dir/matmul/create", persistent_dir, 0, false, 200);
  first_create("persistent_dir/conv3x3", persistent_dir, 1, true, 200);
  first_create("persistent_dir/conv3x3/create", persistent_dir, 1, false, 200);
  first_create("persistent_redis/matmul", persistent_redis, 0, true, 200);
  first_create("persistent_redis/matmul/create", persistent_redis, 0, false, 200);
  first_create("persistent_redis/conv3x3", persistent_redis, 1, true, 200);
  first_create("persistent_redis/conv3x3/create", persistent_redis, 1, false, 200);
  return true;
}();

BENCHMARK(BM_CreateHit)->Name("BM_CreateHit/matmul")->Arg(0);
BENCHMARK(BM_CreateHit)->Name("BM_CreateHit/conv3x3")->Arg(1);
BENCHMARK(BM_NewProcess)
    ->Name("BM_NewProcess/compile")
    ->Arg(compile)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_NewProcess)
    ->Name("BM_NewProcess/persistent_dir")
    ->Arg(persistent_dir)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

BENCHMARK_MAIN();
