// concurrent_cache under threads: waiters share one creator's value or
// failure, in-flight evictions still deliver, a copy out that throws reaches
// its own caller alone, clear_and_set_capacity(0) leaves nothing that racing
// callers could add, and the stress test — 16 threads x 100k get_or_add over
// 1k keys, 5% of creators throwing, capacity changed (and entries erased)
// from another thread — keeps every invariant.
//
// Catch2's assertions are not thread-safe: worker threads record into plain
// per-thread data and the main thread asserts after joining them.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "primcache/cache/concurrent_cache.hpp"
#include "support/sanitizers.hpp"

using primcache::eviction_reason;
using primcache::lookup_outcome;

namespace {

// The specified stress test makes 100k calls per thread everywhere (about
// 25 s under ThreadSanitizer on two cores, 23 s under AddressSanitizer, 2 s
// in the release build). The extra weighted variant makes 10k under the
// sanitizers, to keep CI's sanitizer jobs short.
constexpr int kCallsPerThread = 100'000;
#if PRIMCACHE_TEST_TSAN || PRIMCACHE_TEST_ASAN
constexpr int kWeightedCallsPerThread = 10'000;
#else
constexpr int kWeightedCallsPerThread = 100'000;
#endif
constexpr int kThreads = 16;
constexpr int kKeys = 1000;

// Every caller that waited on a failed creation catches the same exception
// object (std::shared_future rethrows the one the creator threw), and the last
// to leave its catch block frees it. libstdc++ counts those references with
// atomics compiled without ThreadSanitizer, so TSan cannot see that each read
// of the object happens before the free and reports a race on it. All reads
// of shared exception objects in this file go through the two functions
// below, and only races whose stacks include them are suppressed.
[[gnu::noinline]] std::string shared_exception_message(const std::exception& e) {
  return e.what();
}

}  // namespace

extern "C" const char* __tsan_default_suppressions() {
  return "race:shared_exception_message\n"
         "race:shared_exception_fields\n";
}

namespace {

// Waits until `done()` holds, yielding; the tests below only wait for
// things that the code under test must make happen.
template <typename F>
void spin_until(F done) {
  while (!done()) std::this_thread::yield();
}

// ---- waiters ---------------------------------------------------------------

using int_cache = primcache::concurrent_cache<int, int>;

struct call_record {
  std::optional<int> value;
  std::optional<std::string> error;
  lookup_outcome outcome = lookup_outcome::hit;
};

// Starts `n` threads that each call get_or_add(key) with a creator that
// counts its runs in `stray_runs`, once the cache shows `n` waiters more
// than `waits_before`.
struct waiter_group {
  std::vector<std::thread> threads;
  std::vector<call_record> records;

  waiter_group(int_cache& cache, int key, int n, std::atomic<int>& stray_runs) : records(n) {
    const std::uint64_t waits_before = cache.stats().waits;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, key, i] {
        try {
          auto r = cache.get_or_add(key, [&] {
            ++stray_runs;
            return -1;
          });
          records[i].value = r.value;
          records[i].outcome = r.outcome;
        } catch (const std::exception& e) {
          records[i].error = shared_exception_message(e);
        }
      });
    }
    spin_until([&] { return cache.stats().waits >= waits_before + static_cast<unsigned>(n); });
  }
  void join() {
    for (auto& t : threads) t.join();
  }
};

}  // namespace

TEST_CASE("concurrent callers for one key share one creator's value", "[cache][concurrency]") {
  const int round = GENERATE(range(0, 20));
  INFO("round " << round);
  int_cache cache(16);
  std::atomic<bool> release{false};
  std::atomic<int> runs{0};
  std::atomic<int> stray_runs{0};
  call_record creator_call;
  std::thread creator([&] {
    auto r = cache.get_or_add(1, [&] {
      ++runs;
      spin_until([&] { return release.load(); });
      return 42;
    });
    creator_call.value = r.value;
    creator_call.outcome = r.outcome;
  });
  spin_until([&] { return cache.contains(1); });
  waiter_group waiters(cache, 1, 4, stray_runs);
  release = true;
  creator.join();
  waiters.join();

  CHECK(runs == 1);
  CHECK(stray_runs == 0);
  CHECK(creator_call.outcome == lookup_outcome::miss);
  CHECK(creator_call.value == 42);
  for (const auto& w : waiters.records) {
    CHECK(w.outcome == lookup_outcome::waited);
    CHECK(w.value == 42);
  }
  CHECK(cache.stats().waits == 4);
  CHECK(cache.get_or_add(1, [] { return -1; }).outcome == lookup_outcome::hit);
}

