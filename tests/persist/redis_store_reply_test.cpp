// The Redis store against replies a real redis-server never sends — a
// broken proxy or a hostile server, played by fake_redis_server: a reply
// announcing more than any value, an array longer than any command asks
// for (at the top or nested in a SCAN batch), bytes beyond the reply, and a
// SCAN cursor that is not a string. Each is a failed call (a protocol error:
// remote_errors) that closes its connection, decided before the reply is
// buffered, never a wait for the deadline or a connection left one reply
// behind. The calls' timeouts are long (seconds) so that only a fix, not a
// deadline, ends them quickly; every wait of the fake is bounded too. And
// a real redis-server's large replies, which the bounds must let through;
// and a slow (not broken) server, whose GET of a bad value leaves the
// delete after it too little time unless the delete has its own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "persist_test_support.hpp"
#include "primcache/base/error.hpp"
#include "primcache/persist/redis_store.hpp"
#include "redis_test_support.hpp"

using Catch::Matchers::Contains;
using primcache::redis_store;
using primcache::redis_store_options;
using primcache::test::as_bytes;
using primcache::test::fake_redis_server;
using primcache::test::payload_of;
using primcache::test::raw_redis;
using primcache::test::redis_server;
using namespace std::chrono_literals;

namespace {

redis_store_options options_for(const fake_redis_server& fake) {
  redis_store_options o;
  o.host = "127.0.0.1";
  o.port = fake.port();
  o.prefix = "t";
  o.format.library_version = "test-1";
  o.connect_timeout = 2000ms;
  o.command_timeout = 3000ms;
  o.breaker.failure_threshold = 100;  // every call reaches the fake
  return o;
}

// `n` copies of `item`.
std::string repeated(std::string_view item, std::size_t n) {
  std::string out;
  out.reserve(item.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += item;
  return out;
}

std::size_t count_of(const std::vector<std::string>& commands, std::string_view name) {
  return static_cast<std::size_t>(std::count(commands.begin(), commands.end(), name));
}

// More elements than any reply the store asks for holds (SCAN batches of
// COUNT 1000), fewer than hiredis refuses on its own.
constexpr std::size_t too_many_elements = 100000;

}  // namespace

TEST_CASE("a real server's replies keep to the bounds", "[persist][redis][reply]") {
  // A value that arrives in many reads (split anywhere), and SCAN batches of
  // a few thousand keys, through clear() and size().
  redis_server server;
  redis_store_options o = primcache::parse_redis_url(server.url("r"));
  o.format.library_version = "test-1";
  o.command_timeout = 3000ms;
  auto s = redis_store::open(o);
  const std::vector<std::byte> big = payload_of("big", 5 << 20);
  REQUIRE(s->put(as_bytes("big"), big).status == primcache::put_status::stored);
  const auto got = s->get(as_bytes("big"));
  REQUIRE(got.has_value());
  CHECK(*got == big);
  CHECK(s->size() > (5u << 20));
  raw_redis raw(server.port());
  raw.command({"EVAL", "for i = 1, 3000 do redis.call('SET', 'r:' .. i, 'x') end", "0"});
  REQUIRE(raw.command({"DBSIZE"}) == "3001");
  s->clear();
  CHECK(raw.command({"DBSIZE"}) == "0");
  CHECK(s->stats().remote_errors == 0);
}

TEST_CASE("a reply announcing more bytes than any value is refused at its header",
          "[persist][redis][reply]") {
  // "$4000000000" and then as fast as the client takes it: without a bound
  // the client buffers all 64 MiB the fake has and waits for the rest until
  // its deadline.
  const std::string filler(64 << 20, 'x');
  fake_redis_server fake([&](const std::vector<std::string>&) -> std::optional<std::string> {
    return "$4000000000\r\n" + filler;
  });
  auto s = redis_store::open(options_for(fake));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(s->get(as_bytes("k")).has_value());
  const auto took = std::chrono::steady_clock::now() - t0;
  fake.stop();
  CHECK(s->stats().remote_errors == 1);
  CHECK(s->stats().timeouts == 0);
  CHECK(took < 1500ms);  // the command timeout is 3 s
  // The client closed after the header: what it did not read stayed unsent.
  CHECK(fake.bytes_sent() < (32u << 20));
  // Refused, not a bad value: nothing is echoed back to be deleted.
  CHECK(fake.commands() == std::vector<std::string>{"GET"});
}

TEST_CASE("an array longer than any reply the store asks for is refused",
          "[persist][redis][reply]") {
  // A GET answered with 100000 integers: without a bound, 100000 hiredis
  // objects and as many views are built before get() sees it is no string.
  std::atomic<int> gets{0};
  fake_redis_server fake([&](const std::vector<std::string>&) -> std::optional<std::string> {
    if (gets++ == 0)
      return "*" + std::to_string(too_many_elements) + "\r\n" +
             repeated(":0\r\n", too_many_elements);
    return "$-1\r\n";
  });
  auto s = redis_store::open(options_for(fake));
  CHECK_FALSE(s->get(as_bytes("k")).has_value());
  CHECK(s->stats().remote_errors == 1);
  // The connection was closed, not pooled: the next call connects again.
  CHECK_FALSE(s->get(as_bytes("k")).has_value());
  CHECK(s->stats().remote_errors == 1);
  fake.stop();
  CHECK(fake.connections() == 2);
}

TEST_CASE("an array nested in a SCAN batch is bounded too", "[persist][redis][reply]") {
  // The top-level header ("*2") is sane; the keys' array is not.
  fake_redis_server fake([&](const std::vector<std::string>& argv) -> std::optional<std::string> {
    if (argv[0] == "SCAN") {
      return "*2\r\n$1\r\n0\r\n*" + std::to_string(too_many_elements) + "\r\n" +
             repeated("$1\r\nk\r\n", too_many_elements);
    }
    return ":0\r\n";  // UNLINK
  });
  auto s = redis_store::open(options_for(fake));
  REQUIRE_THROWS_WITH(s->clear(), Contains("protocol error") && Contains("elements"));
  fake.stop();
  CHECK(count_of(fake.commands(), "UNLINK") == 0);
  CHECK(s->stats().remote_errors == 1);
}

TEST_CASE("a reply followed by more bytes closes its connection", "[persist][redis][reply]") {
  // The first DEL is answered twice (":0" then ":1"); the rest once. A
  // connection kept after the first would answer the second DEL with the
  // stale ":1", and every later call with its predecessor's reply.
  std::atomic<int> dels{0};
  fake_redis_server fake([&](const std::vector<std::string>&) -> std::optional<std::string> {
    return dels++ == 0 ? ":0\r\n:1\r\n" : ":0\r\n";
  });
  auto s = redis_store::open(options_for(fake));
  CHECK_FALSE(s->erase(as_bytes("a")));
  CHECK(s->stats().remote_errors == 1);
  CHECK_FALSE(s->erase(as_bytes("b")));
  CHECK_FALSE(s->erase(as_bytes("c")));
  CHECK(s->stats().remote_errors == 1);
  fake.stop();
  CHECK(dels.load() == 3);
  CHECK(fake.connections() == 2);
}

TEST_CASE("bytes arriving after a reply in a later segment close the connection",
          "[persist][redis][reply]") {
  // The first DEL is answered ":0", and ":1" 20 ms later: bytes that arrive
  // once the call has its reply. Read by the next DEL as its answer, they
  // would make every later call take its predecessor's reply.
  std::atomic<int> dels{0};
  fake_redis_server fake([&](const std::vector<std::string>&) -> std::optional<std::string> {
    if (dels++ == 0) return ":0\r\n" + std::string(fake_redis_server::pause) + ":1\r\n";
    return ":0\r\n";
  });
  auto s = redis_store::open(options_for(fake));
  CHECK_FALSE(s->erase(as_bytes("a")));
  CHECK(s->stats().remote_errors == 0);
  std::this_thread::sleep_for(200ms);  // the stray ":1" is in the socket
  CHECK_FALSE(s->erase(as_bytes("b")));
  CHECK(s->stats().remote_errors == 1);
  CHECK_FALSE(s->erase(as_bytes("c")));
  CHECK(s->stats().remote_errors == 1);
  fake.stop();
  // "b" was never sent on the connection that had the stray bytes.
  CHECK(dels.load() == 2);
  CHECK(fake.connections() == 2);
}

TEST_CASE("an error line the server sent unasked is in the failure's message",
          "[persist][redis][reply]") {
  // Redis answers a connection it will not serve (maxclients) with an error
  // line, unasked, and closes it. Here the line follows the first SET's
  // reply on its pooled connection, where the next call's peek finds it.
  std::atomic<int> sets{0};
  fake_redis_server fake([&](const std::vector<std::string>&) -> std::optional<std::string> {
    if (sets++ == 0) {
      return "+OK\r\n" + std::string(fake_redis_server::pause) +
             "-ERR max number of clients reached\r\n";
    }
    return "+OK\r\n";
  });
  auto s = redis_store::open(options_for(fake));
  CHECK(s->put(as_bytes("a"), payload_of("a", 10)).status == primcache::put_status::stored);
  std::this_thread::sleep_for(200ms);  // the error line is in the socket
  auto r = s->put(as_bytes("b"), payload_of("b", 10));
  CHECK(r.status == primcache::put_status::failed);
  CHECK_THAT(r.message, Contains("protocol error: bytes nobody asked for") &&
                            Contains("(the server said: ERR max number of clients reached)"));
  CHECK(s->stats().remote_errors == 1);
  // The connection is gone; the next call makes a fresh one.
  CHECK(s->put(as_bytes("c"), payload_of("c", 10)).status == primcache::put_status::stored);
  fake.stop();
  CHECK(sets.load() == 2);
  CHECK(fake.connections() == 2);
}

TEST_CASE("clear() refuses a SCAN cursor that is not a string", "[persist][redis][reply]") {
  // "*2 :5 *0": an integer where the cursor goes. Read as a string it is ""
  // and never "0", so clear() would SCAN for ever; after 20 SCANs the fake
  // closes every connection, which ends such a loop with another message.
  std::atomic<int> scans{0};
  fake_redis_server fake([&](const std::vector<std::string>&) -> std::optional<std::string> {
    if (scans++ >= 20) return std::nullopt;
    return "*2\r\n:5\r\n*0\r\n";
  });
  auto s = redis_store::open(options_for(fake));
  REQUIRE_THROWS_WITH(s->clear(), Contains("SCAN answered something else than a cursor"));
  fake.stop();
  CHECK(scans.load() == 1);
}

TEST_CASE("deleting a bad value has time of its own: a slow GET is no breaker trip",
          "[persist][redis][reply][corrupt]") {
  // A healthy but slow server: GET answers a bad value after 300 ms of a
  // 500 ms call, the delete after 250 ms. Within what the GET left, the
  // delete would time out — counted as a timeout and, with one failure
  // opening the breaker, the tier cut off — though the server answered
  // everything. (A large bad value does this on a loaded host: the delete
  // sends the value back to compare it.)
  fake_redis_server fake([&](const std::vector<std::string>& argv) -> std::optional<std::string> {
    if (argv[0] == "GET") {
      std::this_thread::sleep_for(300ms);
      return "$4\r\njunk\r\n";
    }
    std::this_thread::sleep_for(250ms);
    return ":1\r\n";  // EVAL: deleted
  });
  redis_store_options o = options_for(fake);
  o.connect_timeout = 100ms;
  o.command_timeout = 400ms;
  o.breaker.failure_threshold = 1;
  auto s = redis_store::open(o);
  CHECK_FALSE(s->get(as_bytes("k")).has_value());
  fake.stop();
  CHECK(fake.commands() == std::vector<std::string>{"GET", "EVAL"});
  const auto st = s->stats();
  CHECK(st.corrupt_entries == 1);
  CHECK(st.timeouts == 0);
  CHECK(st.remote_errors == 0);
  CHECK(s->breaker() == primcache::breaker_state::closed);
}
