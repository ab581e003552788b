// The Redis store against a real redis-server started by the test: the URL
// parser, the circuit breaker, round trips, every kind of bad value refused
// and counted (flipped bits, truncation, another key's value, unsigned or
// mis-signed without the fleet key), and the failures a fleet meets — Redis
// absent at start, killed mid-run, stalled (SIGSTOP, DEBUG SLEEP) — each
// ending within the timeout and opening the breaker, and the store
// recovering (half-open, then closed) once Redis is back.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "persist_test_support.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/persist/circuit_breaker.hpp"
#include "primcache/persist/entry.hpp"
#include "primcache/persist/redis_store.hpp"
#include "primcache/persist/registration.hpp"
#include "redis_test_support.hpp"

using primcache::breaker_state;
using primcache::circuit_breaker;
using primcache::put_status;
using primcache::redis_store;
using primcache::redis_store_options;
using primcache::test::as_bytes;
using primcache::test::payload_of;
using primcache::test::raw_redis;
using primcache::test::redis_server;
using namespace std::chrono_literals;

namespace {

using clock_type = std::chrono::steady_clock;

redis_store_options options_for(int port, std::string prefix = "t") {
  redis_store_options o;
  o.host = "127.0.0.1";
  o.port = port;
  o.prefix = std::move(prefix);
  o.format.library_version = "test-1";
  o.breaker.failure_threshold = 3;
  o.breaker.cool_down = 200ms;
  return o;
}

std::string as_string(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

template <typename F>
std::chrono::milliseconds time_of(F&& f) {
  const auto t0 = clock_type::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
}

// What a call may take at most when the server fails: connect + command
// timeouts (50 + 50 ms) — with room for a loaded machine and sanitizers,
// still far below what an unbounded wait (a stopped server: for ever; DEBUG
// SLEEP 3: 3 s) would take.
constexpr auto call_bound = 1500ms;

}  // namespace

TEST_CASE("a redis URL is parsed strictly", "[persist][redis][url]") {
  SECTION("host, port, prefix and parameters") {
    redis_store_options o = primcache::parse_redis_url(
        "redis://cache.example-1.internal:6380/fleet:pc/v1?ttl=3600&connect_timeout_ms=20&"
        "command_timeout_ms=30&breaker_failures=5&breaker_cool_down_ms=2500");
    CHECK(o.host == "cache.example-1.internal");
    CHECK(o.port == 6380);
    CHECK(o.prefix == "fleet:pc/v1");
    CHECK(o.ttl_seconds == 3600);
    CHECK(o.connect_timeout == 20ms);
    CHECK(o.command_timeout == 30ms);
    CHECK(o.breaker.failure_threshold == 5);
    CHECK(o.breaker.cool_down == 2500ms);
    CHECK(primcache::parse_redis_url("redis://h:1/p?reply_spin_us=0").reply_spin == 0us);
    CHECK(primcache::parse_redis_url("redis://h:1/p?reply_spin_us=100000").reply_spin == 100ms);
  }
  SECTION("defaults: port 6379, short timeouts, no TTL") {
    redis_store_options o = primcache::parse_redis_url("redis://10.0.0.7/pc");
    CHECK(o.host == "10.0.0.7");
    CHECK(o.port == 6379);
    CHECK(o.prefix == "pc");
    CHECK(o.ttl_seconds == 0);
    CHECK(o.connect_timeout == 50ms);
    CHECK(o.command_timeout == 50ms);
    CHECK(o.reply_spin == 100us);
  }
  SECTION("an IPv6 host in brackets") {
    redis_store_options o = primcache::parse_redis_url("redis://[::1]:7000/pc");
    CHECK(o.host == "::1");
    CHECK(o.port == 7000);
  }
  SECTION("the base options keep what the URL does not set") {
    redis_store_options base;
    base.format.library_version = "v9";
    base.read_only = true;
    redis_store_options o = primcache::parse_redis_url("redis://h:1/p", base);
    CHECK(o.format.library_version == "v9");
    CHECK(o.read_only);
  }
  SECTION("malformed URLs are refused with the reason") {
    struct bad_case {
      const char* url;
      const char* says;
    };
    auto c = GENERATE(values<bad_case>({
        {"", "scheme"},
        {"http://h:1/p", "scheme"},
        {"redis://h:1/p?tls_ca_file=/ca.pem", "needs rediss://"},
        {"redis://h:1", "/PREFIX"},
        {"redis://h:1/", "prefix is empty"},
        {"redis://:1/p", "host is empty"},
        {"redis:///p", "host is empty"},
        {"redis://h:/p", "port is empty"},
        {"redis://h:0/p", "port"},
        {"redis://h:65536/p", "port"},
        {"redis://h:12x/p", "port"},
        {"redis://h_x:1/p", "host has '_'"},
        {"redis://pw@h:1/p", "no ':' before the password"},
        {"redis://:@h:1/p", "password is empty"},
        {"redis://:a%zz@h:1/p", "bad %XX escape"},
        {"redis://:a%2@h:1/p", "bad %XX escape"},
        {"redis://[::1/p", "']'"},
        {"redis://h:1/p*", "prefix has '*'"},
        {"redis://h:1/p q", "prefix has ' '"},
        {"redis://h:1/p?", "query"},
        {"redis://h:1/p?ttl", "NAME=VALUE"},
        {"redis://h:1/p?ttl=-1", "ttl"},
        {"redis://h:1/p?ttl=1&ttl=2", "twice"},
        {"redis://h:1/p?ttl=1&", "ends with '&'"},
        {"redis://h:1/p?command_timeout_ms=0", "command_timeout_ms"},
        {"redis://h:1/p?reply_spin_us=-1", "reply_spin_us"},
        {"redis://h:1/p?reply_spin_us=100001", "reply_spin_us"},
        {"redis://h:1/p?db=2", "unknown parameter db"},
    }));
    INFO(c.url);
    try {
      primcache::parse_redis_url(c.url);
      FAIL("accepted");
    } catch (const primcache::error& e) {
      CHECK(e.code() == primcache::status::invalid_arguments);
      CHECK_THAT(e.message(), Catch::Contains(c.says));
      CHECK_THAT(e.message(), Catch::Contains("HOST[:PORT]/PREFIX"));
    }
  }
}

TEST_CASE("redis_store::open checks its options", "[persist][redis]") {
  redis_store_options o = options_for(6379);
  SECTION("a bad prefix") {
    o.prefix = "a b";
    CHECK_THROWS_WITH(redis_store::open(o), Catch::Contains("prefix has ' '"));
  }
  SECTION("a bad port") {
    o.port = 0;
    CHECK_THROWS_WITH(redis_store::open(o), Catch::Contains("port 0"));
  }
  SECTION("a host that does not resolve") {
    o.host = "no-such-host.invalid";
    try {
      redis_store::open(o);
      FAIL("opened");
    } catch (const primcache::error& e) {
      CHECK(e.code() == primcache::status::not_found);
      CHECK_THAT(e.message(), Catch::Contains("no-such-host.invalid"));
    }
  }
}

TEST_CASE("the circuit breaker opens, probes and closes", "[persist][redis][breaker]") {
  const auto t0 = circuit_breaker::clock::now();
  circuit_breaker b({.failure_threshold = 3, .cool_down = 1000ms});
  CHECK(b.state() == breaker_state::closed);

  SECTION("failures in a row open it; a success in between resets the count") {
    for (int i = 0; i < 2; ++i) {
      auto t = b.try_acquire(t0);
      REQUIRE(t);
      b.report(t, false, t0);
    }
    auto ok = b.try_acquire(t0);
    b.report(ok, true, t0);
    for (int i = 0; i < 2; ++i) {
      auto t = b.try_acquire(t0);
      b.report(t, false, t0);
    }
    CHECK(b.state() == breaker_state::closed);
    auto t = b.try_acquire(t0);
    b.report(t, false, t0);
    CHECK(b.state() == breaker_state::open);
    CHECK(b.opens() == 1);

    // Open: nothing goes until the cool-down has passed.
    CHECK_FALSE(b.try_acquire(t0 + 999ms));
    CHECK(b.rejections() == 1);

    // Then exactly one probe; the others still wait.
    auto probe = b.try_acquire(t0 + 1000ms);
    REQUIRE(probe);
    CHECK(probe.probe());
    CHECK(b.state() == breaker_state::half_open);
    CHECK_FALSE(b.try_acquire(t0 + 1001ms));

    SECTION("a good probe closes it") {
      b.report(probe, true, t0 + 1001ms);
      CHECK(b.state() == breaker_state::closed);
      CHECK(b.try_acquire(t0 + 1001ms));
    }
    SECTION("a failed probe opens it for another cool-down") {
      b.report(probe, false, t0 + 1001ms);
      CHECK(b.state() == breaker_state::open);
      CHECK(b.opens() == 2);
      CHECK_FALSE(b.try_acquire(t0 + 2000ms));
      CHECK(b.try_acquire(t0 + 2001ms));
    }
    SECTION("a dropped probe counts as failed (never stuck half-open)") {
      { auto lost = std::move(probe); }
      CHECK(b.state() == breaker_state::open);
    }
  }
  SECTION("calls let through before it opened do not move it afterwards") {
    auto late_ok = b.try_acquire(t0);
    for (int i = 0; i < 3; ++i) {
      auto t = b.try_acquire(t0);
      b.report(t, false, t0);
    }
    REQUIRE(b.state() == breaker_state::open);
    b.report(late_ok, true, t0);
    CHECK(b.state() == breaker_state::open);
  }
}

TEST_CASE("the redis store round-trips entries", "[persist][redis]") {
  redis_server server;
  // Replies awaited by sleeping at once, and by asking the socket for a while first.
  const std::chrono::microseconds spin = GENERATE(0us, 100us);
  INFO("reply_spin " << spin.count() << " us");
  redis_store_options o = options_for(server.port());
  o.reply_spin = spin;
  auto s = redis_store::open(o);
  raw_redis raw(server.port());

  SECTION("put, get, exists, erase") {
    const auto payload = payload_of("k1", 70000);
    CHECK_FALSE(s->get(as_bytes("k1")));
    auto r = s->put(as_bytes("k1"), payload);
    CHECK(r.status == put_status::stored);
    CHECK(r.message.empty());
    auto got = s->get(as_bytes("k1"));
    REQUIRE(got);
    CHECK(*got == payload);
    CHECK(s->put(as_bytes("k1"), payload_of("other", 10)).status == put_status::exists);
    CHECK(*s->get(as_bytes("k1")) == payload);  // the first one stays

    // Stored under PREFIX:<32 hex digits>, as an entry.
    const std::string key = s->redis_key(as_bytes("k1"));
    CHECK(key.size() == 2 + 32);
    CHECK(key.rfind("t:", 0) == 0);
    CHECK(raw.command({"GET", key}).rfind("PCENTRY\n", 0) == 0);

    auto st = s->stats();
    CHECK(st.hits == 2);
    CHECK(st.misses == 1);
    CHECK(st.writes == 1);
    CHECK(st.bytes_read == 2 * payload.size());
    CHECK(st.bytes_written > payload.size());
    CHECK(st.remote_errors == 0);
    CHECK(st.corrupt_entries == 0);
    CHECK(st.breaker_state == 0);

    CHECK(s->erase(as_bytes("k1")));
    CHECK_FALSE(s->erase(as_bytes("k1")));
    CHECK_FALSE(s->get(as_bytes("k1")));
  }
  SECTION("an empty payload and a binary key") {
    const std::vector<std::byte> key = {std::byte{0}, std::byte{0xff}, std::byte{'\r'},
                                        std::byte{'\n'}};
    CHECK(s->put(key, {}).status == put_status::stored);
    auto got = s->get(key);
    REQUIRE(got);
    CHECK(got->empty());
  }
  SECTION("clear drops its prefix only") {
    for (int i = 0; i < 25; ++i) s->put(as_bytes(std::to_string(i) + "-c"), payload_of("c", 100));
    raw.command({"SET", "other:keep", "1"});
    s->clear();
    CHECK(raw.command({"DBSIZE"}) == "1");
    CHECK(raw.exists("other:keep"));
    CHECK_FALSE(s->get(as_bytes("0-c")));
  }
  SECTION("many keys through clear's SCAN batches") {
    for (int i = 0; i < 2500; ++i) raw.command({"SET", "t:x" + std::to_string(i), "v"});
    s->clear();
    CHECK(raw.command({"DBSIZE"}) == "0");
  }
  SECTION("a TTL when configured") {
    auto o = options_for(server.port());
    o.ttl_seconds = 600;
    auto t = redis_store::open(o);
    t->put(as_bytes("ttl"), payload_of("ttl", 10));
    const long ttl = std::stol(raw.command({"TTL", t->redis_key(as_bytes("ttl"))}));
    CHECK(ttl > 500);
    CHECK(ttl <= 600);
    s->put(as_bytes("no-ttl"), payload_of("x", 10));
    CHECK(raw.command({"TTL", s->redis_key(as_bytes("no-ttl"))}) == "-1");
  }
  SECTION("an entry larger than the capacity is refused") {
    auto o = options_for(server.port());
    o.capacity_mb = 1;
    auto t = redis_store::open(o);
    auto r = t->put(as_bytes("big"), payload_of("big", (1 << 20) + 1));
    CHECK(r.status == put_status::too_large);
    CHECK(t->stats().refusals == 1);
    CHECK_FALSE(raw.exists(t->redis_key(as_bytes("big"))));
    t->set_capacity(4);
    CHECK(t->capacity() == 4);
    CHECK(t->put(as_bytes("big"), payload_of("big", (1 << 20) + 1)).status == put_status::stored);
  }
  SECTION("an entry over 1 GiB is refused whatever the capacity, before it is copied") {
    // Every member's get would fail on such a value (the reply bound).
    auto o = options_for(server.port());
    o.capacity_mb = 8192;
    auto t = redis_store::open(o);
    const primcache::test::untouched_bytes huge((std::size_t{1} << 30) + 1);
    auto r = t->put(as_bytes("big"), huge.span());
    CHECK(r.status == put_status::too_large);
    CHECK_THAT(r.message, Catch::Contains("exceeds the largest entry a store keeps (1024 MB)"));
    CHECK(t->stats().refusals == 1);
    CHECK(t->stats().writes == 0);
    CHECK_FALSE(raw.exists(t->redis_key(as_bytes("big"))));
  }
  SECTION("read-only: reads, never writes") {
    s->put(as_bytes("ro"), payload_of("ro", 100));
    auto o = options_for(server.port());
    o.read_only = true;
    auto t = redis_store::open(o);
    CHECK(t->read_only());
    CHECK(t->describe() == "read-only redis 127.0.0.1:" + std::to_string(server.port()) + "/t");
    CHECK(t->get(as_bytes("ro")));
    CHECK(t->put(as_bytes("new"), payload_of("new", 10)).status == put_status::read_only);
    CHECK(t->stats().refusals == 1);
    CHECK_FALSE(t->erase(as_bytes("ro")));
    CHECK_THROWS_AS(t->clear(), primcache::error);
    CHECK(raw.exists(s->redis_key(as_bytes("ro"))));
    CHECK_FALSE(raw.exists(s->redis_key(as_bytes("new"))));
  }
  SECTION("entries of another library version are not returned") {
    s->put(as_bytes("v"), payload_of("v", 100));
    auto o = options_for(server.port());
    o.format.library_version = "test-2";
    auto t = redis_store::open(o);
    CHECK_FALSE(t->get(as_bytes("v")));
    CHECK(t->stats().corrupt_entries == 1);
  }
  SECTION("shown in control with the remote stats") {
    primcache::control_registry registry;
    auto reg = primcache::register_blob_store(*s, "persistent", registry);
    s->put(as_bytes("c"), payload_of("c", 10));
    s->get(as_bytes("c"));
    auto info = registry.find_cache("persistent").info();
    CHECK(info.stats.hits == 1);
    std::vector<std::string> names;
    for (const auto& [name, value] : info.extra) names.push_back(name);
    for (const char* n : {"remote_errors", "timeouts", "breaker_state", "breaker_opens",
                          "breaker_rejections", "corrupt_entries", "writes"}) {
      INFO(n);
      CHECK(std::find(names.begin(), names.end(), n) != names.end());
    }
  }
}

TEST_CASE("a bad value in redis is refused, counted and deleted", "[persist][redis][corrupt]") {
  redis_server server;
  raw_redis raw(server.port());
  const auto fleet = primcache::fleet_key::from_bytes(as_bytes("0123456789abcdef-fleet")).value();
  auto o = options_for(server.port());
  o.format.key = &fleet;
  auto s = redis_store::open(o);
  const auto payload = payload_of("k", 4096);
  REQUIRE(s->put(as_bytes("k"), payload).status == put_status::stored);
  const std::string key = s->redis_key(as_bytes("k"));
  std::string good = raw.command({"GET", key});

  std::string bad;
  SECTION("flipped bits") {
    bad = good;
    bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 0x10);
  }
  SECTION("truncated") {
    bad = good.substr(0, good.size() - 100);
  }
  SECTION("another key's value") {
    s->put(as_bytes("other"), payload_of("other", 4096));
    bad = raw.command({"GET", s->redis_key(as_bytes("other"))});
  }
  SECTION("forged without the fleet key: unsigned") {
    primcache::entry_format unsigned_fmt{.library_version = "test-1", .key = nullptr};
    auto e = primcache::encode_entry(unsigned_fmt, as_bytes("k"), payload_of("evil", 4096));
    bad = as_string(e);
  }
  SECTION("forged without the fleet key: signed with another") {
    const auto other = primcache::fleet_key::from_bytes(as_bytes("not-the-fleet-key-000")).value();
    primcache::entry_format f{.library_version = "test-1", .key = &other};
    bad = as_string(primcache::encode_entry(f, as_bytes("k"), payload_of("evil", 4096)));
  }
  SECTION("not an entry at all") {
    bad = "hello";
  }
  raw.command({"SET", key, bad});
  CHECK_FALSE(s->get(as_bytes("k")));
  auto st = s->stats();
  CHECK(st.corrupt_entries == 1);
  CHECK(st.misses == 1);
  CHECK(st.hits == 0);
  CHECK_FALSE(raw.exists(key));  // deleted, so the next put can store a good one
  CHECK(s->put(as_bytes("k"), payload).status == put_status::stored);
  CHECK(*s->get(as_bytes("k")) == payload);
}