TEST_CASE("a failed creation reaches every waiter and leaves nothing", "[cache][concurrency]") {
  const int round = GENERATE(range(0, 20));
  INFO("round " << round);
  int_cache cache(16);
  std::atomic<bool> release{false};
  std::atomic<int> stray_runs{0};
  std::optional<std::string> creator_error;
  std::thread creator([&] {
    try {
      cache.get_or_add(1, [&]() -> int {
        spin_until([&] { return release.load(); });
        throw std::runtime_error("kernel did not compile");
      });
    } catch (const std::exception& e) {
      creator_error = shared_exception_message(e);
    }
  });
  spin_until([&] { return cache.contains(1); });
  waiter_group waiters(cache, 1, 4, stray_runs);
  release = true;
  creator.join();
  waiters.join();

  CHECK(creator_error == "kernel did not compile");
  CHECK(stray_runs == 0);
  for (const auto& w : waiters.records) {
    CHECK_FALSE(w.value.has_value());
    CHECK(w.error == "kernel did not compile");
  }
  CHECK_FALSE(cache.contains(1));
  CHECK(cache.size() == 0);
  CHECK(cache.stats().failures == 1);
  CHECK(cache.get_or_add(1, [] { return 7; }).outcome == lookup_outcome::miss);
}

TEST_CASE("waiters of an entry evicted in flight still receive its value", "[cache][concurrency]") {
  const int round = GENERATE(range(0, 20));
  const bool by_capacity = round % 2 == 0;
  INFO("round " << round << (by_capacity ? ": capacity 0" : ": erase"));
  std::atomic<int> heard{0};
  std::atomic<bool> heard_null{false};
  int_cache cache(int_cache::options_type{
      .capacity = 16, .on_evict = [&](const int&, const int* value, eviction_reason) {
        ++heard;
        heard_null = value == nullptr;
      }});
  std::atomic<bool> release{false};
  std::atomic<int> stray_runs{0};
  std::thread creator([&] {
    cache.get_or_add(1, [&] {
      spin_until([&] { return release.load(); });
      return 42;
    });
  });
  spin_until([&] { return cache.contains(1); });
  waiter_group waiters(cache, 1, 3, stray_runs);
  if (by_capacity) {
    cache.set_capacity(0);
  } else {
    CHECK(cache.erase(1));
  }
  release = true;
  creator.join();
  waiters.join();

  for (const auto& w : waiters.records) {
    CHECK(w.outcome == lookup_outcome::waited);
    CHECK(w.value == 42);
  }
  CHECK(stray_runs == 0);
  CHECK_FALSE(cache.contains(1));
  CHECK(heard == 1);
  CHECK(heard_null);
}

TEST_CASE("capacity 0 de-duplicates nothing under threads", "[cache][concurrency]") {
  int_cache cache(0);
  std::atomic<int> runs{0};
  std::atomic<int> inside{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&] {
      cache.get_or_add(1, [&] {
        ++runs;
        ++inside;
        spin_until([&] { return inside.load() == 2; });  // both creators run at once
        return 1;
      });
    });
  }
  for (auto& t : threads) t.join();
  CHECK(runs == 2);
  CHECK(cache.size() == 0);
}

// ---- copying values out ----------------------------------------------------

