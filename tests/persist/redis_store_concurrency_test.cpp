// The Redis and tiered stores under contention, against a real
// redis-server: threads sharing one store object (its connection pool, its
// breaker, its counters), while Redis is up, while it is stopped and
// continued, and while it is killed and restarted; and threads on one
// tiered store with its background writer. Every value read is exactly the
// one written for its key (no torn or crossed replies), and no call takes
// longer than its timeouts allow.
//
// Catch2's assertions are not thread-safe: workers record into their own
// tallies, the main thread asserts after joining them.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "persist_test_support.hpp"
#include "primcache/persist/directory_store.hpp"
#include "primcache/persist/redis_store.hpp"
#include "primcache/persist/tiered_store.hpp"
#include "redis_test_support.hpp"

using primcache::blob_store;
using primcache::put_status;
using primcache::redis_store;
using primcache::test::as_bytes;
using primcache::test::payload_of;
using primcache::test::redis_server;
using primcache::test::temp_dir;
using namespace std::chrono_literals;

namespace {

constexpr int key_count = 32;
constexpr int thread_count = 8;

std::string key_name(int i) {
  return "key-" + std::to_string(i);
}
std::size_t size_of(int i) {
  return 1000 + static_cast<std::size_t>(i) * 700;
}

struct tally {
  int hits = 0;
  int torn = 0;      // a read that returned other bytes than the key's
  int bad_puts = 0;  // a put that was neither stored, exists nor failed
  std::chrono::nanoseconds slowest{0};
};

// 60% get, 25% put, 5% size(), 10% erase over the shared keys.
tally work(blob_store& s, unsigned seed, int ops) {
  tally t;
  std::minstd_rand rng(seed);
  for (int n = 0; n < ops; ++n) {
    const int i = static_cast<int>(rng() % key_count);
    const std::string k = key_name(i);
    const unsigned op = rng() % 10;
    const auto t0 = std::chrono::steady_clock::now();
    if (op < 6) {
      if (auto got = s.get(as_bytes(k))) {
        ++t.hits;
        if (*got != payload_of(k, size_of(i))) ++t.torn;
      }
    } else if (op < 8 || (op == 8 && rng() % 2 == 0)) {
      auto r = s.put(as_bytes(k), payload_of(k, size_of(i)));
      if (r.status != put_status::stored && r.status != put_status::exists &&
          r.status != put_status::failed) {
        ++t.bad_puts;
      }
    } else if (op == 8) {
      s.size();  // walks (its own puts make the figure stale) while others write
    } else {
      s.erase(as_bytes(k));
    }
    t.slowest = std::max(t.slowest, std::chrono::steady_clock::now() - t0);
  }
  return t;
}

tally run_threads(blob_store& s, int ops, unsigned seed) {
  std::vector<tally> tallies(thread_count);
  std::vector<std::thread> threads;
  for (int w = 0; w < thread_count; ++w) {
    threads.emplace_back([&, w] { tallies[w] = work(s, seed + w, ops); });
  }
  for (auto& th : threads) th.join();
  tally sum;
  for (const tally& t : tallies) {
    sum.hits += t.hits;
    sum.torn += t.torn;
    sum.bad_puts += t.bad_puts;
    sum.slowest = std::max(sum.slowest, t.slowest);
  }
  return sum;
}

primcache::redis_store_options options_for(int port) {
  primcache::redis_store_options o;
  o.port = port;
  o.prefix = "conc";
  o.format.library_version = "concurrency-test";
  o.max_idle_connections = 4;  // fewer than the threads: connections come and go
  o.breaker.cool_down = 50ms;
  // Generous timeouts: a loaded machine under ThreadSanitizer must not fail
  // healthy calls; the disruptions below still end every call in time.
  o.connect_timeout = 200ms;
  o.command_timeout = 300ms;
  return o;
}

// connect + command timeouts, plus scheduling slack.
constexpr auto call_bound = 2s;

}  // namespace

TEST_CASE("threads share one redis store", "[persist][redis][concurrency]") {
  redis_server server;
  auto s = redis_store::open(options_for(server.port()));
  tally t = run_threads(*s, 300, 1);
  CHECK(t.torn == 0);
  CHECK(t.bad_puts == 0);
  CHECK(t.hits > 0);
  auto st = s->stats();
  CHECK(st.remote_errors == 0);
  CHECK(st.corrupt_entries == 0);
  CHECK(st.hits == static_cast<std::uint64_t>(t.hits));
  // Quiet now: size() is what the server holds under the prefix.
  primcache::test::raw_redis raw(server.port());
  std::uint64_t held = 0;
  for (int i = 0; i < key_count; ++i) {
    held += std::stoull(raw.command({"STRLEN", s->redis_key(as_bytes(key_name(i)))}));
  }
  CHECK(held > 0);
  s->put(as_bytes("last"), payload_of("last", 10));
  held += std::stoull(raw.command({"STRLEN", s->redis_key(as_bytes("last"))}));
  CHECK(s->size() == held);
}

TEST_CASE("threads on one redis store while redis stalls, dies and comes back",
          "[persist][redis][concurrency]") {
  redis_server server;
  auto s = redis_store::open(options_for(server.port()));
  std::atomic<bool> done{false};
  std::thread disrupt([&] {
    for (int round = 0; round < 2 && !done; ++round) {
      std::this_thread::sleep_for(150ms);
      server.pause();
      std::this_thread::sleep_for(400ms);
      server.resume();
      std::this_thread::sleep_for(150ms);
      server.kill();
      std::this_thread::sleep_for(300ms);
      server.restart();
    }
  });
  tally t;
  const auto end = std::chrono::steady_clock::now() + 3s;
  unsigned seed = 100;
  while (std::chrono::steady_clock::now() < end) {
    tally r = run_threads(*s, 50, seed += thread_count);
    t.torn += r.torn;
    t.bad_puts += r.bad_puts;
    t.slowest = std::max(t.slowest, r.slowest);
  }
  done = true;
  disrupt.join();
  CHECK(t.torn == 0);
  CHECK(t.bad_puts == 0);
  CHECK(t.slowest < call_bound);
  auto st = s->stats();
  CHECK(st.remote_errors > 0);
  CHECK(st.corrupt_entries == 0);

  // Up again: after the cool-down the store recovers.
  std::this_thread::sleep_for(100ms);
  // The probe (or, if the breaker is closed, a call that may meet a pooled
  // connection to the killed server and retries on a fresh one).
  auto r = s->put(as_bytes("after"), payload_of("after", 100));
  INFO(r.message);
  CHECK(r.status == put_status::stored);
  CHECK(s->breaker() == primcache::breaker_state::closed);
}

TEST_CASE("threads share one tiered store", "[persist][tiered][concurrency]") {
  redis_server server;
  temp_dir dir;
  primcache::directory_store_options d;
  d.path = dir.path();
  d.capacity_mb = 1;
  d.format.library_version = "concurrency-test";
  auto t = primcache::tiered_store::open(primcache::directory_store::open(d),
                                         redis_store::open(options_for(server.port())));
  tally r = run_threads(*t, 200, 7);
  t->flush();
  CHECK(r.torn == 0);
  CHECK(r.bad_puts == 0);
  auto st = t->stats();
  CHECK(st.corrupt_entries == 0);
  CHECK(st.remote_errors == 0);
  CHECK(t->size() <= (1u << 20));
}
