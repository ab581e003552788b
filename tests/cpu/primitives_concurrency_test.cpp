// Creating CPU primitives from many threads at once: one compilation per
// key, correct results everywhere, nested creation at capacity 1 without
// deadlock. Workers record; the main thread asserts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primitives/cpu_engine.hpp"

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

namespace {
// The ISA a CPU primitive key names: the pd writes str("cpu_isa") (u32
// length, then the bytes) followed by the cpu_isa value (int, little endian).
std::optional<cpu_isa> isa_in_key(const key& k) {
  const auto b = k.bytes();
  const unsigned char marker[] = {7, 0, 0, 0, 'c', 'p', 'u', '_', 'i', 's', 'a'};
  for (std::size_t i = 0; i + sizeof(marker) + sizeof(int) <= b.size(); ++i) {
    if (std::memcmp(b.data() + i, marker, sizeof(marker)) != 0) continue;
    std::int32_t v = 0;
    for (int j = 3; j >= 0; --j) {
      v = (v << 8) | static_cast<std::int32_t>(b[i + sizeof(marker) + j]);
    }
    return static_cast<cpu_isa>(v);
  }
  return std::nullopt;
}
}  // namespace

TEST_CASE("a concurrent ISA cap change never files code for one ISA under another's key",
          "[cpu][primitive][isa]") {
  if (detected_isa() < cpu_isa::avx512_core) {
    WARN("needs an avx512_core host to flip the cap between two JIT ISAs");
    return;
  }
  set_primitive_cache_capacity(1024);
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    for (int i = 0; !stop.load(); ++i) {
      set_max_cpu_isa(i % 2 ? cpu_isa::avx2 : cpu_isa::avx512_core);
      std::this_thread::yield();
    }
  });
  std::vector<int> mismatched(4, 0), missing(4, 0), wrong(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 12; ++i) {
        const int k = 4 + t * 12 + i;  // distinct shapes: every creation compiles
        memory::desc md({k, k}, data_type::f32, format_tag::ab);
        matmul::primitive_desc pd(matmul::desc(md, md, md), cpu());
        const auto* bound = dynamic_cast<const cpu_internal::isa_bound_pd*>(&backend::impl_of(pd));
        const auto in_key = isa_in_key(backend::impl_of(pd).cache_key());
        if (bound == nullptr || !in_key) {
          ++missing[t];
        } else if (bound->bound_isa() != *in_key) {
          ++mismatched[t];
        }
        if (!run_matmul(k)) ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  stop = true;
  flipper.join();
  clear_max_cpu_isa();
  for (int t = 0; t < 4; ++t) {
    CHECK(missing[t] == 0);
    CHECK(mismatched[t] == 0);
    CHECK(wrong[t] == 0);
  }
}