namespace {

// A value whose copies can be made to throw: the copy numbered `fail_at`,
// counting from when `copies` was last reset.
struct fragile {
  static inline std::atomic<int> copies{0};
  static inline std::atomic<int> fail_at{-1};
  int v = 0;
  explicit fragile(int x) : v(x) {}
  fragile(fragile&&) noexcept = default;
  fragile(const fragile& other) : v(other.v) {
    if (copies.fetch_add(1) == fail_at.load()) throw std::runtime_error("copy failed");
  }
  fragile& operator=(const fragile&) = default;
};

using fragile_cache = primcache::concurrent_cache<int, fragile>;

struct fragile_record {
  std::optional<int> value;
  std::optional<std::string> error;
  lookup_outcome outcome = lookup_outcome::hit;
};

// Runs get_or_add(1) with `make` on one thread and `n` waiters for it on
// others; `make` runs once every waiter waits. Returns the creator's record
// first, then the waiters'.
std::vector<fragile_record> create_with_waiters(fragile_cache& cache, int n,
                                                std::function<fragile()> make) {
  std::vector<fragile_record> records(1 + n);
  auto call = [&](fragile_record& rec, const std::function<fragile()>& creator) {
    try {
      auto r = cache.get_or_add(1, creator);
      rec.value = r.value.v;
      rec.outcome = r.outcome;
    } catch (const std::exception& e) {
      rec.error = shared_exception_message(e);
    }
  };
  std::atomic<bool> release{false};
  std::thread creator([&] {
    call(records[0], [&] {
      spin_until([&] { return release.load(); });
      return make();
    });
  });
  spin_until([&] { return cache.contains(1); });
  std::vector<std::thread> waiters;
  for (int i = 1; i <= n; ++i) {
    waiters.emplace_back([&, i] { call(records[i], [] { return fragile(-99); }); });
  }
  spin_until([&] { return cache.stats().waits >= static_cast<std::uint64_t>(n); });
  release = true;
  creator.join();
  for (auto& t : waiters) t.join();
  return records;
}

}  // namespace

TEST_CASE("a copy that throws while a value goes out to a waiter reaches that waiter alone",
          "[cache][concurrency][failure]") {
  const int waiters = GENERATE(1, 3);
  const int round = GENERATE(range(0, 10));
  INFO(waiters << " waiters, round " << round);
  fragile::fail_at = -1;

  SECTION("a value that is kept") {
    fragile_cache cache(4);
    // Copy 0 puts the value in the cache; copy 1 is the first copy out to a
    // waiter.
    auto records = create_with_waiters(cache, waiters, [] {
      fragile::copies = 0;
      fragile::fail_at = 1;
      return fragile(7);
    });
    fragile::fail_at = -1;
    CHECK(records[0].error.value_or("none") == "none");
    CHECK(records[0].value == 7);
    CHECK(records[0].outcome == lookup_outcome::miss);
    int failed = 0;
    for (int i = 1; i <= waiters; ++i) {
      if (records[i].error) {
        ++failed;
        // Its own copy's exception, not a broken promise.
        CHECK(records[i].error.value_or("none") == "copy failed");
      } else {
        CHECK(records[i].value == 7);
        CHECK(records[i].outcome == lookup_outcome::waited);
      }
    }
    CHECK(failed == 1);
    // The creation succeeded: the value stays, and no failure is counted.
    CHECK(cache.get_or_add(1, [] { return fragile(-1); }).outcome == lookup_outcome::hit);
    CHECK(cache.stats().failures == 0);
    CHECK(cache.stats().misses == 1);
    CHECK(cache.stats().waits == static_cast<std::uint64_t>(waiters));
  }
  SECTION("a failure value, which waiters share one copy of") {
    fragile_cache cache(fragile_cache::options_type{
        .capacity = 4, .is_failure = [](const fragile& f) { return f.v < 0; }});
    auto records = create_with_waiters(cache, waiters, [] {
      fragile::copies = 0;
      fragile::fail_at = 0;
      return fragile(-5);
    });
    fragile::fail_at = -1;
    CHECK(records[0].error.value_or("none") == "none");
    CHECK(records[0].value == -5);
    for (int i = 1; i <= waiters; ++i) CHECK(records[i].error.value_or("none") == "copy failed");
    CHECK_FALSE(cache.contains(1));
    CHECK(cache.stats().failures == 1);
  }
  SECTION("a failure value that copies: every waiter gets it") {
    fragile_cache cache(fragile_cache::options_type{
        .capacity = 4, .is_failure = [](const fragile& f) { return f.v < 0; }});
    auto records = create_with_waiters(cache, waiters, [] { return fragile(-5); });
    for (const auto& r : records) CHECK(r.value == -5);
    CHECK_FALSE(cache.contains(1));
    CHECK(cache.stats().failures == 1);
  }
}

