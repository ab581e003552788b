// The Redis store over TLS (rediss://) against a real redis-server with a
// TLS port, certificates made by the test with the openssl command (a test
// CA, a server certificate for localhost and 127.0.0.1, a client
// certificate, and a second CA the server does not use): round trips, the
// server's certificate checked (another CA, another name: refused, counted,
// the breaker opens), client certificates for tls-auth-clients, AUTH over
// TLS, a plain port or a stopped server ending within the timeouts, and
// the URL's TLS parameters and their errors.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "persist_test_support.hpp"
#include "primcache/base/error.hpp"
#include "primcache/persist/redis_store.hpp"
#include "primcache/persist/sharded_redis_store.hpp"
#include "redis_test_support.hpp"
#include "tls_test_support.hpp"

using primcache::breaker_state;
using primcache::put_status;
using primcache::redis_store;
using primcache::redis_store_options;
using primcache::test::as_bytes;
using primcache::test::payload_of;
using primcache::test::redis_server;
using primcache::test::temp_dir;
using primcache::test::test_pki;
using primcache::test::tls_server;
using namespace std::chrono_literals;

namespace {

using clock_type = std::chrono::steady_clock;

redis_store_options tls_options(const test_pki& pki, int port) {
  redis_store_options o;
  o.host = "127.0.0.1";
  o.port = port;
  o.prefix = "tls";
  o.tls = true;
  o.tls_ca_file = pki.file("ca.crt");
  o.format.library_version = "test-1";
  o.connect_timeout = 500ms;
  o.command_timeout = 500ms;
  o.breaker.failure_threshold = 3;
  o.breaker.cool_down = 200ms;
  return o;
}

template <typename F>
std::chrono::milliseconds time_of(F&& f) {
  const auto t0 = clock_type::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
}

// Three failed gets; the last failure's message from a put.
std::string fails(redis_store& s) {
  for (int i = 0; i < 2; ++i) CHECK_FALSE(s.get(as_bytes("k")));
  return s.put(as_bytes("k"), payload_of("k", 10)).message;
}

}  // namespace

TEST_CASE("rediss:// URLs and their TLS parameters", "[persist][redis][tls][url]") {
  redis_store_options o = primcache::parse_redis_url(
      "rediss://:pw@cache.internal:6380/pc?tls_ca_file=/etc/ca%20dir/ca.pem&"
      "tls_cert_file=/c.pem&tls_key_file=/k.pem&tls_server_name=redis.internal&ttl=5");
  CHECK(o.tls);
  CHECK(o.host == "cache.internal");
  CHECK(o.port == 6380);
  CHECK(o.password == "pw");
  CHECK(o.tls_ca_file == "/etc/ca dir/ca.pem");
  CHECK(o.tls_cert_file == "/c.pem");
  CHECK(o.tls_key_file == "/k.pem");
  CHECK(o.tls_server_name == "redis.internal");
  CHECK(o.ttl_seconds == 5);
  CHECK_FALSE(primcache::parse_redis_url("redis://h/p").tls);
  CHECK(primcache::parse_redis_url("rediss://h/p").tls_ca_file.empty());
  CHECK(primcache::redact_redis_url("rediss://:pw@h/p") == "rediss://***@h/p");
  auto list = primcache::parse_redis_url_list("rediss://h1/p,redis://h2/p");
  REQUIRE(list.size() == 2);
  CHECK(list[0].tls);
  CHECK_FALSE(list[1].tls);

  for (const auto& [url, says] : std::vector<std::pair<std::string, std::string>>{
           {"redis://h/p?tls_ca_file=/x", "the parameter tls_ca_file needs rediss://"},
           {"redis://h/p?tls_server_name=x", "needs rediss://"},
           {"rediss://h/p?tls_ca_file=", "tls_ca_file is empty or has a bad %XX escape"},
           {"rediss://h/p?tls_key_file=%zz", "bad %XX escape"},
           {"rediss://h/p?tls_ca_file=%00", "bad %XX escape"},
           {"rediss://h/p?tls_ca_file=/a&tls_ca_file=/b", "twice"},
           {"rediss://h/p?tls=1", "unknown parameter tls"},
       }) {
    INFO(url);
    try {
      primcache::parse_redis_url(url);
      FAIL("accepted");
    } catch (const primcache::error& e) {
      CHECK(e.code() == primcache::status::invalid_arguments);
      CHECK_THAT(e.message(), Catch::Contains(says));
      CHECK_THAT(e.message(), Catch::Contains("redis[s]://"));
    }
  }
}

TEST_CASE("redis_store::open checks its TLS files", "[persist][redis][tls]") {
  test_pki pki;
  redis_store_options o = tls_options(pki, 1);
  SECTION("a CA file that does not exist") {
    o.tls_ca_file = pki.file("no-such-ca.crt");
    CHECK_THROWS_WITH(redis_store::open(o),
                      Catch::Contains("cannot load the CA certificates " + o.tls_ca_file));
  }
  SECTION("a CA file that is not PEM") {
    o.tls_ca_file = pki.file("server.ext");
    CHECK_THROWS_WITH(redis_store::open(o), Catch::Contains("cannot load the CA certificates"));
  }
  SECTION("a certificate without its key") {
    o.tls_cert_file = pki.file("client.crt");
    CHECK_THROWS_WITH(redis_store::open(o), Catch::Contains("both tls_cert_file and tls_key_file"));
  }
  SECTION("a key that is not the certificate's") {
    o.tls_cert_file = pki.file("client.crt");
    o.tls_key_file = pki.file("server.key");
    CHECK_THROWS_WITH(redis_store::open(o),
                      Catch::Contains("cannot load the client key " + o.tls_key_file));
  }
  SECTION("TLS files without TLS") {
    o.tls = false;
    CHECK_THROWS_WITH(redis_store::open(o), Catch::Contains("without tls (rediss://)"));
  }
  SECTION("the system's CAs when none is given") {
    o.tls_ca_file.clear();
    CHECK(redis_store::open(o)->describe() == "rediss 127.0.0.1:1/tls");
  }
}

