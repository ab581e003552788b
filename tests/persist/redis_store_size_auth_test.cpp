// The Redis store's size() — the bytes under its prefix, by a bounded,
// resumable SCAN walk, refreshed after its own writes, the last figure
// kept when the server fails — and AUTH: a password (and an ACL user) in
// the URL, sent on every connection, never shown in a message; a wrong or
// missing password is an error reply that does not trip the breaker.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "persist_test_support.hpp"
#include "primcache/base/error.hpp"
#include "primcache/persist/circuit_breaker.hpp"
#include "primcache/persist/redis_store.hpp"
#include "redis_test_support.hpp"

using primcache::breaker_state;
using primcache::put_status;
using primcache::redis_store;
using primcache::redis_store_options;
using primcache::test::as_bytes;
using primcache::test::payload_of;
using primcache::test::raw_redis;
using primcache::test::redis_server;
using namespace std::chrono_literals;

namespace {

redis_store_options options_for(int port, std::string prefix = "t") {
  redis_store_options o;
  o.host = "127.0.0.1";
  o.port = port;
  o.prefix = std::move(prefix);
  o.format.library_version = "test-1";
  o.breaker.failure_threshold = 3;
  o.breaker.cool_down = 200ms;
  // Generous: a loaded machine must not turn a healthy server into misses.
  o.connect_timeout = 2000ms;
  o.command_timeout = 2000ms;
  return o;
}

std::uint64_t strlen_of(raw_redis& raw, const std::string& key) {
  return std::stoull(raw.command({"STRLEN", key}));
}

}  // namespace

TEST_CASE("redis_store::size counts the bytes under its prefix", "[persist][redis][size]") {
  redis_server server;
  raw_redis raw(server.port());
  auto s = redis_store::open(options_for(server.port()));
  CHECK(s->size() == 0);
  CHECK(s->stats().bytes == 0);

  SECTION("its own puts, erases and clear, at once") {
    REQUIRE(s->put(as_bytes("a"), payload_of("a", 1000)).status == put_status::stored);
    REQUIRE(s->put(as_bytes("b"), payload_of("b", 70000)).status == put_status::stored);
    const std::uint64_t a = strlen_of(raw, s->redis_key(as_bytes("a")));
    const std::uint64_t b = strlen_of(raw, s->redis_key(as_bytes("b")));
    CHECK(a > 1000);  // the entry: header, key, checksum and payload
    CHECK(s->size() == a + b);
    CHECK(s->stats().bytes == a + b);
    CHECK(s->stats().bytes_written == a + b);
    CHECK(s->erase(as_bytes("a")));
    CHECK(s->size() == b);
    s->clear();
    CHECK(s->size() == 0);
  }
  SECTION("what other writers put, only under PREFIX:<32 hex>, only strings") {
    auto other = redis_store::open(options_for(server.port()));
    REQUIRE(other->put(as_bytes("o"), payload_of("o", 500)).status == put_status::stored);
    const std::uint64_t o = strlen_of(raw, other->redis_key(as_bytes("o")));
    raw.command({"SET", "t:0123456789abcdef0123456789abcdef", "12345"});      // counted
    raw.command({"SET", "t:short", "123456789"});                             // not an entry's key
    raw.command({"SET", "u:0123456789abcdef0123456789abcdef", "123456789"});  // another prefix
    raw.command({"SET", "t:0123456789abcdef0123456789abcdef:x", "123"});      // a longer prefix's
    raw.command({"RPUSH", "t:fedcba9876543210fedcba9876543210", "123"});      // not a string
    auto o2 = options_for(server.port());
    o2.size_refresh = 0ms;  // walks on every call
    CHECK(redis_store::open(o2)->size() == o + 5);
  }
  SECTION("the figure is kept for size_refresh unless this store writes") {
    auto o = options_for(server.port());
    o.size_refresh = std::chrono::hours(1);
    auto cached = redis_store::open(o);
    REQUIRE(cached->put(as_bytes("a"), payload_of("a", 100)).status == put_status::stored);
    const std::uint64_t a = cached->size();
    CHECK(a == strlen_of(raw, cached->redis_key(as_bytes("a"))));
    raw.command({"SET", "t:0123456789abcdef0123456789abcdef", "12345"});
    CHECK(cached->size() == a);  // not walked again: fresh, and nothing written here
    REQUIRE(cached->put(as_bytes("b"), payload_of("b", 100)).status == put_status::stored);
    const std::uint64_t b = strlen_of(raw, cached->redis_key(as_bytes("b")));
    CHECK(cached->size() == a + b + 5);  // its own put: walked again, the other key seen too
  }
  SECTION("a walk longer than its budget is resumed by the next calls") {
    // 20,000 keys: SCAN batches of 1000 cannot all fit in a 1 ms budget.
    raw.command({"EVAL",
                 "for i = 1, 20000 do redis.call('SET', string.format('t:%032x', i), 'xyz') end",
                 "0"});
    auto o = options_for(server.port());
    o.size_walk_budget = 1ms;
    o.size_refresh = 0ms;
    auto slow = redis_store::open(o);
    std::uint64_t first = slow->size();
    CHECK(first == 0);  // no walk has completed yet: the last figure (none)
    int calls = 1;
    std::uint64_t got = first;
    while (got != 60000 && calls < 10000) {
      got = slow->size();
      ++calls;
    }
    CHECK(got == 60000);
    CHECK(calls > 1);
  }
  SECTION("a failed walk keeps the last figure") {
    auto o = options_for(server.port());
    o.size_refresh = 0ms;  // walks on every call
    auto z = redis_store::open(o);
    REQUIRE(z->put(as_bytes("a"), payload_of("a", 100)).status == put_status::stored);
    const std::uint64_t a = z->size();
    REQUIRE(a > 0);
    server.kill();
    CHECK(z->size() == a);  // the walk fails (refused), then the breaker skips it
    CHECK(z->size() == a);
    CHECK(z->size() == a);
    CHECK(z->size() == a);
    CHECK(z->stats().bytes == a);
    CHECK(z->stats().remote_errors == 3);
    CHECK(z->breaker() == breaker_state::open);
  }
}

