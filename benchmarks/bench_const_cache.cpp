// The constant tensor cache's hit against the lookup a backend writes by hand
// (a std::mutex around a std::unordered_map), in one binary and one run
// (figures and commands: docs/const_cache.md, docs/PERFORMANCE.md).
//
//   BM_ConstCacheHit/<cache>/threads:N   each thread looks up its own 64
//                                        resident tensors (distinct keys, 40
//                                        key bytes, built ahead of time as a
//                                        backend keeps them) in one shared
//                                        cache of 128 tensors; every lookup
//                                        is a hit and copies the buffer's
//                                        std::shared_ptr out, as a backend
//                                        does. items_per_second is total hits
//                                        per second.
//
// <cache> is `primcache` (primcache::constant_tensor_cache, policy lru with
// a capacity, so the hit path includes the recency mark) or `mutex_map`
// (std::mutex + std::unordered_map<constant_key, shared_ptr>). Goals (issue
// 12): under 100 ns per hit on one thread, and 2 threads at least 1.8x one
// thread's hits per second.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "primcache/const_cache/constant_tensor_cache.hpp"

namespace {

constexpr int kMaxThreads = 2;
constexpr std::size_t kKeysPerThread = 64;
constexpr std::size_t kTensorBytes = 256;

using buffer_ptr = primcache::constant_tensor_cache::buffer_ptr;

// 40 bytes, as a packing descriptor plus a memory id would make.
primcache::constant_key make_key(std::size_t i) {
  std::string bytes(40, '\0');
  for (std::size_t b = 0; b < bytes.size(); ++b) {
    bytes[b] = static_cast<char>((i * 0x9e3779b97f4a7c15ull) >> ((b % 8) * 8));
  }
  bytes[0] = static_cast<char>(i);
  bytes[1] = static_cast<char>(i >> 8);
  return primcache::constant_key(/*backend_id=*/1, bytes);
}

const std::vector<primcache::constant_key>& keys() {
  static const std::vector<primcache::constant_key> all = [] {
    std::vector<primcache::constant_key> v;
    for (std::size_t i = 0; i < kMaxThreads * kKeysPerThread; ++i) v.push_back(make_key(i));
    return v;
  }();
  return all;
}

std::shared_ptr<primcache::constant_buffer> make_buffer() {
  return primcache::make_constant_buffer(
      kTensorBytes, [](std::size_t n) { return std::malloc(n); },
      [](void* p, std::size_t) { std::free(p); });
}

primcache::constant_tensor_cache& filled_cache() {
  static primcache::constant_tensor_cache* const cache = [] {
    auto* c = new primcache::constant_tensor_cache("cpu");
    c->set_capacity(64, primcache::cache_policy::lru);
    for (const auto& k : keys()) c->get_or_add(k, kTensorBytes, make_buffer);
    return c;
  }();
  return *cache;
}

// The hand-written peer: one mutex, one map, a shared_ptr copied out.
struct mutex_map {
  std::mutex mutex;
  std::unordered_map<primcache::constant_key, buffer_ptr> map;

  buffer_ptr find(const primcache::constant_key& k) {
    std::lock_guard<std::mutex> guard(mutex);
    auto it = map.find(k);
    return it == map.end() ? nullptr : it->second;
  }
};

mutex_map& filled_map() {
  static mutex_map* const m = [] {
    auto* mm = new mutex_map;
    for (const auto& k : keys()) mm->map.emplace(k, make_buffer());
    return mm;
  }();
  return *m;
}

void BM_ConstCacheHit_primcache(benchmark::State& state) {
  primcache::constant_tensor_cache& cache = filled_cache();
  const auto* mine =
      keys().data() + static_cast<std::size_t>(state.thread_index()) * kKeysPerThread;
  std::size_t i = 0;
  for (auto _ : state) {
    auto r = cache.get_or_add(mine[i], kTensorBytes, make_buffer);
    benchmark::DoNotOptimize(r.value.get());
    i = (i + 1) % kKeysPerThread;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_ConstCacheHit_mutex_map(benchmark::State& state) {
  mutex_map& m = filled_map();
  const auto* mine =
      keys().data() + static_cast<std::size_t>(state.thread_index()) * kKeysPerThread;
  std::size_t i = 0;
  for (auto _ : state) {
    buffer_ptr b = m.find(mine[i]);
    benchmark::DoNotOptimize(b.get());
    i = (i + 1) % kKeysPerThread;
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_ConstCacheHit_primcache)
    ->Name("BM_ConstCacheHit/primcache")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_ConstCacheHit_mutex_map)
    ->Name("BM_ConstCacheHit/mutex_map")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
