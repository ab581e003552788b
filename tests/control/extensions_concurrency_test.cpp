#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "primcache/control/registry.hpp"

TEST_CASE("counters, histograms, settings and events stay exact under many threads",
          "[control][concurrency]") {
  primcache::control_registry r;
  auto reg = r.register_setting(primcache::setting_spec::integer("n", "", 0, 0, 1000000));
  constexpr int threads = 8;
  constexpr int per_thread = 20000;
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      (void)r.list_metrics();
      (void)r.events_since(0);
      (void)r.list_settings();
    }
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      auto c = r.counter("ops_total", "h", {{"kind", "k"}});
      auto h = r.histogram("lat_seconds", "h", {}, {0.5});
      for (int i = 0; i < per_thread; ++i) {
        c.add();
        h.observe(i % 2 == 0 ? 0.1 : 1.0);
        if (i % 1000 == 0) {
          r.set_setting("n", std::int64_t{i});
          r.record_event({.kind = "create", .name = "t" + std::to_string(t)});
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  stop = true;
  reader.join();
  CHECK(r.counter("ops_total", "h", {{"kind", "k"}}).value() ==
        std::uint64_t{threads} * per_thread);
  for (const auto& f : r.list_metrics()) {
    if (f.name != "lat_seconds") continue;
    CHECK(f.samples.at(0).count == std::uint64_t{threads} * per_thread);
    CHECK(f.samples.at(0).cumulative_counts.at(0) == std::uint64_t{threads} * per_thread / 2);
  }
  CHECK(r.events_since(0).next == std::uint64_t{threads} * (per_thread / 1000));
}
