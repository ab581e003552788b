// console_host — a tiny process that embeds the real admin server for the
// console's browser test (console.test.mjs): two caches, the process's CPU
// constant tensor cache (constant.cpu: capacity 64 MB, three 256 KiB
// tensors, a few hits), a kernel store double ("persistent", with a switch
// "remote_down" that opens its breaker), a store double with a Redis tier of
// three shards ("persistent.shards", with a switch "shard1_down" that opens
// shard 1's breaker), four switches, two settings and a few creation
// events in primcache::control(), the admin server on an ephemeral loopback
// port with a known token; and the primcache_graph_* series of two graph
// executors (an MLP, a ResNet-50 bottleneck) for the "Graph transforms" panel.
//
// While the switch "traffic" is on, a thread looks keys up in "primitive"
// (hits, and misses until every key is in), counts graph runs and
// transforms, and records one creation event
// a second, so the charts have something to draw; the test turns it off
// through the console before it compares numbers.
//
// It prints "url <URL>" and "token <TOKEN>" on stdout, then serves until
// stdin closes or SIGTERM/SIGINT arrives, and exits 0.
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "primcache/admin/admin_server.hpp"
#include "primcache/cache/concurrent_cache.hpp"
#include "primcache/const_cache/constant_tensor_caches.hpp"
#include "primcache/control/registry.hpp"

namespace {

std::atomic<bool> stop_requested{false};

// A kernel store as the runtime's "persistent" registration shows one: MB,
// and the store's counters as extra statistics. While the switch
// "remote_down" is on, the worker keeps its breaker open and counts remote
// errors, as a Redis tier that went away would.
class store_double {
 public:
  std::uint64_t capacity() const { return capacity_.load(); }
  void set_capacity(std::uint64_t mb) { capacity_.store(mb); }
  std::uint64_t size() const { return 3; }
  primcache::cache_counters stats() const {
    primcache::cache_counters c;
    c.hits = 20;
    c.misses = 6;
    return c;
  }
  void clear() {}
  std::vector<std::pair<std::string, std::uint64_t>> extra_stats() const {
    return {{"breaker_state", breaker_.load()},
            {"breaker_opens", opens_.load()},
            {"remote_errors", remote_errors_.load()},
            {"timeouts", 0},
            {"corrupt_entries", 0}};
  }
  // One worker tick: the remote tier down or up.
  void tick(bool down) {
    if (down) {
      if (breaker_.exchange(1) != 1) opens_.fetch_add(1);
      remote_errors_.fetch_add(1);
    } else {
      breaker_.store(0);
    }
  }

 private:
  std::atomic<std::uint64_t> capacity_{256};
  std::atomic<std::uint64_t> breaker_{0};
  std::atomic<std::uint64_t> opens_{0};
  std::atomic<std::uint64_t> remote_errors_{0};
};

// A kernel store with a sharded Redis tier, as the runtime's registration
// shows one (libs/persist/src/registration.cpp): `shards` and each shard's
// shard<i>_<stat>, and the combined breaker_state (closed only if every
// shard's is, open only if every shard's is, else half-open). While the
// switch "shard1_down" is on, shard 1's breaker is open, it counts remote
// errors and skipped requests; shards 0 and 2 stay up.
class sharded_store_double {
 public:
  static constexpr std::size_t shard_count = 3;
  std::uint64_t capacity() const { return 256; }
  void set_capacity(std::uint64_t) {}
  std::uint64_t size() const { return 9; }
  primcache::cache_counters stats() const {
    primcache::cache_counters c;
    c.hits = 30;
    c.misses = 9;
    return c;
  }
  void clear() {}
  std::vector<std::pair<std::string, std::uint64_t>> extra_stats() const {
    std::uint64_t open = 0;
    std::uint64_t remote_errors = 0;
    std::uint64_t opens = 0;
    std::uint64_t rejections = 0;
    for (const shard& s : shards_) {
      open += s.breaker.load() == 1 ? 1 : 0;
      remote_errors += s.remote_errors.load();
      opens += s.opens.load();
      rejections += s.rejections.load();
    }
    const std::uint64_t combined = open == 0 ? 0 : open == shard_count ? 1 : 2;
    std::vector<std::pair<std::string, std::uint64_t>> out{{"breaker_state", combined},
                                                           {"breaker_opens", opens},
                                                           {"breaker_rejections", rejections},
                                                           {"remote_errors", remote_errors},
                                                           {"timeouts", 0},
                                                           {"corrupt_entries", 0},
                                                           {"shards", shard_count}};
    for (std::size_t i = 0; i < shard_count; ++i) {
      const std::string p = "shard" + std::to_string(i) + "_";
      out.emplace_back(p + "hits", 10);
      out.emplace_back(p + "remote_errors", shards_[i].remote_errors.load());
      out.emplace_back(p + "timeouts", 0);
      out.emplace_back(p + "breaker_state", shards_[i].breaker.load());
      out.emplace_back(p + "breaker_opens", shards_[i].opens.load());
      out.emplace_back(p + "breaker_rejections", shards_[i].rejections.load());
    }
    return out;
  }
  // One worker tick: shard 1 down or up.
  void tick(bool shard1_down) {
    shard& s = shards_[1];
    if (shard1_down) {
      if (s.breaker.exchange(1) != 1) {
        s.opens.fetch_add(1);
        s.remote_errors.fetch_add(1);
      } else {
        s.rejections.fetch_add(1);
      }
    } else {
      s.breaker.store(0);
    }
  }