TEST_CASE("redis AUTH: a password in the URL is sent and never shown", "[persist][redis][auth]") {
  const std::string password = "s3cret-Pa%ss";  // '%' travels as %25 in the URL
  redis_server server(0, {"--requirepass", password});

  SECTION("the right password: the store works") {
    auto o = primcache::parse_redis_url(
        "redis://:s3cret-Pa%25ss@127.0.0.1:" + std::to_string(server.port()) + "/t");
    CHECK(o.password == password);
    CHECK(o.username.empty());
    o.format.library_version = "test-1";
    auto s = redis_store::open(o);
    CHECK(s->describe().find("s3cret") == std::string::npos);
    REQUIRE(s->put(as_bytes("k"), payload_of("k", 100)).status == put_status::stored);
    CHECK(*s->get(as_bytes("k")) == payload_of("k", 100));
    CHECK(s->size() > 100);
    CHECK(s->stats().remote_errors == 0);
  }
  SECTION("an ACL user and its password") {
    raw_redis raw(server.port());
    REQUIRE(raw.command({"AUTH", password}) == "OK");
    REQUIRE(raw.command({"ACL", "SETUSER", "fleet", "on", ">fleet-pw", "~t:*", "+@all"}) == "OK");
    auto o = primcache::parse_redis_url(
        "redis://fleet:fleet-pw@127.0.0.1:" + std::to_string(server.port()) + "/t");
    CHECK(o.username == "fleet");
    o.format.library_version = "test-1";
    auto s = redis_store::open(o);
    REQUIRE(s->put(as_bytes("k"), payload_of("k", 100)).status == put_status::stored);
    CHECK(s->get(as_bytes("k")));
  }
  SECTION("a wrong or missing password: errors counted, no breaker trip, nothing shown") {
    const std::string url =
        GENERATE(as<std::string>{}, "redis://:wrong-one@127.0.0.1:", "redis://127.0.0.1:");
    auto o = primcache::parse_redis_url(url + std::to_string(server.port()) + "/t");
    o.format.library_version = "test-1";
    o.breaker.failure_threshold = 2;
    auto s = redis_store::open(o);
    for (int i = 0; i < 4; ++i) CHECK_FALSE(s->get(as_bytes("k")));
    const auto r = s->put(as_bytes("k"), payload_of("k", 10));
    CHECK(r.status == put_status::failed);
    CHECK(r.message.find("wrong-one") == std::string::npos);
    CHECK_THAT(r.message, Catch::Contains("WRONGPASS") || Catch::Contains("NOAUTH"));
    const auto st = s->stats();
    CHECK(st.remote_errors == 5);
    CHECK(st.breaker_opens == 0);  // the server answered at once
    CHECK(s->breaker() == breaker_state::closed);
    CHECK_THROWS_WITH(s->clear(), !Catch::Contains("wrong-one"));
  }
  SECTION("a server that stalls during AUTH: the call times out, counted, and the breaker opens") {
    auto o = primcache::parse_redis_url(
        "redis://:s3cret-Pa%25ss@127.0.0.1:" + std::to_string(server.port()) + "/t");
    o.format.library_version = "test-1";
    o.connect_timeout = 200ms;
    o.command_timeout = 200ms;
    o.breaker.failure_threshold = 2;
    auto s = redis_store::open(o);
    server.pause();  // accepts connections (the kernel does), answers nothing
    CHECK_FALSE(s->get(as_bytes("k")));
    CHECK_FALSE(s->get(as_bytes("k")));
    server.resume();
    const auto st = s->stats();
    CHECK(st.timeouts == 2);
    CHECK(st.remote_errors == 2);
    CHECK(s->breaker() == breaker_state::open);
  }
  SECTION("a malformed URL's message hides the password") {
    try {
      primcache::parse_redis_url("redis://:hunter2@127.0.0.1:1/");
      FAIL("accepted");
    } catch (const primcache::error& e) {
      CHECK_THAT(e.message(), Catch::Contains("prefix is empty"));
      CHECK_THAT(e.message(), Catch::Contains("redis://***@127.0.0.1:1/"));
      CHECK(e.message().find("hunter2") == std::string::npos);
    }
  }
}
