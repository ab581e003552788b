// Creating CPU primitives from many threads at once: one compilation per
// key, correct results everywhere, nested creation at capacity 1 without
// deadlock. Workers record; the main thread asserts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "primcache/runtime/runtime.hpp"

using namespace primcache;

namespace {
engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

// Runs a k x k all-ones matmul and reports whether every output is k.
bool run_matmul(int k) {
  memory::desc md({k, k}, data_type::f32, format_tag::ab);
  matmul prim(matmul::primitive_desc(matmul::desc(md, md, md), cpu()));
  memory a(md, cpu()), c(md, cpu());
  std::fill_n(static_cast<float*>(a.get_data_handle()), k * k, 1.f);
  prim.execute(stream(cpu()),
               {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, a}, {PRIMCACHE_ARG_DST, c}});
  const auto* p = static_cast<const float*>(c.get_data_handle());
  return std::all_of(p, p + k * k, [&](float v) { return v == static_cast<float>(k); });
}
}  // namespace

TEST_CASE("many threads create the same and different primitives", "[cpu][primitive]") {
  set_primitive_cache_capacity(1024);
  std::vector<int> wrong(8, 0);
  std::vector<int> misses(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        const int k = 8 + (i % 3) + (t % 2) * 8;  // 6 distinct shapes in all
        if (!run_matmul(k)) ++wrong[t];
        memory::desc md({k, k}, data_type::f32, format_tag::ab);
        matmul again(matmul::primitive_desc(matmul::desc(md, md, md), cpu()));
        if (again.creation_outcome() == lookup_outcome::miss) ++misses[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) CHECK(wrong[t] == 0);
  // The second creation in each iteration follows a completed first one.
  for (int t = 0; t < 8; ++t) CHECK(misses[t] == 0);
}

TEST_CASE("nested creation from 8 threads at capacity 1 completes", "[cpu][primitive][nested]") {
  set_primitive_cache_capacity(1);
  memory::desc plain({1, 20, 4, 4}, data_type::f32, format_tag::nchw);
  memory::desc blocked({1, 20, 4, 4}, data_type::f32, format_tag::nChw16c);
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 4; ++i) {
        eltwise_forward prim(eltwise_forward::primitive_desc(
            eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_relu, plain,
                                  blocked),
            cpu()));
      }
      done.fetch_add(1);
    });
  }
  for (auto& th : threads) th.join();
  CHECK(done.load() == 8);
  CHECK(get_primitive_cache_size() <= 1);
  set_primitive_cache_capacity(1024);
}