TEST_CASE("the redis store round-trips entries over TLS", "[persist][redis][tls]") {
  test_pki pki;
  tls_server t(pki, "optional", {"--requirepass", "s3cret"});
  redis_store_options o = tls_options(pki, t.tls_port);
  o.password = "s3cret";
  SECTION("by address (the certificate's IP)") {}
  SECTION("by name (the certificate's DNS name)") {
    o.host = "localhost";
  }
  SECTION("with a client certificate") {
    o.tls_cert_file = pki.file("client.crt");
    o.tls_key_file = pki.file("client.key");
  }
  auto s = redis_store::open(o);
  for (int i = 0; i < 20; ++i) {
    const std::string k = "k" + std::to_string(i);
    auto r = s->put(as_bytes(k), payload_of(k, 1000 + 40000 * static_cast<std::size_t>(i)));
    INFO(r.message);
    REQUIRE(r.status == put_status::stored);
  }
  for (int i = 0; i < 20; ++i) {
    const std::string k = "k" + std::to_string(i);
    auto got = s->get(as_bytes(k));
    REQUIRE(got);
    CHECK(*got == payload_of(k, 1000 + 40000 * static_cast<std::size_t>(i)));
  }
  auto st = s->stats();
  CHECK(st.remote_errors == 0);
  CHECK(st.hits == 20);
  CHECK(s->size() > 20 * 1000);
  // The entries are in the server (read on its plain port).
  primcache::test::raw_redis raw(t.server.port());
  raw.command({"AUTH", "s3cret"});
  CHECK(raw.exists(s->redis_key(as_bytes("k3"))));
  s->clear();
  CHECK(raw.command({"DBSIZE"}) == "0");
}

TEST_CASE("a sharded store over TLS servers", "[persist][redis][tls][shard]") {
  test_pki pki;
  tls_server a(pki, "no"), b(pki, "no");
  auto s = primcache::sharded_redis_store::open(
      {tls_options(pki, a.tls_port), tls_options(pki, b.tls_port)});
  for (int i = 0; i < 20; ++i) {
    const std::string k = "k" + std::to_string(i);
    REQUIRE(s->put(as_bytes(k), payload_of(k, 100)).status == put_status::stored);
  }
  for (int i = 0; i < 20; ++i) CHECK(s->get(as_bytes("k" + std::to_string(i))));
  for (const auto& sh : s->shards()) CHECK(sh.stats.writes > 0);
}

TEST_CASE("a server TLS does not trust is refused", "[persist][redis][tls][failure]") {
  test_pki pki;
  tls_server t(pki, "yes");
  redis_store_options o = tls_options(pki, t.tls_port);
  o.tls_cert_file = pki.file("client.crt");
  o.tls_key_file = pki.file("client.key");
  std::string says;
  SECTION("signed by another CA") {
    o.tls_ca_file = pki.file("other-ca.crt");
    says = "TLS handshake: the server's certificate is refused";
  }
  SECTION("for another name") {
    o.tls_server_name = "cache.example.org";
    says = "certificate is refused: hostname mismatch";
  }
  SECTION("for another address") {
    o.tls_server_name = "127.0.0.2";  // the certificate names 127.0.0.1
    says = "certificate is refused: IP address mismatch";
  }
  SECTION("the server wants a client certificate") {
    o.tls_cert_file.clear();
    o.tls_key_file.clear();
    says = "TLS";  // "TLS connection: ... reset", or the alert read back: "TLS: ... certificate
                   // required"
  }
  SECTION("a plain port") {
    o.port = t.server.port();
    says = "TLS handshake timed out";  // Redis waits for the rest of a command line
  }
  auto s = redis_store::open(o);
  std::string message;
  auto took = time_of([&] { message = fails(*s); });
  INFO(message);
  CHECK_THAT(message, Catch::Contains(says));
  CHECK(took < 5000ms);  // three calls; a plain port lets each handshake time out (500 ms)
  CHECK(s->stats().remote_errors == 3);
  CHECK(s->breaker() == breaker_state::open);
  CHECK(s->stats().hits == 0);
}

TEST_CASE("a stopped TLS server: calls end within the timeouts, the breaker opens",
          "[persist][redis][tls][failure]") {
  test_pki pki;
  tls_server t(pki, "no");
  auto s = redis_store::open(tls_options(pki, t.tls_port));
  REQUIRE(s->put(as_bytes("k"), payload_of("k", 1000)).status == put_status::stored);
  t.server.pause();
  for (int i = 0; i < 3; ++i) {
    // A pooled connection whose reply never comes, then fresh connections
    // whose handshake never completes.
    auto took = time_of([&] { CHECK_FALSE(s->get(as_bytes("k"))); });
    CHECK(took < 2000ms);
  }
  CHECK(s->stats().timeouts == 3);
  CHECK(s->breaker() == breaker_state::open);
  t.server.resume();
  std::this_thread::sleep_for(250ms);
  auto got = s->get(as_bytes("k"));
  REQUIRE(got);
  CHECK(*got == payload_of("k", 1000));
  CHECK(s->breaker() == breaker_state::closed);
}