TEST_CASE("a value of the wrong type is refused, counted and deleted, not a breaker trip",
          "[persist][redis][corrupt]") {
  // A list, a hash or a set under an entry's key: GET answers WRONGTYPE and
  // SET NX finds the key taken, so left there it would make every get miss
  // and every put say `exists` for good — no member could store the entry.
  redis_server server;
  raw_redis raw(server.port());
  const std::string type = GENERATE(as<std::string>{}, "LPUSH", "SADD", "HSET");
  const bool read_only = GENERATE(false, true);
  redis_store_options o = options_for(server.port());
  o.read_only = read_only;
  auto s = redis_store::open(o);
  const std::string key = s->redis_key(as_bytes("k"));
  if (type == "HSET") {
    raw.command({type, key, "field", "x"});
  } else {
    raw.command({type, key, "x"});
  }
  INFO(type << (read_only ? ", read-only" : ""));
  CHECK_FALSE(s->get(as_bytes("k")));
  auto st = s->stats();
  CHECK(st.corrupt_entries == 1);
  CHECK(st.misses == 1);
  CHECK(st.timeouts == 0);
  CHECK(s->breaker() == breaker_state::closed);
  if (read_only) {
    CHECK(raw.exists(key));  // counted, never deleted
    return;
  }
  CHECK_FALSE(raw.exists(key));
  const auto payload = payload_of("k", 1000);
  CHECK(s->put(as_bytes("k"), payload).status == put_status::stored);
  const auto got = s->get(as_bytes("k"));
  REQUIRE(got);
  CHECK(*got == payload);
  CHECK(s->stats().corrupt_entries == 1);
}

