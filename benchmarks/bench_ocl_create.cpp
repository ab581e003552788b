// bench_ocl_create — what creating an OpenCL primitive costs (a matmul
// 256^3, and the 3x3 64->64 56x56 ResNet-50 convolution in nhwc), each
// figure timed from creation through the first execution until
// stream::wait() returns (PoCL compiles a kernel's work-group function at
// its first run):
//
//   BM_OclCreate/source_build/<op>  primitive cache off: OpenCL C compiled,
//                                   the kernel launched once to capture its
//                                   binary, the binary realized in the
//                                   engine's context
//   BM_OclCreate/from_binary/<op>   the cache holds the impl (binary); a new
//                                   context (made outside the timing)
//                                   realizes it: clCreateProgramWithBinary +
//                                   build + kernel
//   BM_OclCreate/cache_hit/<op>     the cache holds the impl and the engine
//                                   holds its realized program (another
//                                   primitive of the engine is alive): a
//                                   cl_kernel and the run
//
// and what the persistent cache saves a new process (issue 10), a matmul
// 256^3 created with the in-memory primitive cache emptied first (untimed),
// timed through the first execution (manual time; median_ms and p90_ms over
// the iterations):
//
//   BM_FirstCreate/compile/matmul           no store attached: a source build
//   BM_FirstCreate/persistent_dir/matmul    a warmed directory store: a read,
//                                           the blob checked, the binary realized
//   BM_FirstCreate/persistent_redis/matmul  a warmed Redis store on a
//                                           redis-server the bench starts on a
//                                           free loopback port (skipped with the
//                                           reason when there is none)
//
//   build/release/benchmarks/bench_ocl_create
//
// POCL_KERNEL_CACHE=0 (set here unless the caller sets it) keeps PoCL's own
// disk cache out of every figure.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/runtime.hpp"

namespace {

using namespace primcache;

// One primitive to create: its descriptors, its tensors on an engine, and
// its primitive descriptor.
struct matmul_case {
  static constexpr const char* name = "matmul";
  memory::desc a{{256, 256}, data_type::f32, format_tag::ab};
  memory::desc b{{256, 256}, data_type::f32, format_tag::ab};
  memory::desc c{{256, 256}, data_type::f32, format_tag::ab};
  primitive_desc pd(const engine& eng) const {
    return matmul::primitive_desc(matmul::desc(a, b, c), eng);
  }
  std::unordered_map<int, memory> tensors(const engine& eng) const {
    return {{PRIMCACHE_ARG_SRC, memory(a, eng)},
            {PRIMCACHE_ARG_WEIGHTS, memory(b, eng)},
            {PRIMCACHE_ARG_DST, memory(c, eng)}};
  }
};

struct conv_case {
  static constexpr const char* name = "conv";
  memory::desc src{{1, 64, 56, 56}, data_type::f32, format_tag::nhwc};
  memory::desc wei{{64, 64, 3, 3}, data_type::f32, format_tag::hwio};
  memory::desc bias{{64}, data_type::f32, format_tag::a};
  memory::desc dst{{1, 64, 56, 56}, data_type::f32, format_tag::nhwc};
  primitive_desc pd(const engine& eng) const {
    return convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, src,
                                  wei, bias, dst, {1, 1}, {1, 1}, {1, 1}),
        eng);
  }
  std::unordered_map<int, memory> tensors(const engine& eng) const {
    return {{PRIMCACHE_ARG_SRC, memory(src, eng)},
            {PRIMCACHE_ARG_WEIGHTS, memory(wei, eng)},
            {PRIMCACHE_ARG_BIAS, memory(bias, eng)},
            {PRIMCACHE_ARG_DST, memory(dst, eng)}};
  }
};

template <class Case>
void create_and_run(const Case& c, const engine& eng, stream& strm,
                    const std::unordered_map<int, memory>& args) {
  primitive prim(c.pd(eng));
  prim.execute(strm, args);
  strm.wait();
}

template <class Case>
void bm_source_build(benchmark::State& state) {
  const Case c;
  const int capacity = get_primitive_cache_capacity();
  set_primitive_cache_capacity(0);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const auto args = c.tensors(eng);
  for (auto _ : state) create_and_run(c, eng, strm, args);
  set_primitive_cache_capacity(capacity);
}

