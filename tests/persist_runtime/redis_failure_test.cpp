// The runtime with a Redis persistent cache when Redis fails (issue 10): a
// server absent at start, killed mid-run, stopped (SIGSTOP: a stalled
// connection) or busy (DEBUG SLEEP from another client). In each case every
// creation returns a working primitive — compiled, since the store misses
// within its timeouts — the failures are counted, the circuit breaker
// opens (seen through the store's stats and through control), and once
// Redis is back the tier recovers: the breaker closes, fresh compilations
// are written to Redis again and later creations are served from it.
//
// No timing is asserted. A creation that returns while the server is still
// stopped, or a call counted as a timeout, shows the store did not wait for
// the server; loops that wait for a recovery are bounded only to turn a
// hang into a failure.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "cases.hpp"
#include "jit/compiler.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/persist/blob_store.hpp"
#include "primcache/persist/circuit_breaker.hpp"
#include "primcache/runtime/persistent_cache.hpp"
#include "primcache/runtime/runtime.hpp"
#include "redis_test_support.hpp"

using namespace primcache;
using namespace primcache::test;
using namespace std::chrono_literals;

namespace {

// Every creation the store does not serve compiles on the creating thread
// (tiered JIT mode would hand out a generic kernel and compile in the
// background); the runtime reads the variable on first use, after this.
[[maybe_unused]] const int sync_mode = ::setenv("PRIMCACHE_JIT_MODE", "sync", 1);

std::uint64_t compiled() {
  return cpu_internal::objects_compiled();
}

// A cool-down of 1 s, so recovery is quick; timeouts of 500 ms each, far above
// a loopback round trip even on a loaded machine under a sanitizer.
std::string url_for(int port, int breaker_failures = 3) {
  return "redis://127.0.0.1:" + std::to_string(port) +
         "/rt?connect_timeout_ms=500&command_timeout_ms=500&breaker_failures=" +
         std::to_string(breaker_failures) + "&breaker_cool_down_ms=1000";
}

std::uint64_t control_extra(const std::string& name) {
  for (const auto& [k, v] : control().find_cache("persistent").extra_stats()) {
    if (k == name) return v;
  }
  FAIL("control's persistent cache has no extra stat " << name);
  return 0;
}

constexpr std::uint64_t breaker_closed = static_cast<std::uint64_t>(breaker_state::closed);
constexpr std::uint64_t breaker_open = static_cast<std::uint64_t>(breaker_state::open);

std::uint64_t redis_keys(int port) {
  raw_redis raw(port);
  return std::stoull(raw.command({"DBSIZE"}));
}

// Creates and runs a primitive no one has created before in this process
// (a matmul of a new size): the store is asked, and misses, every time.
std::uint64_t next_size = 100;
std::vector<std::uint8_t> create_fresh(a_case* out = nullptr) {
  a_case c = matmul_case(static_cast<std::int64_t>(next_size++));
  const std::uint64_t before = compiled();
  const std::vector<std::uint8_t> bits = run(primitive(c.make_pd()), c);
  CHECK(compiled() > before);  // compiled: the store had nothing to give
  if (out) *out = std::move(c);
  return bits;
}

// Creates fresh primitives until the breaker opens (each creation fails one
// or two calls: its GET, and its write). Bounded by a number of creations.
void create_until_open(blob_store& store) {
  for (int i = 0; i < 20 && store.stats().breaker_state != breaker_open; ++i) {
    create_fresh();
    flush_persistent_cache_writes();
  }
  REQUIRE(store.stats().breaker_state == breaker_open);
}

// Redis is back: creates fresh primitives, a little apart so the cool-down
// passes, until the breaker has closed and a compilation has been written
// to Redis again. Returns the case last written.
a_case recover(blob_store& store, int port) {
  const std::uint64_t keys_before = redis_keys(port);
  const auto end = std::chrono::steady_clock::now() + 120s;
  a_case last;
  while (std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(100ms);
    create_fresh(&last);
    flush_persistent_cache_writes();
    if (store.stats().breaker_state == breaker_closed && redis_keys(port) > keys_before)
      return last;
  }
  FAIL("the Redis tier did not recover within 120 s of Redis coming back");
  return last;
}

// The tier serves again: `c`, written after the recovery, comes from Redis.
void served_from_redis(const a_case& c, const std::vector<std::uint8_t>& want) {
  empty_primitive_cache();
  const std::uint64_t before = compiled();
  const std::uint64_t hits = get_persistent_cache_stats().hits;
  CHECK(run(primitive(c.make_pd()), c) == want);
  CHECK(compiled() == before);
  CHECK(get_persistent_cache_stats().hits == hits + 1);
}

}  // namespace

