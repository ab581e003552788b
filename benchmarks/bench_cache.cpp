// The concurrent cache against the cache a user writes by hand, in one binary
// and one run (figures and commands: docs/PERFORMANCE.md).
//
//   BM_CacheHit/<cache>/threads:N    hits on 1k resident entries with 64-byte
//                                    keys, N threads sharing one cache;
//                                    items_per_second is total hits per second
//   BM_CacheHitShared/<cache>/...    the same with std::shared_ptr values, whose
//                                    copy on every hit writes the value's
//                                    reference count
//   BM_CacheMiss/<cache>             a full cache: each lookup misses, inserts
//                                    and evicts
//   BM_CacheHitUnderInserts/<cache>  BM_CacheHit's hits on one thread while a
//                                    second thread inserts new keys without
//                                    pause (each insert evicts an earlier
//                                    inserted key; capacity 8k); the counter
//                                    inserts_per_second is the other thread's
//                                    rate, hit_misses the hits that missed.
//                                    Goal (issue 7): within 2x of
//                                    BM_CacheHit/primcache/threads:1
//
// <cache> is `primcache` (primcache::concurrent_cache) or `mutex_lru`
// (std::mutex + std::unordered_map + std::list spliced to the front on every
// hit). N is 1, 2 and the number of hardware threads.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "primcache/cache/concurrent_cache.hpp"
#include "primcache/keyhash/key.hpp"

namespace {

constexpr std::size_t kResident = 1000;
constexpr std::size_t kMissKeys = 16 * 1024;  // cycled through a 1k cache: always a miss

primcache::key make_key(std::uint64_t i) {
  primcache::key_writer w;
  for (std::uint64_t word = 0; word < 8; ++word) w.u64(i * 0x9e3779b97f4a7c15ull + word);
  return w.finish();  // 64 bytes
}

const std::vector<primcache::key>& keys() {
  static const std::vector<primcache::key> all = [] {
    std::vector<primcache::key> v;
    v.reserve(kMissKeys);
    for (std::size_t i = 0; i < kMissKeys; ++i) v.push_back(make_key(i));
    return v;
  }();
  return all;
}

// A fixed random order of the resident keys, so that lookups do not walk
// memory in a pattern the prefetcher can follow.
const std::vector<std::uint32_t>& hit_order() {
  static const std::vector<std::uint32_t> order = [] {
    std::vector<std::uint32_t> v(kResident);
    std::iota(v.begin(), v.end(), 0u);
    std::shuffle(v.begin(), v.end(), std::mt19937(42));
    return v;
  }();
  return order;
}

// An 8-byte handle: what a hit copies out, without a reference count.
struct handle {
  const void* impl;
};

template <typename Value>
Value make_value(std::size_t i);
template <>
handle make_value<handle>(std::size_t i) {
  return handle{reinterpret_cast<const void*>(i + 1)};
}
template <>
std::shared_ptr<const std::size_t> make_value<std::shared_ptr<const std::size_t>>(std::size_t i) {
  return std::make_shared<const std::size_t>(i);
}

// The cache a user writes by hand.
template <typename Key, typename Value>
class mutex_lru {
 public:
  explicit mutex_lru(std::size_t capacity) : capacity_(capacity) {}

