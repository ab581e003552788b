// The persistent cache's stores, one entry at a time, at the sizes kernel
// blobs have (16, 64, 256 KiB): what one Redis server carries for a fleet,
// beside the local directory and a bare hiredis client (figures and command:
// docs/PERFORMANCE.md).
//
//   BM_RedisGet/<bytes>/threads:N  redis_store::get of one present entry
//                                  (GET, entry checksum and key checked);
//                                  N threads share one store (its pool)
//   BM_RedisPut/<bytes>            redis_store::put of a new entry (SET NX)
//   BM_HiredisGet/<bytes>          the baseline: a blocking hiredis GET of the
//                                  same value, nothing checked
//   BM_DirectoryGet/<bytes>        directory_store::get of one present entry
//                                  (open, read two files from the page cache,
//                                  checks)
//   BM_RedisSize/<keys>            redis_store::size walking a keyspace of
//                                  that many entries (SCAN batches of 1000,
//                                  each summed by a script); items = keys
//   BM_RedisShardedGet/<bytes>/threads:N
//                                  sharded_redis_store::get over 3 servers
//                                  (the first BM_RedisGet's server and two
//                                  more) of 12 present entries in turn, spread
//                                  over the shards: BM_RedisGet plus placement
//                                  (3 XXH3 per call)
//   BM_RedisShardPlacement/<N>     placement alone: shard_of over N shards
//
// The program starts its own redis-servers (from PATH, as the tests do) on
// free loopback ports, persistence off, maxmemory 256 MB with allkeys-lru so
// BM_RedisPut's new entries evict old ones; they are killed at exit. Timeouts are
// raised to 1 s so a loaded machine measures slow calls rather than failing
// them; a call that fails anyway ends the benchmark with an error.
#include <benchmark/benchmark.h>

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "primcache/persist/directory_store.hpp"
#include "primcache/persist/redis_store.hpp"
#include "primcache/persist/sharded_redis_store.hpp"

extern char** environ;