// ---- clear_and_set_capacity ------------------------------------------------

TEST_CASE("clear_and_set_capacity(0) leaves no entry that racing callers can add",
          "[cache][concurrency][capacity]") {
  // clear() then set_capacity(0) leaves a gap in which another caller can
  // insert an entry, and in a bytes cache set_capacity(0) leaves entries in
  // flight where they are. The one-step call leaves the table empty.
  int_cache cache(int_cache::options_type{
      .capacity = 64, .weigher = [](const int&, const int&) { return std::size_t{4}; }});
  std::atomic<bool> stop{false};
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        cache.get_or_add(t * 1000 + i % 100, [] {
          std::this_thread::yield();
          return 1;
        });
      }
    });
  }
  int nonempty = 0;
  for (int round = 0; round < 200; ++round) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    cache.clear_and_set_capacity(0);
    if (cache.occupancy().size != 0) ++nonempty;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (cache.occupancy().size != 0) ++nonempty;  // nothing can be added at capacity 0
    cache.set_capacity(64);
  }
  stop = true;
  for (auto& t : callers) t.join();
  CHECK(nonempty == 0);
  CHECK(cache.occupancy().weight <= cache.occupancy().capacity);
}

// ---- the stress test ---------------------------------------------------------

namespace {

struct made {
  int key;
  std::uint64_t run;
};

struct creation_failed : std::runtime_error {
  creation_failed(int k, std::uint64_t r) : std::runtime_error("creation failed"), key(k), run(r) {}
  int key;
  std::uint64_t run;
};

using stress_cache = primcache::concurrent_cache<int, made>;

// See shared_exception_message.
[[gnu::noinline]] std::pair<int, std::uint64_t> shared_exception_fields(const creation_failed& e) {
  return {e.key, e.run};
}

// Whether run `run` fails: 5% of runs, spread by a mix of the run id.
bool run_fails(std::uint64_t run) {
  std::uint64_t z = run + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) % 100 < 5;
}

// Everything the creators, the listener and the callers record. Runs are
// numbered globally; each run's key, thread and fate are published before the
// run's value or error can reach anyone (through the cache's future or lock).
struct stress_ledger {
  explicit stress_ledger(int calls)
      : calls_per_thread(calls),
        max_runs(std::size_t{kThreads} * static_cast<std::size_t>(calls)),
        run_key(max_runs),
        run_thread(max_runs),
        run_failed(max_runs) {}

  const int calls_per_thread;
  const std::size_t max_runs;  // every run is some call's miss
  std::atomic<std::uint64_t> next_run{0};
  std::vector<std::atomic<int>> run_key;
  std::vector<std::atomic<int>> run_thread;
  std::vector<std::atomic<bool>> run_failed;
  std::vector<std::atomic<std::uint64_t>> runs = std::vector<std::atomic<std::uint64_t>>(kKeys);
  std::vector<std::atomic<std::uint64_t>> failures = std::vector<std::atomic<std::uint64_t>>(kKeys);
  std::vector<std::atomic<std::uint64_t>> evictions =
      std::vector<std::atomic<std::uint64_t>>(kKeys);
  std::vector<std::atomic<std::uint64_t>> erasures = std::vector<std::atomic<std::uint64_t>>(kKeys);