TEST_CASE("redis absent at start: calls fail fast and the breaker opens",
          "[persist][redis][failure]") {
  const int port = primcache::test::free_loopback_port();  // nothing listens
  auto s = redis_store::open(options_for(port));
  for (int i = 0; i < 3; ++i) {
    auto t = time_of([&] { CHECK_FALSE(s->get(as_bytes("k"))); });
    CHECK(t < call_bound);
  }
  auto st = s->stats();
  CHECK(st.remote_errors == 3);
  CHECK(st.misses == 3);
  CHECK(s->breaker() == breaker_state::open);
  CHECK(st.breaker_opens == 1);

  // Open: no call reaches the network.
  auto r = s->put(as_bytes("k"), payload_of("k", 100));
  CHECK(r.status == put_status::failed);
  CHECK_THAT(r.message, Catch::Contains("circuit breaker is open"));
  CHECK_FALSE(s->erase(as_bytes("k")));
  CHECK_FALSE(s->get(as_bytes("k")));
  st = s->stats();
  CHECK(st.remote_errors == 3);
  CHECK(st.breaker_rejections == 3);
  CHECK_THROWS_WITH(s->clear(), Catch::Contains("circuit breaker is open"));
}

TEST_CASE("redis killed mid-run: the store falls back within the timeout",
          "[persist][redis][failure]") {
  redis_server server;
  auto s = redis_store::open(options_for(server.port()));
  REQUIRE(s->put(as_bytes("k"), payload_of("k", 1000)).status == put_status::stored);
  REQUIRE(s->get(as_bytes("k")));
  server.kill();
  for (int i = 0; i < 3; ++i) {
    auto t = time_of([&] { CHECK_FALSE(s->get(as_bytes("k"))); });
    CHECK(t < call_bound);
  }
  CHECK(s->breaker() == breaker_state::open);
  auto r = s->put(as_bytes("k2"), payload_of("k2", 1000));
  CHECK(r.status == put_status::failed);
}

