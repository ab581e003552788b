// The constant caches as the admin server turns them, under threads: control
// capacity changes (on constant.cpu they set the kind) and previews racing
// with lookups, kind settings and flushes. Every buffer handed out is whole,
// every preview is a value some state could give, and nothing deadlocks.
//
// Worker threads record into plain per-thread data; the main thread asserts
// after joining them (Catch2's assertions are not thread-safe).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "primcache/const_cache/constant_tensor_caches.hpp"
#include "primcache/control/registry.hpp"
#include "test_buffers.hpp"

using const_cache_test::buffer_counter;
using const_cache_test::holds;
using const_cache_test::KiB;
using primcache::constant_tensor_cache;
using primcache::constant_tensor_caches;

TEST_CASE("control capacity changes and previews race with lookups and kind settings",
          "[const_cache][control][concurrency]") {
  buffer_counter buffers;
  {
    primcache::control_registry registry;
    constant_tensor_caches caches(registry);
    constant_tensor_cache& cpu = caches.device("cpu");
    caches.device("gpu.0");
    constexpr int kUsers = 4;
    constexpr int kLookups = 4000;
    std::atomic<bool> stop{false};
    std::vector<int> bad(kUsers, 0);
    std::vector<std::thread> users;
    for (int t = 0; t < kUsers; ++t) {
      users.emplace_back([&, t] {
        for (int i = 0; i < kLookups; ++i) {
          const int k = (i * 7 + t) % 32;
          const auto seed = static_cast<unsigned char>(k + 1);
          auto r = cpu.get_or_add(1, "k" + std::to_string(k), KiB,
                                  [&] { return buffers.make(KiB, seed); });
          if (r.value == nullptr || !holds(*r.value, seed)) ++bad[static_cast<std::size_t>(t)];
        }
      });
    }
    int bad_previews = 0;
    std::thread admin([&] {
      const auto cpu_handle = registry.find_cache("constant.cpu");
      const auto gpu_handle = registry.find_cache("constant.gpu.0");
      std::uint64_t n = 0;
      while (!stop.load()) {
        const std::uint64_t mb = n % 4;  // 0 ... 3, up and down
        const auto p = cpu_handle.preview_capacity(mb);
        if (!p || p->bytes > p->entries * KiB || (!p->flushes && p->entries != 0)) ++bad_previews;
        cpu_handle.set_capacity(mb);
        (void)gpu_handle.preview_capacity(mb + 1);
        gpu_handle.set_capacity(mb + 1);
        ++n;
      }
    });
    std::thread kinds([&] {
      std::uint64_t n = 0;
      while (!stop.load()) {
        caches.set_capacity("cpu", 2 + n % 3);
        (void)caches.preview_capacity("gpu", n % 5);
        if (n % 7 == 0) registry.flush("constant.cpu");
        ++n;
      }
    });
    for (std::thread& u : users) u.join();
    stop.store(true);
    admin.join();
    kinds.join();
    for (int b : bad) CHECK(b == 0);
    CHECK(bad_previews == 0);
    CHECK(caches.capacity("cpu") == cpu.capacity());  // the last writer set both
  }
  CHECK(buffers.live == 0);  // every buffer freed once the set is gone
}