  made create(int key, int thread) {
    const std::uint64_t run = next_run.fetch_add(1, std::memory_order_relaxed);
    run_key[run].store(key, std::memory_order_relaxed);
    run_thread[run].store(thread, std::memory_order_relaxed);
    runs[key].fetch_add(1, std::memory_order_relaxed);
    // One run in eight lingers in flight, so that other callers wait and
    // capacity changes evict in-flight entries.
    if (run % 8 == 0) std::this_thread::yield();
    if (run_fails(run)) {
      run_failed[run].store(true, std::memory_order_relaxed);
      failures[key].fetch_add(1, std::memory_order_relaxed);
      throw creation_failed(key, run);
    }
    return made{key, run};
  }

  void heard(int key, eviction_reason reason) {
    auto& counter = reason == eviction_reason::capacity ? evictions[key] : erasures[key];
    counter.fetch_add(1, std::memory_order_relaxed);
  }
};

// What one calling thread saw; read by the main thread after join.
struct caller_report {
  std::uint64_t calls = 0;
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t waited = 0;
  std::uint64_t errors = 0;
  std::uint64_t wrong_value = 0;  // a value made for another key, or by a failed run
  std::uint64_t wrong_run = 0;    // miss not made by this thread / waited made by it
  std::uint64_t wrong_error = 0;  // an error from another key's run, or a successful one
  std::uint64_t over_capacity = 0;
};