TEST_CASE("redis stalled: calls time out and the breaker opens", "[persist][redis][failure]") {
  redis_server server;
  auto s = redis_store::open(options_for(server.port()));
  REQUIRE(s->put(as_bytes("k"), payload_of("k", 1000)).status == put_status::stored);
  REQUIRE(s->get(as_bytes("k")));  // a pooled connection, then a stall

  std::thread sleeper;
  SECTION("SIGSTOP") {
    server.pause();
  }
  SECTION("DEBUG SLEEP from another connection") {
    sleeper = std::thread([port = server.port()] {
      raw_redis other(port);
      other.command({"DEBUG", "SLEEP", "3"});
    });
    std::this_thread::sleep_for(200ms);  // let it start sleeping
  }
  for (int i = 0; i < 3; ++i) {
    auto t = time_of([&] { CHECK_FALSE(s->get(as_bytes("k"))); });
    CHECK(t < call_bound);
  }
  auto st = s->stats();
  CHECK(st.timeouts == 3);
  CHECK(st.remote_errors == 3);
  CHECK(s->breaker() == breaker_state::open);
  auto t = time_of(
      [&] { CHECK(s->put(as_bytes("k3"), payload_of("k3", 10)).status == put_status::failed); });
  CHECK(t < 100ms);  // open: not even a connection attempt
  server.resume();
  if (sleeper.joinable()) sleeper.join();
}