namespace {

int g_port = 0;
// The sharded benchmark's other two servers.
int g_shard_ports[2] = {0, 0};

std::vector<std::byte> bytes_of(const std::string& s) {
  auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}

std::vector<std::byte> blob(std::size_t n) {
  std::vector<std::byte> out(n);
  std::uint32_t x = 12345;
  for (auto& b : out) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return out;
}

primcache::entry_format format() {
  return {.library_version = "bench-persist-store", .key = nullptr};
}

std::unique_ptr<primcache::redis_store> open_redis() {
  primcache::redis_store_options o;
  o.port = g_port;
  o.prefix = "bench";
  o.format = format();
  o.connect_timeout = std::chrono::seconds(1);
  o.command_timeout = std::chrono::seconds(1);
  return primcache::redis_store::open(o);
}

void BM_RedisGet(benchmark::State& state) {
  static std::unique_ptr<primcache::redis_store> store;
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto key = bytes_of("get-" + std::to_string(n));
  if (state.thread_index() == 0) {
    store = open_redis();
    store->put(key, blob(n));
  }
  // Google Benchmark holds the threads at a barrier until thread 0's setup is done.
  for (auto _ : state) {
    auto v = store->get(key);
    if (!v || v->size() != n) {
      state.SkipWithError("redis get failed");
      break;
    }
    benchmark::DoNotOptimize(v->data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n));
  if (state.thread_index() == 0)
    state.counters["remote_errors"] = static_cast<double>(store->stats().remote_errors);
}
BENCHMARK(BM_RedisGet)
    ->Arg(16 << 10)
    ->Arg(64 << 10)
    ->Arg(256 << 10)
    ->Threads(1)
    ->Threads(4)
    ->UseRealTime();

void BM_RedisPut(benchmark::State& state) {
  auto store = open_redis();
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto payload = blob(n);
  static std::atomic<std::uint64_t> counter{0};
  for (auto _ : state) {
    const auto key = bytes_of("put-" + std::to_string(counter.fetch_add(1)));
    auto r = store->put(key, payload);
    if (r.status != primcache::put_status::stored) {
      state.SkipWithError(("redis put: " + r.message).c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_RedisPut)->Arg(16 << 10)->Arg(64 << 10)->Arg(256 << 10)->UseRealTime();

void BM_HiredisGet(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  timeval tv{1, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", g_port, tv);
  if (c == nullptr || c->err) {
    state.SkipWithError("hiredis cannot connect");
    if (c) redisFree(c);
    return;
  }
  const std::string key = "bench:raw-" + std::to_string(n);
  const auto value = blob(n);
  freeReplyObject(redisCommand(c, "SET %b %b", key.data(), key.size(), value.data(), value.size()));
  for (auto _ : state) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "GET %b", key.data(), key.size()));
    if (r == nullptr || r->type != REDIS_REPLY_STRING || r->len != n) {
      state.SkipWithError("hiredis get failed");
      if (r) freeReplyObject(r);
      break;
    }
    benchmark::DoNotOptimize(r->str);
    freeReplyObject(r);
  }
  redisFree(c);
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_HiredisGet)->Arg(16 << 10)->Arg(64 << 10)->Arg(256 << 10)->UseRealTime();

void BM_DirectoryGet(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::string dir = std::filesystem::temp_directory_path().string() + "/bench-persist-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  {
    primcache::directory_store_options o;
    o.path = dir;
    o.format = format();
    auto store = primcache::directory_store::open(o);
    const auto key = bytes_of("get");
    store->put(key, blob(n));
    for (auto _ : state) {
      auto v = store->get(key);
      if (!v || v->size() != n) {
        state.SkipWithError("directory get failed");
        break;
      }
      benchmark::DoNotOptimize(v->data());
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_DirectoryGet)->Arg(16 << 10)->Arg(64 << 10)->Arg(256 << 10)->UseRealTime();

void BM_RedisSize(benchmark::State& state) {
  const auto n = state.range(0);
  timeval tv{10, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", g_port, tv);
  if (c == nullptr || c->err) {
    state.SkipWithError("hiredis cannot connect");
    if (c) redisFree(c);
    return;
  }
  // A keyspace of exactly n entries' keys (1-byte values): the other
  // benchmarks set their keys up again each run.
  freeReplyObject(redisCommand(c, "FLUSHALL"));
  freeReplyObject(redisCommand(
      c, "EVAL %s 0 %lld",
      "for i = 1, tonumber(ARGV[1]) do redis.call('SET', string.format('sz:%032x', i), 'v') end",
      static_cast<long long>(n)));
  redisFree(c);
  primcache::redis_store_options o;
  o.port = g_port;
  o.prefix = "sz";
  o.format = format();
  o.connect_timeout = std::chrono::seconds(1);
  o.command_timeout = std::chrono::seconds(1);
  o.size_refresh = std::chrono::milliseconds(0);  // walk on every call
  o.size_walk_budget = std::chrono::seconds(60);  // to the end
  auto store = primcache::redis_store::open(o);
  for (auto _ : state) {
    if (store->size() != static_cast<std::uint64_t>(n)) {
      state.SkipWithError("redis size walk failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_RedisSize)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_RedisShardedGet(benchmark::State& state) {
  static std::unique_ptr<primcache::sharded_redis_store> store;
  static std::vector<std::vector<std::byte>> keys;
  const auto n = static_cast<std::size_t>(state.range(0));
  if (state.thread_index() == 0) {
    std::vector<primcache::redis_store_options> shards;
    for (int port : {g_port, g_shard_ports[0], g_shard_ports[1]}) {
      primcache::redis_store_options o;
      o.port = port;
      o.prefix = "bench";
      o.format = format();
      o.connect_timeout = std::chrono::seconds(1);
      o.command_timeout = std::chrono::seconds(1);
      shards.push_back(o);
    }
    store = primcache::sharded_redis_store::open(std::move(shards));
    keys.clear();
    for (int i = 0; i < 12; ++i) {
      keys.push_back(bytes_of("sharded-get-" + std::to_string(n) + "-" + std::to_string(i)));
      store->put(keys.back(), blob(n));
    }
  }
  std::size_t next = static_cast<std::size_t>(state.thread_index());
  for (auto _ : state) {
    auto v = store->get(keys[next++ % keys.size()]);
    if (!v || v->size() != n) {
      state.SkipWithError("sharded redis get failed");
      break;
    }
    benchmark::DoNotOptimize(v->data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n));
  if (state.thread_index() == 0) {
    state.counters["remote_errors"] = static_cast<double>(store->stats().remote_errors);
    // Every shard served some of the gets (thread 0 reads the others' counts too).
    std::uint64_t least = UINT64_MAX;
    for (const auto& sh : store->shards()) least = std::min(least, sh.stats.hits);
    state.counters["least_hits_on_a_shard"] = static_cast<double>(least);
  }
}
BENCHMARK(BM_RedisShardedGet)
    ->Arg(16 << 10)
    ->Arg(64 << 10)
    ->Arg(256 << 10)
    ->Threads(1)
    ->Threads(4)
    ->UseRealTime();

// What sharding adds to a call: sharded_redis_store::shard_of for a blob
// id of 200 bytes over N shards (XXH3-128 of the key, then one XXH3-64 per
// shard); no server is asked (open() resolves, never connects).
void BM_RedisShardPlacement(benchmark::State& state) {
  std::vector<primcache::redis_store_options> shards;
  for (int i = 0; i < state.range(0); ++i) {
    primcache::redis_store_options o;
    o.port = 20000 + i;
    o.format = format();
    shards.push_back(o);
  }
  auto store = primcache::sharded_redis_store::open(std::move(shards));
  std::vector<std::byte> key = blob(200);
  std::size_t sum = 0;
  for (auto _ : state) {
    key[0] = static_cast<std::byte>(sum);  // a new key each time
    sum += store->shard_of(key);
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RedisShardPlacement)->Arg(1)->Arg(3)->Arg(8)->Arg(32);

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return 0;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

bool answers(int port) {
  timeval tv{0, 200000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  bool ok = c != nullptr && c->err == 0;
  if (ok) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
    ok = r != nullptr;
    if (r) freeReplyObject(r);
  }
  if (c) redisFree(c);
  return ok;
}

// A redis-server on a free loopback port, answering; its pid, or -1.
pid_t start_server(int& port_out) {
  port_out = free_port();
  std::string port = std::to_string(port_out);
  std::vector<std::string> args = {"redis-server", "--port",      port,       "--bind",
                                   "127.0.0.1",    "--save",      "",         "--appendonly",
                                   "no",           "--maxmemory", "256mb",    "--maxmemory-policy",
                                   "allkeys-lru",  "--logfile",   "/dev/null"};
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  pid_t pid = -1;
  if (port_out == 0 ||
      ::posix_spawnp(&pid, "redis-server", nullptr, nullptr, av.data(), environ) != 0) {
    std::fprintf(stderr,
                 "bench_persist_store: cannot start redis-server (run scripts/install-deps)\n");
    return -1;
  }
  for (int i = 0; i < 200 && !answers(port_out); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!answers(port_out)) {
    std::fprintf(stderr, "bench_persist_store: redis-server did not come up on port %d\n",
                 port_out);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::vector<pid_t> pids;
  for (int* port : {&g_port, &g_shard_ports[0], &g_shard_ports[1]}) {
    const pid_t pid = start_server(*port);
    if (pid < 0) {
      for (pid_t p : pids) {
        ::kill(p, SIGKILL);
        ::waitpid(p, nullptr, 0);
      }
      return 1;
    }
    pids.push_back(pid);
  }
  benchmark::AddCustomContext("redis_server",
                              "127.0.0.1:" + std::to_string(g_port) + " (started by this program)");
  benchmark::AddCustomContext("redis_shards", "127.0.0.1:" + std::to_string(g_port) +
                                                  ", :" + std::to_string(g_shard_ports[0]) +
                                                  ", :" + std::to_string(g_shard_ports[1]));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (pid_t p : pids) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
  return 0;
}
