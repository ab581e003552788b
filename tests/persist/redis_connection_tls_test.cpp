// The connection layer over TLS against a scripted server behind a TLS
// front (tls_proxy: each read from the server goes out as records of its
// own, and its OpenSSL server sends TLS 1.3 session tickets after the
// handshake): what the check before each command makes of the records
// waiting in the socket. Tickets are no reply; application data nobody
// asked for, in a later record, fails the command before it is sent; a
// server that closed TLS while the connection sat idle is found there too.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "redis_connection.hpp"
#include "redis_test_support.hpp"
#include "tls_proxy.hpp"
#include "tls_test_support.hpp"

using Catch::Matchers::Contains;
using primcache::persist_internal::io_failure;
using primcache::persist_internal::io_outcome;
using primcache::persist_internal::redis_connection;
using primcache::persist_internal::redis_reply;
using primcache::persist_internal::resolve;
using primcache::persist_internal::tls_context;
using primcache::persist_internal::tls_peer;
using primcache::test::fake_redis_server;
using primcache::test::test_pki;
using primcache::test::tls_proxy;
using namespace std::chrono_literals;

namespace {

using steady = std::chrono::steady_clock;

// A scripted server (`answer`) behind a TLS front, and TLS connections to
// it checked against the test CA.
struct tls_fake {
  explicit tls_fake(fake_redis_server::answer_fn answer)
      : fake(std::move(answer)),
        proxy(pki.file("server.crt"), pki.file("server.key"), fake.port()),
        ctx(pki.file("ca.crt"), "", "") {}

  std::unique_ptr<redis_connection> connect() const {
    std::string why;
    const auto addresses = resolve("127.0.0.1", proxy.port(), why);
    REQUIRE(why == "");
    io_outcome out;
    auto c =
        redis_connection::connect(addresses, steady::now() + 3s, out, tls_peer{&ctx, "127.0.0.1"});
    INFO(out.message);
    REQUIRE(out.ok());
    REQUIRE(c != nullptr);
    return c;
  }

  test_pki pki;
  fake_redis_server fake;
  tls_proxy proxy;
  const tls_context ctx;
};

io_outcome ping(redis_connection& c, redis_reply& reply) {
  const std::vector<std::string_view> argv = {"PING"};
  return c.command(argv, steady::now() + 3s, reply);
}

}  // namespace

TEST_CASE("over TLS, session tickets waiting before a command are no stray bytes",
          "[redis_connection][tls]") {
  tls_fake t([](const std::vector<std::string>&) { return "+PONG\r\n"; });
  auto c = t.connect();
  std::this_thread::sleep_for(200ms);  // the tickets are in the socket
  for (int i = 0; i < 3; ++i) {
    redis_reply reply;
    const io_outcome out = ping(*c, reply);
    INFO(out.message);
    REQUIRE(out.ok());
    CHECK(reply.str == "PONG");
  }
  CHECK(t.fake.commands().size() == 3);
}

TEST_CASE("over TLS, bytes after a reply in a later record fail the next command, unsent",
          "[redis_connection][tls]") {
  // The first PING is answered "+PONG" and, 20 ms later in a record of its
  // own, an error line (what Redis sends a connection it will not serve).
  // Read as the second PING's reply, it would put the connection one reply
  // behind for good.
  int answered = 0;  // on the fake's thread only
  tls_fake t([&](const std::vector<std::string>&) {
    if (answered++ > 0) return std::string("+PONG\r\n");
    return "+PONG\r\n" + std::string(fake_redis_server::pause) +
           "-ERR max number of clients reached\r\n";
  });
  auto c = t.connect();
  redis_reply reply;
  REQUIRE(ping(*c, reply).ok());
  CHECK(reply.str == "PONG");
  std::this_thread::sleep_for(200ms);  // the error line's record is in the socket
  const io_outcome out = ping(*c, reply);
  CHECK(out.failure == io_failure::protocol);
  CHECK_THAT(out.message, Contains("protocol error: bytes nobody asked for") &&
                              Contains("(the server said: ERR max number of clients reached)"));
  CHECK(t.fake.commands().size() == 1);
}

TEST_CASE("over TLS, a server that closed an idle connection is found before a command",
          "[redis_connection][tls]") {
  tls_fake t([](const std::vector<std::string>&) { return "+PONG\r\n"; });
  auto c = t.connect();
  redis_reply reply;
  REQUIRE(ping(*c, reply).ok());
  t.proxy.stop();  // close_notify, then the socket closed
  std::this_thread::sleep_for(100ms);
  const io_outcome out = ping(*c, reply);
  CHECK(out.failure == io_failure::closed);
  CHECK_THAT(out.message, Contains("closed"));
  CHECK(t.fake.commands().size() == 1);
}