TEST_CASE("a reply spin longer than the command timeout still ends the call by its deadline",
          "[persist][redis][failure]") {
  redis_server server;
  redis_store_options o = options_for(server.port());
  o.reply_spin = 10s;  // more than any call may take: the deadline must win
  auto s = redis_store::open(o);
  REQUIRE(s->put(as_bytes("k"), payload_of("k", 1000)).status == put_status::stored);
  REQUIRE(s->get(as_bytes("k")));  // answered within the spin
  server.pause();
  auto t = time_of([&] { CHECK_FALSE(s->get(as_bytes("k"))); });
  CHECK(t < call_bound);
  CHECK(s->stats().timeouts == 1);
  server.resume();
}

TEST_CASE("redis back: the store probes and recovers", "[persist][redis][failure]") {
  redis_server server;
  auto s = redis_store::open(options_for(server.port()));
  REQUIRE(s->put(as_bytes("k"), payload_of("k", 1000)).status == put_status::stored);

  SECTION("after a restart") {
    server.kill();
    for (int i = 0; i < 3; ++i) s->get(as_bytes("k"));
    REQUIRE(s->breaker() == breaker_state::open);
    server.restart();  // empty: persistence is off
  }
  SECTION("after a stall") {
    server.pause();
    for (int i = 0; i < 3; ++i) s->get(as_bytes("k"));
    REQUIRE(s->breaker() == breaker_state::open);
    server.resume();
  }
  // Within the cool-down nothing is asked, even though Redis is back.
  CHECK(s->put(as_bytes("k2"), payload_of("k2", 10)).status == put_status::failed);
  std::this_thread::sleep_for(250ms);  // the cool-down is 200 ms
  // The probe goes through (a stale pooled connection is replaced) and closes it.
  auto r = s->put(as_bytes("k2"), payload_of("k2", 10));
  CHECK(r.status == put_status::stored);
  INFO(r.message);
  CHECK(s->breaker() == breaker_state::closed);
  CHECK(*s->get(as_bytes("k2")) == payload_of("k2", 10));
  CHECK(s->stats().breaker_opens == 1);
}

TEST_CASE("a failed probe reopens the breaker", "[persist][redis][failure]") {
  const int port = primcache::test::free_loopback_port();
  auto s = redis_store::open(options_for(port));
  for (int i = 0; i < 3; ++i) s->get(as_bytes("k"));
  REQUIRE(s->breaker() == breaker_state::open);
  std::this_thread::sleep_for(250ms);
  CHECK_FALSE(s->get(as_bytes("k")));  // the probe, refused
  CHECK(s->breaker() == breaker_state::open);
  auto st = s->stats();
  CHECK(st.breaker_opens == 2);
  CHECK(st.remote_errors == 4);
}
