// Constant weights from many threads: racing first executions pack once;
// evictions and flushes while executions hold packed weights are safe.
// Workers record; the main thread asserts.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primitives/constant_weights.hpp"

using namespace primcache;
namespace ci = primcache::cpu_internal;

namespace {

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

constexpr int M = 24, N = 512, K = 256;  // 512 KiB of packed weights

matmul constant_matmul() {
  primitive_attr attr;
  attr.set_constant_weights(true);
  memory::desc a({M, K}, data_type::f32, format_tag::ab);
  memory::desc b({K, N}, data_type::f32, format_tag::ab);
  memory::desc c({M, N}, data_type::f32, format_tag::ab);
  return matmul(matmul::primitive_desc(matmul::desc(a, b, c), attr, cpu()));
}

// Weights of value w everywhere, src of ones: every output is K * w.
memory weights(float w) {
  memory m(memory::desc({K, N}, data_type::f32, format_tag::ab), cpu());
  std::fill_n(static_cast<float*>(m.get_data_handle()), K * N, w);
  return m;
}

bool run_checked(const matmul& prim, const memory& wei, float w) {
  memory a(memory::desc({M, K}, data_type::f32, format_tag::ab), cpu());
  memory c(memory::desc({M, N}, data_type::f32, format_tag::ab), cpu());
  std::fill_n(static_cast<float*>(a.get_data_handle()), M * K, 1.f);
  prim.execute(stream(cpu()),
               {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, c}});
  const auto* p = static_cast<const float*>(c.get_data_handle());
  for (int i = 0; i < M * N; ++i) {
    if (p[i] != K * w) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("threads racing on a first execution pack the weights once", "[cpu][constant][threads]") {
  constexpr int threads = 8;
  const matmul prim = constant_matmul();
  constant_tensor_cache& cache = ci::cpu_constant_cache();
  for (int round = 0; round < 10; ++round) {
    const float w = 0.25f * static_cast<float>(round + 1);
    const memory wei = weights(w);  // a new memory: a new id
    const auto before = cache.stats();
    std::atomic<int> ready{0};
    std::vector<char> ok(threads, 0);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        ready.fetch_add(1);
        while (ready.load() < threads) std::this_thread::yield();
        ok[t] = run_checked(prim, wei, w);
      });
    }
    for (auto& th : pool) th.join();
    const auto after = cache.stats();
    for (int t = 0; t < threads; ++t) CHECK(ok[t]);
    CHECK(after.misses - before.misses == 1);
    CHECK((after.hits - before.hits) + (after.waits - before.waits) == threads - 1);
  }
}

TEST_CASE("flushes and evictions while executions hold packed weights are safe",
          "[cpu][constant][threads]") {
  constant_tensor_cache& cache = ci::cpu_constant_cache();
  struct restore {
    constant_tensor_cache& c;
    ~restore() { c.set_capacity(constant_tensor_cache::unlimited, cache_policy::no_evict); }
  } restore_capacity{cache};
  // Room for one packed weights (512 KiB each) in 1 MB: lru evicts constantly.
  cache.set_capacity(1, cache_policy::lru);
  const matmul prim = constant_matmul();
  const auto before = cache.stats();
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&, t] {
      std::vector<memory> mine;
      for (int i = 0; i < 8; ++i) mine.push_back(weights(static_cast<float>(t * 8 + i)));
      for (int rep = 0; rep < 300; ++rep) {
        const int i = rep % 8;
        if (!run_checked(prim, mine[i], static_cast<float>(t * 8 + i))) bad.fetch_add(1);
      }
    });
  }
  // Another thread flushes, shrinks and grows the cache meanwhile (a
  // shrink evicts, a flush clears tensors that executions still hold).
  std::thread churn([&] {
    int i = 0;
    std::uint64_t seen = before.evictions;
    while (!stop.load()) {
      // Acts only after lru evicted since its last action: flushing at every
      // turn left lru nothing to evict when executions ran slowly (under
      // ThreadSanitizer), and the check below then failed.
      const std::uint64_t evictions = cache.stats().evictions;
      if (evictions == seen) {
        std::this_thread::yield();
        continue;
      }
      seen = evictions;
      if (i % 3 == 0) cache.flush();
      if (i % 3 == 1) cache.set_capacity(0, cache_policy::lru);
      if (i % 3 == 2) cache.set_capacity(1, cache_policy::lru);
      ++i;
      std::this_thread::yield();
    }
  });
  for (auto& w : workers) w.join();
  stop.store(true);
  churn.join();
  CHECK(bad.load() == 0);
  // The executions did race with evictions (lru making room), not only
  // with flushes.
  CHECK(cache.stats().evictions > before.evictions);
}