  template <typename Creator>
  Value get_or_add(const Key& key, Creator&& creator) {
    std::lock_guard<std::mutex> guard(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return it->second->second;
    }
    order_.emplace_front(key, creator());
    index_.emplace(key, order_.begin());
    if (index_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return order_.front().second;
  }

 private:
  using entry_list = std::list<std::pair<Key, Value>>;
  std::mutex mu_;
  const std::size_t capacity_;
  entry_list order_;
  std::unordered_map<Key, typename entry_list::iterator> index_;
};

template <typename Value>
struct primcache_adapter {
  explicit primcache_adapter(std::size_t capacity = kResident) : cache(capacity) {}
  primcache::concurrent_cache<primcache::key, Value> cache;
  template <typename Creator>
  Value get_or_add(const primcache::key& k, Creator&& c) {
    return cache.get_or_add(k, std::forward<Creator>(c)).value;
  }
};

template <typename Value>
struct mutex_lru_adapter {
  explicit mutex_lru_adapter(std::size_t capacity = kResident) : cache(capacity) {}
  mutex_lru<primcache::key, Value> cache;
  template <typename Creator>
  Value get_or_add(const primcache::key& k, Creator&& c) {
    return cache.get_or_add(k, std::forward<Creator>(c));
  }
};

// One cache per (adapter, value) for the whole run, filled before any
// benchmark thread starts.
template <typename Adapter, typename Value>
Adapter& resident_cache() {
  static Adapter* cache = [] {
    auto* c = new Adapter;
    const auto& k = keys();
    for (std::size_t i = 0; i < kResident; ++i) {
      c->get_or_add(k[i], [i] { return make_value<Value>(i); });
    }
    return c;
  }();
  return *cache;
}

template <typename Adapter, typename Value>
void cache_hit(benchmark::State& state) {
  Adapter& cache = resident_cache<Adapter, Value>();
  const auto& k = keys();
  const auto& order = hit_order();
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 337 % kResident;
  for (auto _ : state) {
    Value v = cache.get_or_add(k[order[i]], [] { return make_value<Value>(0); });
    benchmark::DoNotOptimize(v);
    if (++i == kResident) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

template <typename Adapter>
void cache_miss(benchmark::State& state) {
  Adapter cache;
  const auto& k = keys();
  std::size_t i = 0;
  for (auto _ : state) {
    handle v = cache.get_or_add(k[i], [i] { return make_value<handle>(i); });
    benchmark::DoNotOptimize(v);
    if (++i == kMissKeys) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

template <typename Adapter>
void cache_hit_under_inserts(benchmark::State& state) {
  Adapter cache(8 * kResident);
  const auto& k = keys();
  const auto& order = hit_order();
  for (std::size_t i = 0; i < kResident; ++i) {
    cache.get_or_add(k[i], [i] { return make_value<handle>(i); });
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> inserted{0};
  std::thread inserter([&] {
    std::size_t i = kResident;
    std::uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      handle v = cache.get_or_add(k[i], [i] { return make_value<handle>(i); });
      benchmark::DoNotOptimize(v);
      if (++i == kMissKeys) i = kResident;
      inserted.store(++n, std::memory_order_relaxed);
    }
  });
  // The inserts have filled the cache and are evicting before timing starts.
  while (inserted.load(std::memory_order_relaxed) < 2 * kResident) std::this_thread::yield();
  const std::uint64_t inserted_before = inserted.load(std::memory_order_relaxed);
  std::uint64_t misses = 0;
  std::size_t i = 0;
  for (auto _ : state) {
    handle v = cache.get_or_add(k[order[i]], [&misses] {
      ++misses;
      return make_value<handle>(0);
    });
    benchmark::DoNotOptimize(v);
    if (++i == kResident) i = 0;
  }
  const std::uint64_t inserted_during = inserted.load(std::memory_order_relaxed) - inserted_before;
  stop.store(true);
  inserter.join();
  state.SetItemsProcessed(state.iterations());
  state.counters["inserts_per_second"] =
      benchmark::Counter(static_cast<double>(inserted_during), benchmark::Counter::kIsRate);
  state.counters["hit_misses"] = static_cast<double>(misses);
}

std::vector<int> thread_counts() {
  std::set<int> counts{1, 2, static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
  return {counts.begin(), counts.end()};
}

template <typename Fn>
void register_hit(const char* name, Fn fn) {
  auto* b = benchmark::RegisterBenchmark(name, fn);
  for (int n : thread_counts()) b->Threads(n);
  b->UseRealTime();
}

const bool registered = [] {
  using shared = std::shared_ptr<const std::size_t>;
  register_hit("BM_CacheHit/primcache", cache_hit<primcache_adapter<handle>, handle>);
  register_hit("BM_CacheHit/mutex_lru", cache_hit<mutex_lru_adapter<handle>, handle>);
  register_hit("BM_CacheHitShared/primcache", cache_hit<primcache_adapter<shared>, shared>);
  register_hit("BM_CacheHitShared/mutex_lru", cache_hit<mutex_lru_adapter<shared>, shared>);
  benchmark::RegisterBenchmark("BM_CacheHitUnderInserts/primcache",
                               cache_hit_under_inserts<primcache_adapter<handle>>)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_CacheHitUnderInserts/mutex_lru",
                               cache_hit_under_inserts<mutex_lru_adapter<handle>>)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_CacheMiss/primcache", cache_miss<primcache_adapter<handle>>);
  benchmark::RegisterBenchmark("BM_CacheMiss/mutex_lru", cache_miss<mutex_lru_adapter<handle>>);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