template <class Case>
void bm_from_binary(benchmark::State& state) {
  const Case c;
  set_primitive_cache_capacity(1024);
  const engine base(engine_kind::gpu, 0);
  {
    stream strm(base);
    create_and_run(c, base, strm, c.tensors(base));  // the cache now holds the binary
  }
  cl_device_id dev = ocl_interop::get_device(base);
  for (auto _ : state) {
    state.PauseTiming();
    cl_int err = CL_SUCCESS;
    cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) {
      state.SkipWithError("clCreateContext failed");
      break;
    }
    {
      engine eng = ocl_interop::make_engine(dev, ctx);
      stream strm(eng);
      const auto args = c.tensors(eng);
      state.ResumeTiming();
      create_and_run(c, eng, strm, args);
      state.PauseTiming();
    }
    clReleaseContext(ctx);
    state.ResumeTiming();
  }
}

template <class Case>
void bm_cache_hit(benchmark::State& state) {
  const Case c;
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const auto args = c.tensors(eng);
  // Held for the whole run: the engine keeps the realized program.
  primitive keeper(c.pd(eng));
  for (auto _ : state) create_and_run(c, eng, strm, args);
}

enum class source { compile, persistent_dir, persistent_redis };

// A redis-server on a free loopback port for the bench's life (no
// persistence), or the reason there is none. (As bench_persist's.)
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
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/bench-ocl"; }

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

void empty_primitive_cache() {
  const int capacity = get_primitive_cache_capacity();
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(capacity);
}

template <class Case>
void bm_first_create(benchmark::State& state, source src) {
  const Case c;
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const auto args = c.tensors(eng);
  std::string dir;
  if (src == source::compile) {
    set_persistent_cache(nullptr);
  } else if (src == source::persistent_dir) {
    char tmpl[] = "/tmp/primcache-bench-ocl-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      state.SkipWithError("mkdtemp failed");
      return;
    }
    dir = tmpl;
    set_persistent_cache(open_persistent_cache_dir(dir, 256));
  } else {
    if (!the_redis().why_not().empty()) {
      std::printf("%s\n", the_redis().why_not().c_str());
      state.SkipWithError(the_redis().why_not().c_str());
      return;
    }
    set_persistent_cache(open_persistent_cache("", 256, the_redis().url()));
  }
  if (src != source::compile) {  // warms the store
    empty_primitive_cache();
    create_and_run(c, eng, strm, args);
    flush_persistent_cache_writes();
  }
  const auto stats_before = get_persistent_cache_stats();
  const auto counts_before = ocl_interop::get_program_counts();
  std::vector<double> ms;
  for (auto _ : state) {
    empty_primitive_cache();
    const auto start = std::chrono::steady_clock::now();
    create_and_run(c, eng, strm, args);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(seconds);
    ms.push_back(seconds * 1e3);
  }
  const auto stats_after = get_persistent_cache_stats();
  const auto counts_after = ocl_interop::get_program_counts();
  std::sort(ms.begin(), ms.end());
  state.counters["median_ms"] = ms[ms.size() / 2];
  state.counters["p90_ms"] = ms[ms.size() * 9 / 10];
  state.counters["store_hits"] = static_cast<double>(stats_after.hits - stats_before.hits);
  state.counters["source_builds"] =
      static_cast<double>(counts_after.source_builds - counts_before.source_builds);
  flush_persistent_cache_writes();
  set_persistent_cache(nullptr);
  if (!dir.empty()) std::filesystem::remove_all(dir);
}

template <class Case>
void register_first_create() {
  const std::string op = Case::name;
  for (auto [name, src, iterations] :
       {std::tuple{"compile", source::compile, 5},
        std::tuple{"persistent_dir", source::persistent_dir, 100},
        std::tuple{"persistent_redis", source::persistent_redis, 100}}) {
    const source s = src;
    benchmark::RegisterBenchmark(("BM_FirstCreate/" + std::string(name) + "/" + op).c_str(),
                                 [s](benchmark::State& state) { bm_first_create<Case>(state, s); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(iterations);
  }
}

template <class Case>
void register_case() {
  const std::string op = Case::name;
  benchmark::RegisterBenchmark(("BM_OclCreate/source_build/" + op).c_str(), bm_source_build<Case>)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(("BM_OclCreate/from_binary/" + op).c_str(), bm_from_binary<Case>)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(("BM_OclCreate/cache_hit/" + op).c_str(), bm_cache_hit<Case>)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  setenv("POCL_KERNEL_CACHE", "0", /*overwrite=*/0);
  register_case<matmul_case>();
  register_case<conv_case>();
  register_first_create<matmul_case>();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