 private:
  struct shard {
    std::atomic<std::uint64_t> breaker{0};
    std::atomic<std::uint64_t> opens{0};
    std::atomic<std::uint64_t> remote_errors{0};
    std::atomic<std::uint64_t> rejections{0};
  };
  shard shards_[shard_count];
};

extern "C" void on_signal(int) {
  stop_requested.store(true);
}

// Fills `cache` with keys [0, n): n misses.
void fill(primcache::concurrent_cache<int, int>& cache, int n) {
  for (int k = 0; k < n; ++k) cache.get_or_add(k, [k] { return k * 2; });
}

// Until stdin reaches end of file or a signal asks to stop.
void wait_for_end() {
  char buffer[256];
  while (!stop_requested.load()) {
    pollfd fd{STDIN_FILENO, POLLIN, 0};
    const int ready = ::poll(&fd, 1, 200);
    if (ready > 0) {
      const ssize_t got = ::read(STDIN_FILENO, buffer, sizeof buffer);
      if (got <= 0) return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  const std::string token = argc > 1 ? argv[1] : "console-test-token";
  try {
    auto& control = primcache::control();
    primcache::concurrent_cache<int, int> primitive(64);
    primcache::concurrent_cache<int, int> descriptor(16);
    fill(primitive, 40);
    fill(descriptor, 10);
    for (int k = 0; k < 30; ++k) primitive.get_or_add(k, [] { return 0; });  // 30 hits
    for (int k = 0; k < 5; ++k) descriptor.get_or_add(k, [] { return 0; });  // 5 hits

    // The process's constant caches register themselves in control().
    primcache::constant_tensor_cache& constants = primcache::constant_caches().device("cpu");
    constants.set_capacity(64);
    for (int round = 0; round < 3; ++round) {  // 3 misses, then 6 hits
      for (const char* name : {"conv1.weights", "fc.weights", "attn.qkv"}) {
        constexpr std::size_t bytes = 256 * 1024;
        constants.get_or_add(7, name, bytes, [] {
          return primcache::make_constant_buffer(
              bytes, [](std::size_t n) { return std::malloc(n); },
              [](void* p, std::size_t) { std::free(p); });
        });
      }
    }

    primcache::cache_registration primitive_reg =
        control.register_cache("primitive", primitive, primcache::capacity_unit::entries);
    primcache::cache_registration descriptor_reg =
        control.register_cache("descriptor", descriptor, primcache::capacity_unit::entries);
    store_double store;
    primcache::cache_registration store_reg =
        control.register_cache("persistent", store, primcache::capacity_unit::megabytes);
    primcache::switch_registration remote_down = control.register_switch(
        "remote_down", "Simulate an unreachable Redis tier for the persistent card", false);
    sharded_store_double sharded;
    primcache::cache_registration sharded_reg =
        control.register_cache("persistent.shards", sharded, primcache::capacity_unit::megabytes);
    primcache::switch_registration shard1_down = control.register_switch(
        "shard1_down", "Simulate an unreachable Redis shard 1 for the persistent.shards card",
        false);
    primcache::switch_registration traffic = control.register_switch(
        "traffic", "Simulated lookups and creations in this test host", true);
    primcache::switch_registration tune =
        control.register_switch("tune", "Tune kernels on first use", false);
    primcache::setting_registration jit_mode =
        control.register_setting(primcache::setting_spec::choice(
            "jit_mode", "How kernels are compiled", "tiered", {"tiered", "sync"}));
    primcache::setting_registration threads = control.register_setting(
        primcache::setting_spec::integer("threads", "Worker threads", 4, 1, 64));

    const char* kinds[] = {"matmul", "convolution", "reorder", "eltwise"};
    for (int i = 0; i < 5; ++i) {
      control.record_event({.kind = "create",
                            .name = kinds[i % 4],
                            .source = i % 2 ? "memory" : "compile",
                            .duration_ms = i % 2 ? 0.2 + 0.05 * i : 12.5 + i,
                            .detail = "f32 64x64 (start-up)"});
    }

    // Two graph executors' series, named and labelled as libs/graph registers
    // them (docs/metrics.md), for the "Graph transforms" panel: the MLP's
    // transposed weights transformed once, then taken from the cache; the
    // bottleneck's input reordered (nchw -> nhwc, 1x256x56x56 f32) every run.
    const primcache::metric_labels mlp_w2 = {{"from", "cpu/f32/ba/jit"},
                                             {"graph", "mlp"},
                                             {"steps", "layout"},
                                             {"to", "cpu/f32/ab/jit"}};
    const primcache::metric_labels bottleneck_x = {{"from", "cpu/f32/abcd/jit"},
                                                   {"graph", "resnet50_bottleneck"},
                                                   {"steps", "layout"},
                                                   {"to", "cpu/f32/acdb/jit"}};
    auto graph_counter = [&](const char* name, const primcache::metric_labels& labels) {
      return control.counter(name, "graph executor series (console_host)", labels);
    };
    auto transform_executions = [&](const primcache::metric_labels& labels) {
      return graph_counter("primcache_graph_transform_executions_total", labels);
    };
    auto transform_bytes = [&](const primcache::metric_labels& labels) {
      return graph_counter("primcache_graph_transform_bytes_total", labels);
    };
    constexpr std::uint64_t mlp_w2_bytes = 512 * 256 * 8;            // read + written
    constexpr std::uint64_t bottleneck_x_bytes = 256 * 56 * 56 * 8;  // read + written
    transform_executions(mlp_w2).add(1);
    transform_bytes(mlp_w2).add(mlp_w2_bytes);
    graph_counter("primcache_graph_constant_transforms_total", {{"graph", "mlp"}}).add(1);
    const primcache::metric_counter mlp_runs =
        graph_counter("primcache_graph_runs_total", {{"graph", "mlp"}});
    const primcache::metric_counter mlp_hits =
        graph_counter("primcache_graph_constant_cache_hits_total", {{"graph", "mlp"}});
    const primcache::metric_counter bottleneck_runs =
        graph_counter("primcache_graph_runs_total", {{"graph", "resnet50_bottleneck"}});
    const primcache::metric_counter bottleneck_x_executions = transform_executions(bottleneck_x);
    const primcache::metric_counter bottleneck_x_transformed = transform_bytes(bottleneck_x);
    mlp_runs.add(1);

    std::atomic<bool> done{false};
    std::thread worker([&] {
      std::mt19937 random(7);
      int tick = 0;
      while (!done.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        store.tick(control.get_switch("remote_down"));
        sharded.tick(control.get_switch("shard1_down"));
        if (!control.get_switch("traffic")) continue;
        const int key = static_cast<int>(random() % 48);
        primitive.get_or_add(key, [key] { return key * 2; });
        mlp_runs.add();
        mlp_hits.add();
        bottleneck_runs.add();
        bottleneck_x_executions.add();
        bottleneck_x_transformed.add(bottleneck_x_bytes);
        if (++tick % 50 == 0) {
          const bool compiled = tick % 100 == 0;
          control.record_event({.kind = "create",
                                .name = kinds[(tick / 50) % 4],
                                .source = compiled ? "compile" : "memory",
                                .duration_ms = compiled ? 8.0 + random() % 20 : 0.1,
                                .detail = "f32 128x128 (traffic)"});
        }
      }
    });

    primcache::admin_options options;
    options.token = token;
    primcache::admin_server server = primcache::admin_server::start(options);
    std::printf("url %s\ntoken %s\n", server.url().c_str(), server.token().c_str());
    std::fflush(stdout);

    wait_for_end();
    server.stop();
    done.store(true);
    worker.join();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "console_host: %s\n", e.what());
    return 1;
  }
}
