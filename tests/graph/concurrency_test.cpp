// One executor run from many threads at once: every run gives bitwise the
// outputs of a run alone, constants are transformed once (the constant
// tensor cache de-duplicates the racing first runs), and the counters add
// up. Built into graph_concurrency, which CI runs under ThreadSanitizer.
#include <atomic>
#include <cstring>
#include <thread>

#include "graph_test_util.hpp"

using namespace primcache;
using namespace graph_test;

namespace {

// conv (nhwc) -> tanh (nChw16c) -> y in nchw: transforms between every
// op, and a constant stored in another layout than the conv wants.
graph make_graph() {
  graph g("racing");
  add_with_data(g, tensor("x", {2, 16, 12, 12}, tensor_role::input), 1);
  add_with_data(g, tensor("w", {16, 16, 3, 3}, tensor_role::constant, "acdb"), 2);
  add_with_data(g, tensor("b", {16}, tensor_role::constant), 3);
  tensor_spec y = produced("y");
  y.layout = layout::parse("abcd");
  g.add_tensor(y);
  op_spec conv{.name = "conv", .kind = "convolution", .inputs = {"x", "w", "b"}, .outputs = {"h"}};
  conv.attributes["padding"] = std::vector<std::int64_t>{1, 1};
  conv.layout = layout::parse("acdb");
  g.add_op(conv);
  op_spec act{.name = "act", .kind = "eltwise", .inputs = {"h"}, .outputs = {"y"}};
  act.attributes["algorithm"] = std::string("tanh");
  act.layout = layout::parse("aBcd16b");
  g.add_op(act);
  return g;
}

bool same_bytes(const memory& a, const memory& b) {
  return a.get_desc() == b.get_desc() &&
         std::memcmp(a.get_data_handle(), b.get_data_handle(), a.get_desc().size_bytes()) == 0;
}

}  // namespace

TEST_CASE("one executor runs from many threads with identical results", "[graph][concurrency]") {
  const graph g = make_graph();
  const executor::tensor_map inputs = [&] {
    executor::tensor_map m;
    tensor_init init;
    init.seed = 9;
    m.emplace("x", make_tensor_data(*g.find_tensor("x"), init));
    return m;
  }();
  const memory alone = executor(g).run(inputs).at("y");

  // A fresh executor over a fresh copy of the weights' data, so that its
  // first runs race to transform them.
  graph fresh = g;
  tensor_init winit;
  winit.seed = 2;
  fresh.set_data("w", make_tensor_data(*g.find_tensor("w"), winit));
  executor exec(fresh);
  constexpr int threads = 6, runs = 4;
  std::atomic<int> mismatches{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int r = 0; r < runs; ++r) {
        if (!same_bytes(exec.run(inputs).at("y"), alone)) mismatches.fetch_add(1);
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  CHECK(mismatches.load() == 0);
  const auto s = exec.stats();
  CHECK(s.runs == threads * runs);
  CHECK(s.constant_transforms == 1);
  CHECK(s.constant_cache_hits == threads * runs - 1);
  std::uint64_t per_run = 0;
  for (const auto& t : s.transforms) {
    if (t.constant) continue;
    CHECK(t.executions == threads * runs);
    per_run += t.bytes;
  }
  CHECK(s.bytes_transformed == per_run * threads * runs + 8u * 16 * 16 * 3 * 3);
}
