// Concurrency of libs/transform: planners racing user transforms that come
// and go, and one plan executed from many threads (run under
// ThreadSanitizer in CI, as every *_concurrency binary).
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "primcache/transform/transform_registry.hpp"

using namespace primcache;

namespace {

kernel_type kt(const char* text) {
  return kernel_type::parse(text);
}

std::vector<transform_kind> kinds(const transform_plan& p) {
  std::vector<transform_kind> k;
  for (const auto& s : p.steps) k.push_back(s.kind);
  return k;
}

using tk = transform_kind;

}  // namespace

TEST_CASE("plans from many threads agree while transforms come and go",
          "[transform][plan][concurrency]") {
  transform_registry reg(8);  // small, so entries are evicted as well
  const auto a = kt("cpu/f32/abcd/jit"), b = kt("cpu/f32/acdb/jit");
  const std::vector<kernel_type> targets = {b, kt("gpu:0/bf16/abcd/jit"), kt("cpu/s8/aBcd8b/jit"),
                                            kt("gpu:1/f32/abcd/jit")};
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::thread churn([&] {
    for (int i = 0; i < 200; ++i) {
      reg.add(a, b, "mine", [](const memory&, const memory&, const stream&) {});
      reg.remove(a, b);
    }
    stop = true;
  });
  std::vector<std::thread> planners;
  for (int t = 0; t < 4; ++t) {
    planners.emplace_back([&, t] {
      std::size_t i = static_cast<std::size_t>(t);
      while (!stop) {
        const auto& to = targets[i++ % targets.size()];
        const auto p = reg.plan(a, to);
        if (p->from != a || p->to != to || p->steps.empty()) ++wrong;
        if (to == b && kinds(*p) != std::vector<tk>{tk::layout} &&
            kinds(*p) != std::vector<tk>{tk::user}) {
          ++wrong;
        }
      }
    });
  }
  churn.join();
  for (auto& t : planners) t.join();
  CHECK(wrong == 0);
  // Once the churn is over, the built-in plan is back.
  CHECK(kinds(*reg.plan(a, b)) == std::vector<tk>{tk::layout});
}

TEST_CASE("one plan executed from many threads gives identical results",
          "[transform][execute][concurrency]") {
  const engine cpu(engine_kind::cpu, 0);
  const std::vector<std::int64_t> dims = {2, 19, 5, 3};
  const kernel_type from = kt("cpu/f32/abcd/jit");
  const kernel_type to = kt("cpu/s8*0.05/aBcd16b/jit");
  memory src(from.layout.desc_for(dims, data_type::f32), cpu);
  const std::int64_t n = src.get_desc().nelems();
  auto* x = static_cast<float*>(src.get_data_handle());
  for (std::int64_t i = 0; i < n; ++i) x[i] = 0.01f * static_cast<float>(i % 701 - 350);
  const auto plan = plan_transform(from, to);
  const memory reference = execute_plan(*plan, src);
  const std::size_t bytes = reference.get_desc().size_bytes();
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        // Half of them into the caller's memory, half into fresh memory.
        memory out = i % 2 == 0 ? execute_plan(*plan, src)
                                : memory(to.layout.desc_for(dims, to.data_type), cpu);
        if (i % 2 == 1) execute_plan(*plan, src, out);
        if (std::memcmp(out.get_data_handle(), reference.get_data_handle(), bytes) != 0) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(mismatches == 0);
}
