// The sharded Redis store under contention, against three real
// redis-servers: threads sharing one store (its shards' pools, breakers and
// counters) while control reads its per-shard stats, with every server up,
// and while one shard is stopped, continued, killed and restarted; and
// threads sharing one TLS store (one OpenSSL context, a TLS session per
// pooled connection). Every
// value read is exactly the one written for its key, no call takes longer
// than its shard's timeouts allow, and the shards that were never disturbed
// see no error at all.
//
// Catch2's assertions are not thread-safe: workers record into their own
// tallies, the main thread asserts after joining them.
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "persist_test_support.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/persist/registration.hpp"
#include "primcache/persist/sharded_redis_store.hpp"
#include "redis_test_support.hpp"
#include "tls_test_support.hpp"

using primcache::put_status;
using primcache::sharded_redis_store;
using primcache::test::as_bytes;
using primcache::test::payload_of;
using primcache::test::redis_server;
using namespace std::chrono_literals;

namespace {

constexpr int key_count = 48;
constexpr int thread_count = 8;

std::string key_name(int i) {
  return "key-" + std::to_string(i);
}
std::size_t size_of(int i) {
  return 1000 + static_cast<std::size_t>(i) * 500;
}

struct tally {
  int hits = 0;
  int torn = 0;      // a read that returned other bytes than the key's
  int bad_puts = 0;  // a put that was neither stored, exists nor failed
  std::chrono::nanoseconds slowest{0};
};

// 60% get, 25% put, 5% size(), 10% erase over the shared keys.
tally work(sharded_redis_store& s, unsigned seed, int ops) {
  tally t;
  std::minstd_rand rng(seed);
  for (int n = 0; n < ops; ++n) {
    const int i = static_cast<int>(rng() % key_count);
    const std::string k = key_name(i);
    const unsigned op = rng() % 20;
    const auto t0 = std::chrono::steady_clock::now();
    if (op < 12) {
      if (auto got = s.get(as_bytes(k))) {
        ++t.hits;
        if (*got != payload_of(k, size_of(i))) ++t.torn;
      }
    } else if (op < 17) {
      auto r = s.put(as_bytes(k), payload_of(k, size_of(i)));
      if (r.status != put_status::stored && r.status != put_status::exists &&
          r.status != put_status::failed) {
        ++t.bad_puts;
      }
    } else if (op == 17) {
      s.size();  // walks every shard while others write
    } else {
      s.erase(as_bytes(k));
    }
    t.slowest = std::max(t.slowest, std::chrono::steady_clock::now() - t0);
  }
  return t;
}

tally run_threads(sharded_redis_store& s, int ops, unsigned seed) {
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

std::vector<primcache::redis_store_options> options_for(const std::array<redis_server, 3>& s) {
  std::vector<primcache::redis_store_options> out;
  for (const redis_server& server : s) {
    primcache::redis_store_options o;
    o.port = server.port();
    o.prefix = "conc";
    o.format.library_version = "concurrency-test";
    o.max_idle_connections = 4;  // fewer than the threads: connections come and go
    o.breaker.cool_down = 50ms;
    // Generous timeouts: a loaded machine under ThreadSanitizer must not
    // fail healthy calls; the disruptions still end every call in time.
    o.connect_timeout = 200ms;
    o.command_timeout = 300ms;
    out.push_back(o);
  }
  return out;
}

// connect + command timeouts, plus scheduling slack.
constexpr auto call_bound = 2s;

// Reads what control shows of the store (every shard's stats) until told to stop.
class control_reader {
 public:
  explicit control_reader(sharded_redis_store& s)
      : reg_(primcache::register_blob_store(s, "persistent", registry_)), thread_([this] {
          while (!stop_) {
            auto info = registry_.find_cache("persistent").info();
            if (!info.extra.empty()) ++reads_;
            std::this_thread::sleep_for(1ms);
          }
        }) {}
  ~control_reader() {
    stop_ = true;
    thread_.join();
  }
  int reads() const { return reads_; }

 private:
  primcache::control_registry registry_;
  primcache::blob_store_registration reg_;
  std::atomic<bool> stop_{false};
  std::atomic<int> reads_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE("threads share one sharded redis store", "[persist][redis][shard][concurrency]") {
  std::array<redis_server, 3> servers;
  auto s = sharded_redis_store::open(options_for(servers));
  tally t;
  {
    control_reader reader(*s);
    t = run_threads(*s, 200, 1);
    CHECK(reader.reads() > 0);
  }
  CHECK(t.torn == 0);
  CHECK(t.bad_puts == 0);
  CHECK(t.hits > 0);
  auto st = s->stats();
  CHECK(st.remote_errors == 0);
  CHECK(st.corrupt_entries == 0);
  CHECK(st.hits == static_cast<std::uint64_t>(t.hits));
  for (const auto& sh : s->shards()) CHECK(sh.stats.writes > 0);
}

TEST_CASE("threads on a sharded store while one shard stalls, dies and comes back",
          "[persist][redis][shard][concurrency]") {
  std::array<redis_server, 3> servers;
  auto s = sharded_redis_store::open(options_for(servers));
  redis_server& victim = servers[1];
  std::atomic<bool> done{false};
  std::thread disrupt([&] {
    for (int round = 0; round < 2 && !done; ++round) {
      std::this_thread::sleep_for(150ms);
      victim.pause();
      std::this_thread::sleep_for(400ms);
      victim.resume();
      std::this_thread::sleep_for(150ms);
      victim.kill();
      std::this_thread::sleep_for(300ms);
      victim.restart();
    }
  });
  tally t;
  {
    control_reader reader(*s);
    const auto end = std::chrono::steady_clock::now() + 3s;
    unsigned seed = 100;
    while (std::chrono::steady_clock::now() < end) {
      tally r = run_threads(*s, 40, seed += thread_count);
      t.hits += r.hits;
      t.torn += r.torn;
      t.bad_puts += r.bad_puts;
      t.slowest = std::max(t.slowest, r.slowest);
    }
    done = true;
    disrupt.join();
  }
  CHECK(t.torn == 0);
  CHECK(t.bad_puts == 0);
  CHECK(t.hits > 0);
  CHECK(t.slowest < call_bound);
  auto shards = s->shards();
  CHECK(shards[1].stats.remote_errors > 0);
  // The undisturbed shards never failed a call.
  CHECK(shards[0].stats.remote_errors == 0);
  CHECK(shards[2].stats.remote_errors == 0);
  CHECK(shards[0].stats.breaker_opens == 0);
  CHECK(shards[2].stats.breaker_opens == 0);
  CHECK(s->stats().corrupt_entries == 0);

  // Up again: after the cool-down every shard serves.
  std::this_thread::sleep_for(100ms);
  for (int i = 0; i < key_count; ++i) {
    const std::string k = key_name(i);
    auto r = s->put(as_bytes(k), payload_of(k, size_of(i)));
    INFO(r.message);
    CHECK((r.status == put_status::stored || r.status == put_status::exists));
  }
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(s->shard(i).breaker() == primcache::breaker_state::closed);
}

TEST_CASE("threads share one TLS redis store", "[persist][redis][tls][concurrency]") {
  primcache::test::test_pki pki;
  primcache::test::tls_server t(pki, "no");
  primcache::redis_store_options o;
  o.port = t.tls_port;
  o.prefix = "conc";
  o.tls = true;
  o.tls_ca_file = pki.file("ca.crt");
  o.format.library_version = "concurrency-test";
  o.max_idle_connections = 4;  // fewer than the threads: handshakes come and go
  o.connect_timeout = 500ms;
  o.command_timeout = 500ms;
  std::vector<primcache::redis_store_options> one{o};
  // A sharded store of one shard: the same worker drives it.
  auto s = sharded_redis_store::open(one);
  tally r = run_threads(*s, 150, 11);
  CHECK(r.torn == 0);
  CHECK(r.bad_puts == 0);
  CHECK(r.hits > 0);
  CHECK(s->stats().remote_errors == 0);
  CHECK(s->stats().corrupt_entries == 0);
}