void stress(stress_cache& cache, stress_ledger& ledger, bool weighted) {
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> changes{0};
  std::vector<caller_report> reports(kThreads);
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      caller_report& rep = reports[t];
      std::mt19937 rng(static_cast<unsigned>(t) * 7919u + 1u);
      std::uniform_int_distribution<int> pick(0, kKeys - 1);
      for (int i = 0; i < ledger.calls_per_thread; ++i) {
        const int key = pick(rng);
        ++rep.calls;
        try {
          auto r = cache.get_or_add(key, [&] { return ledger.create(key, t); });
          const made& v = r.value;
          const bool good = v.key == key && v.run < ledger.max_runs &&
                            ledger.run_key[v.run].load(std::memory_order_relaxed) == key &&
                            !ledger.run_failed[v.run].load(std::memory_order_relaxed);
          if (!good) ++rep.wrong_value;
          const int maker = ledger.run_thread[v.run].load(std::memory_order_relaxed);
          switch (r.outcome) {
            case lookup_outcome::hit: ++rep.hits; break;
            case lookup_outcome::miss:
              ++rep.misses;
              if (maker != t) ++rep.wrong_run;
              break;
            case lookup_outcome::waited:
              ++rep.waited;
              if (maker == t) ++rep.wrong_run;
              break;
          }
        } catch (const creation_failed& e) {
          ++rep.errors;
          const auto [error_key, run] = shared_exception_fields(e);
          const bool good = error_key == key && run < ledger.max_runs &&
                            ledger.run_key[run].load(std::memory_order_relaxed) == key &&
                            ledger.run_failed[run].load(std::memory_order_relaxed);
          if (!good) ++rep.wrong_error;
        }
        const auto o = cache.occupancy();
        if ((weighted ? o.weight : o.size) > o.capacity) ++rep.over_capacity;
      }
    });
  }
  // The operator: capacity changes (never 0, which would de-duplicate
  // nothing and so void the run bound), and now and then an erase.
  std::thread changer([&] {
    static constexpr std::size_t kCapacities[] = {1, 7, 64, 500, 1000, 2000, 250, 3};
    const std::size_t scale = weighted ? 16 : 1;
    std::mt19937 rng(12345);
    for (std::size_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      cache.set_capacity(kCapacities[i % std::size(kCapacities)] * scale);
      changes.store(i + 1, std::memory_order_relaxed);
      if (i % 4 == 0) cache.erase(static_cast<int>(rng() % kKeys));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  for (auto& t : callers) t.join();
  stop = true;
  changer.join();
  CHECK(changes.load() > 0);

  caller_report total;
  for (const auto& r : reports) {
    total.calls += r.calls;
    total.hits += r.hits;
    total.misses += r.misses;
    total.waited += r.waited;
    total.errors += r.errors;
    total.wrong_value += r.wrong_value;
    total.wrong_run += r.wrong_run;
    total.wrong_error += r.wrong_error;
    total.over_capacity += r.over_capacity;
  }
  INFO("capacity changes " << changes.load() << ", calls " << total.calls << ", hits " << total.hits
                           << ", misses " << total.misses << ", waited " << total.waited
                           << ", errors " << total.errors);
  CHECK(total.calls ==
        std::uint64_t{kThreads} * static_cast<std::uint64_t>(ledger.calls_per_thread));
  CHECK(total.wrong_value == 0);
  CHECK(total.wrong_run == 0);
  CHECK(total.wrong_error == 0);
  CHECK(total.over_capacity == 0);

  std::uint64_t runs = 0, failures = 0, evictions = 0, violations = 0;
  for (int k = 0; k < kKeys; ++k) {
    const auto r = ledger.runs[k].load();
    const auto bound =
        1 + ledger.evictions[k].load() + ledger.erasures[k].load() + ledger.failures[k].load();
    if (r > bound) {
      ++violations;
      UNSCOPED_INFO("key " << k << ": " << r << " runs > bound " << bound);
    }
    runs += r;
    failures += ledger.failures[k].load();
    evictions += ledger.evictions[k].load();
  }
  CHECK(violations == 0);
  CHECK(failures > 0);

  const auto s = cache.stats();
  CHECK(s.misses == runs);
  CHECK(s.failures == failures);
  CHECK(s.evictions == evictions);
  CHECK(s.refusals == 0);
  // Every call is exactly one of: a hit, a miss, a wait.
  CHECK(s.hits + s.misses + s.waits == total.calls);
  CHECK(s.hits == total.hits);
  const auto o = cache.occupancy();
  CHECK((weighted ? o.weight : o.size) <= o.capacity);
}

}  // namespace

TEST_CASE("stress: 16 threads, 1k keys, throwing creators and a moving capacity",
          "[cache][concurrency][stress]") {
  stress_ledger ledger(kCallsPerThread);
  stress_cache cache(stress_cache::options_type{
      .capacity = 500, .on_evict = [&](const int& key, const made*, eviction_reason reason) {
        ledger.heard(key, reason);
      }});
  stress(cache, ledger, /*weighted=*/false);
}

TEST_CASE("stress: the same load on a cache whose capacity is a weight",
          "[cache][concurrency][stress]") {
  stress_ledger ledger(kWeightedCallsPerThread);
  stress_cache cache(stress_cache::options_type{
      .capacity = 8000,
      .weigher = [](const int& key, const made&) { return std::size_t(1 + key % 31); },
      .on_evict = [&](const int& key, const made*,
                      eviction_reason reason) { ledger.heard(key, reason); }});
  stress(cache, ledger, /*weighted=*/true);
}

// ---- hits beside writers ---------------------------------------------------

namespace {

// Keys >= 100 share one hash, so a lookup of one compares it with the
// others. Comparing key 500 blocks on its second call — the second look a
// miss takes under the exclusive lock (the first is the lock-free lookup) —
// until `release` is set (or 20 s pass), so a test can hold a writer inside
// the exclusive lock.
struct blocking_hash {
  std::size_t operator()(int k) const noexcept {
    return k < 100 ? static_cast<std::size_t>(k) : 12345;
  }
};
struct blocking_state {
  std::atomic<int> calls_on_500{0};
  std::atomic<bool> blocked{false};
  std::atomic<bool> release{false};
  std::atomic<bool> timed_out{false};
};
blocking_state* g_blocking = nullptr;
struct blocking_eq {
  bool operator()(int a, int b) const {
    if ((a == 500 || b == 500) && g_blocking != nullptr &&
        g_blocking->calls_on_500.fetch_add(1) == 1) {
      g_blocking->blocked.store(true);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!g_blocking->release.load()) {
        if (std::chrono::steady_clock::now() > deadline) {
          g_blocking->timed_out.store(true);
          break;
        }
        std::this_thread::yield();
      }
    }
    return a == b;
  }
};

}  // namespace