TEST_CASE("redis absent at start: creations compile, the breaker opens, redis up recovers it",
          "[persistent][redis][failure]") {
  const int port = free_loopback_port();  // nothing listens there yet
  detach_at_end detach;
  set_persistent_cache(open_persistent_cache("", 64, url_for(port)));
  std::shared_ptr<blob_store> store = get_persistent_cache();
  REQUIRE(store != nullptr);

  create_until_open(*store);
  blob_store_stats st = store->stats();
  CHECK(st.remote_errors >= 3);
  CHECK(st.breaker_opens >= 1);
  CHECK(control_extra("breaker_state") == breaker_open);
  CHECK(control_extra("remote_errors") >= 3);
  const persistent_cache_stats rt = get_persistent_cache_stats();
  CHECK(rt.misses >= 1);
  CHECK(rt.hits == 0);
  CHECK(rt.writes_failed >= 1);  // written nowhere: counted

  // Open: creations still compile, and the store is not asked (or, once the
  // cool-down has passed, asked by one probe, whose failure reopens it).
  create_fresh();
  flush_persistent_cache_writes();
  const blob_store_stats after = store->stats();
  CHECK(
      (after.breaker_rejections > st.breaker_rejections || after.breaker_opens > st.breaker_opens));

  redis_server server(port);
  const a_case last = recover(*store, port);
  CHECK(control_extra("breaker_state") == breaker_closed);
  served_from_redis(last, run(primitive(last.make_pd()), last));
}

TEST_CASE("redis killed mid-run: creations fall back to compiling; redis back recovers the tier",
          "[persistent][redis][failure]") {
  redis_server server;
  detach_at_end detach;
  set_persistent_cache(open_persistent_cache("", 64, url_for(server.port())));
  std::shared_ptr<blob_store> store = get_persistent_cache();

  a_case warm;
  const std::vector<std::uint8_t> want = create_fresh(&warm);
  flush_persistent_cache_writes();
  REQUIRE(redis_keys(server.port()) == 1);
  served_from_redis(warm, want);

  server.kill();
  // The entry is gone with the server: compiled again, the same bits.
  empty_primitive_cache();
  const std::uint64_t before = compiled();
  CHECK(run(primitive(warm.make_pd()), warm) == want);
  CHECK(compiled() > before);
  create_until_open(*store);
  CHECK(store->stats().remote_errors >= 3);
  CHECK(control_extra("breaker_state") == breaker_open);

  server.restart();  // empty, on the same port
  const a_case last = recover(*store, server.port());
  served_from_redis(last, run(primitive(last.make_pd()), last));
  CHECK(control_extra("breaker_state") == breaker_closed);
}

TEST_CASE(
    "redis stalled (SIGSTOP): creations return while it is stopped; resumed, the tier recovers",
    "[persistent][redis][failure]") {
  redis_server server;
  detach_at_end detach;
  set_persistent_cache(open_persistent_cache("", 64, url_for(server.port())));
  std::shared_ptr<blob_store> store = get_persistent_cache();
  a_case warm;
  const std::vector<std::uint8_t> want = create_fresh(&warm);
  flush_persistent_cache_writes();
  REQUIRE(redis_keys(server.port()) == 1);

  server.pause();
  // Every creation below returns while the server is stopped: none waited for it.
  empty_primitive_cache();
  const std::uint64_t before = compiled();
  CHECK(run(primitive(warm.make_pd()), warm) == want);
  CHECK(compiled() > before);
  create_until_open(*store);
  const blob_store_stats st = store->stats();
  CHECK(st.timeouts >= 1);
  CHECK(st.timeouts <= st.remote_errors);
  CHECK(control_extra("timeouts") == st.timeouts);
  CHECK(control_extra("breaker_state") == breaker_open);
  server.resume();

  const a_case last = recover(*store, server.port());
  served_from_redis(last, run(primitive(last.make_pd()), last));
}

TEST_CASE("redis busy (DEBUG SLEEP): creations time out of it and compile; then the tier recovers",
          "[persistent][redis][failure]") {
  redis_server server;
  detach_at_end detach;
  // Two failures open the breaker: 2 x (500 + 500 ms) fit in the sleep.
  set_persistent_cache(open_persistent_cache("", 64, url_for(server.port(), 2)));
  std::shared_ptr<blob_store> store = get_persistent_cache();
  create_fresh();
  flush_persistent_cache_writes();
  REQUIRE(redis_keys(server.port()) == 1);

  std::thread sleeper([port = server.port()] {
    raw_redis other(port, 60);
    other.command({"DEBUG", "SLEEP", "15"});
  });
  std::this_thread::sleep_for(300ms);  // let it start sleeping (if not, the loop goes on)
  create_until_open(*store);
  CHECK(store->stats().timeouts >= 1);
  CHECK(control_extra("breaker_state") == breaker_open);
  sleeper.join();

  const a_case last = recover(*store, server.port());
  served_from_redis(last, run(primitive(last.make_pd()), last));
}
