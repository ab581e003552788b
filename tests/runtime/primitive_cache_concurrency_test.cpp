#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "fake_backend.hpp"
#include "primcache/base/error.hpp"
#include "primcache/runtime/runtime.hpp"

using namespace primcache;

namespace {
// Every thread that waited on a failed creation catches the same exception
// object (the shared future rethrows the creator's), and the last to leave
// its catch block frees it. libstdc++ counts those references with atomics
// compiled without ThreadSanitizer, so TSan cannot see that the reads happen
// before the free. Reads of shared exception objects go through this one
// function, and only races through it are suppressed.
[[gnu::noinline]] std::string shared_exception_message(const std::exception& e) {
  return e.what();
}
}  // namespace

extern "C" const char* __tsan_default_suppressions() {
  return "race:shared_exception_message\n";
}

// Worker threads record; the main thread asserts (Catch2 v2 is not
// thread-safe).
TEST_CASE("concurrent creations of one primitive compile it once", "[runtime][primitive_cache]") {
  set_primitive_cache_capacity(0);
  set_primitive_cache_capacity(1024);
  for (int round = 0; round < 20; ++round) {
    const std::int64_t d0 = 100 + round;  // slow creations: the others wait
    const int before = fake::creations.load();
    std::vector<int> outcomes(8, -1);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        reorder r(fake::copy_pd(d0));
        outcomes[t] = static_cast<int>(r.creation_outcome());
      });
    }
    for (auto& t : threads) t.join();
    CHECK(fake::creations.load() == before + 1);
    CHECK(std::count(outcomes.begin(), outcomes.end(), static_cast<int>(lookup_outcome::miss)) ==
          1);
  }
}

TEST_CASE("a failed creation reaches every waiting thread", "[runtime][primitive_cache]") {
  set_primitive_cache_capacity(1024);
  std::vector<std::string> errors(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        reorder r(fake::copy_pd(13));
      } catch (const error& e) {
        errors[t] = shared_exception_message(e);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) CHECK(e == "runtime_error: fake compiler failed for 13");
  CHECK_FALSE(primitive_cache_contains(fake::copy_pd(13)));
}

TEST_CASE("nested creation from 8 threads at capacity 1 does not deadlock",
          "[runtime][primitive_cache][nested]") {
  set_primitive_cache_capacity(1);
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        reorder outer(fake::copy_pd(7, 3));
        reorder inner(fake::copy_pd(8, 3));
      }
      done.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  CHECK(done.load() == 8);
  CHECK(get_primitive_cache_size() <= 1);
  set_primitive_cache_capacity(1024);
}

TEST_CASE("capacity changes race with creations safely", "[runtime][primitive_cache]") {
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        try {
          reorder r(fake::copy_pd(200 + (i + t) % 16, 2));
          if (!r) failures.fetch_add(1);
        } catch (...) {
          failures.fetch_add(1);
        }
      }
    });
  }
  std::thread resizer([&] {
    for (int i = 0; !stop.load(); ++i) set_primitive_cache_capacity(i % 5);
  });
  for (auto& t : threads) t.join();
  stop.store(true);
  resizer.join();
  set_primitive_cache_capacity(1024);
  CHECK(failures.load() == 0);
}