TEST_CASE("hits complete while a writer holds the exclusive lock", "[cache][concurrency]") {
  blocking_state state;
  primcache::concurrent_cache<int, int, blocking_hash, blocking_eq> cache(100);
  for (int k = 0; k < 10; ++k) cache.get_or_add(k, [k] { return k * 7; });
  cache.get_or_add(501, [] { return 501 * 7; });
  g_blocking = &state;
  std::thread writer([&] { cache.get_or_add(500, [] { return 500 * 7; }); });
  spin_until([&] { return state.blocked.load(); });
  // The writer is now inside the exclusive lock, comparing keys.
  int wrong = 0;
  for (int round = 0; round < 1000; ++round) {
    for (int k = 0; k < 10; ++k) {
      auto r = cache.get_or_add(k, [] { return -1; });
      if (r.value != k * 7 || r.outcome != lookup_outcome::hit) ++wrong;
    }
  }
  const bool finished_while_blocked = !state.release.load() && !state.timed_out.load();
  state.release.store(true);
  writer.join();
  g_blocking = nullptr;
  CHECK(wrong == 0);
  CHECK(finished_while_blocked);
  CHECK_FALSE(state.timed_out.load());
  CHECK(cache.get_or_add(500, [] { return -1; }).value == 500 * 7);
}

namespace {

// Values that a use after free would corrupt (and sanitizers would report).
struct tagged {
  explicit tagged(int k) : key(k), check(~k) {}
  ~tagged() { check = 0; }
  int key;
  int check;
};
using tagged_cache = primcache::concurrent_cache<int, std::shared_ptr<const tagged>>;

}  // namespace

TEST_CASE("stress: hits on resident keys during inserts, evictions, erasures and capacity changes",
          "[cache][concurrency][stress]") {
  tagged_cache cache(300);
  constexpr int kResidentKeys = 64;
#if PRIMCACHE_TEST_TSAN
  constexpr int kHitsPerReader = 40'000;
#else
  constexpr int kHitsPerReader = 400'000;
#endif
  constexpr int kReaders = 3;
  std::atomic<bool> stop{false};
  std::vector<long> wrong(kReaders, 0);
  std::vector<long> hits(kReaders, 0);
  std::atomic<long> inserter_wrong{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < kHitsPerReader; ++i) {
        const int k = (i * 7 + r) % kResidentKeys;
        auto got = cache.get_or_add(k, [k] { return std::make_shared<const tagged>(k); });
        if (got.value == nullptr || got.value->key != k || got.value->check != ~k) ++wrong[r];
        if (got.outcome == lookup_outcome::hit) ++hits[r];
      }
    });
  }
  // Two inserters of fresh keys (each insert evicts once the cache is full).
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      int k = 1000 + w;
      while (!stop.load(std::memory_order_relaxed)) {
        auto got = cache.get_or_add(k, [k] { return std::make_shared<const tagged>(k); });
        if (got.value->key != k || got.value->check != ~k) inserter_wrong.fetch_add(1);
        k += 2;
        if (k > 200'000) k = 1000 + w;
      }
    });
  }
  // Capacity moves (below the resident set at times), erasures and clears.
  threads.emplace_back([&] {
    std::mt19937 rng(7);
    int step = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      switch (step++ % 8) {
        case 0: cache.set_capacity(16 + rng() % 400); break;
        case 1: cache.erase(static_cast<int>(rng() % kResidentKeys)); break;
        case 2: cache.erase(1000 + static_cast<int>(rng() % 5000)); break;
        case 7:
          if (step % 64 == 7) cache.clear();
          break;
        default: std::this_thread::yield(); break;
      }
    }
    cache.set_capacity(300);
  });
  for (int r = 0; r < kReaders; ++r) threads[static_cast<std::size_t>(r)].join();
  stop.store(true);
  for (std::size_t t = kReaders; t < threads.size(); ++t) threads[t].join();
  long total_hits = 0;
  for (int r = 0; r < kReaders; ++r) {
    CHECK(wrong[r] == 0);
    total_hits += hits[r];
  }
  CHECK(inserter_wrong.load() == 0);
  CHECK(total_hits > 0);
  const auto o = cache.occupancy();
  CHECK(o.size <= o.capacity);
}
