#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "primcache/admin/admin_server.hpp"
#include "primcache/base/error.hpp"
#include "test_support.hpp"

using admin_test::body_of;
using admin_test::exchange;
using admin_test::raw_client;
using admin_test::status_of;

namespace {

struct server_fixture : admin_test::fixture {
  primcache::admin_server server = [this] {
    primcache::admin_options o;
    o.token = "tok";
    o.registry = &registry;
    o.read_timeout = std::chrono::milliseconds(500);
    return primcache::admin_server::start(o);
  }();
};

}  // namespace

TEST_CASE_METHOD(server_fixture, "every GET endpoint answers over loopback", "[admin][server]") {
  CHECK(server.address() == "127.0.0.1");
  CHECK(server.url() == "http://127.0.0.1:" + std::to_string(server.port()) + "/");
  CHECK(server.token_file().empty());
  for (const char* target :
       {"/healthz", "/metrics", "/api/v1/caches", "/api/v1/caches/primitive", "/api/v1/switches",
        "/api/v1/settings", "/api/v1/events?since=0", "/"}) {
    INFO(target);
    CHECK(status_of(exchange(server.port(), "GET", target)) == 200);
  }
}

TEST_CASE_METHOD(server_fixture, "every POST endpoint changes state with the token",
                 "[admin][server]") {
  const auto p = server.port();
  CHECK(status_of(exchange(p, "POST", "/api/v1/caches/primitive/capacity", R"({"capacity":5})",
                           "tok")) == 200);
  CHECK(primitive.capacity() == 5);
  const auto flushed = exchange(p, "POST", "/api/v1/caches/primitive/flush", "", "tok");
  CHECK(status_of(flushed) == 200);
  CHECK(body_of(flushed).starts_with(R"({"flushed_entries":5,)"));
  CHECK(status_of(exchange(p, "POST", "/api/v1/switches/tune", R"({"on":true})", "tok")) == 200);
  CHECK(tune.on());
  CHECK(status_of(exchange(p, "POST", "/api/v1/settings/threads", R"({"value":8})", "tok")) == 200);
  CHECK(threads.int_value() == 8);
}

TEST_CASE_METHOD(server_fixture, "bad requests get the right 4xx with a JSON error",
                 "[admin][server]") {
  const auto p = server.port();
  const auto no_token = exchange(p, "POST", "/api/v1/caches/primitive/flush");
  CHECK(status_of(no_token) == 401);
  CHECK(body_of(no_token).starts_with(R"({"error":)"));
  CHECK(status_of(exchange(p, "POST", "/api/v1/caches/primitive/flush", "", "wrong")) == 401);
  CHECK(status_of(exchange(p, "GET", "/api/v1/caches/primitive/flush")) == 405);
  CHECK(status_of(exchange(p, "GET", "/api/v1/caches/unknown")) == 404);
  CHECK(status_of(exchange(p, "GET", "/no/such/route")) == 404);
  CHECK(status_of(exchange(p, "POST", "/api/v1/caches/primitive/capacity", "{not json", "tok")) ==
        400);
  CHECK(status_of(exchange(p, "POST", "/api/v1/caches/primitive/capacity", R"({"capacity":-3})",
                           "tok")) == 400);
  CHECK(status_of(exchange(p, "POST", "/api/v1/caches/primitive/capacity", R"({"capacity":2.0})",
                           "tok")) == 400);
  CHECK(status_of(exchange(p, "POST", "/api/v1/caches/primitive/capacity", R"({"capacity":1e300})",
                           "tok")) == 400);
  CHECK(status_of(exchange(p, "GET", "/assets/../../../etc/passwd")) == 404);
  CHECK(primitive.size() == 17);
  CHECK(primitive.capacity() == 1024);
}

TEST_CASE_METHOD(server_fixture, "oversized headers get 431 and oversized bodies 413",
                 "[admin][server][limits]") {
  {
    raw_client c(server.port());
    c.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n");
    CHECK(status_of(c.read_all()) == 431);
  }
  {
    raw_client c(server.port());
    c.send(
        "POST /api/v1/caches/primitive/capacity HTTP/1.1\r\nHost: x\r\n"
        "Authorization: Bearer tok\r\nContent-Length: 70000\r\n\r\n" +
        std::string(70000, ' '));
    CHECK(status_of(c.read_all()) == 413);
  }
  CHECK(status_of(exchange(server.port(), "GET", "/healthz")) == 200);
}

// A TLS ClientHello's first bytes (NULs included) sent to the plain-HTTP port.
constexpr char kTlsHello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n";

TEST_CASE_METHOD(server_fixture,
                 "conflicting lengths and garbage bytes get 400, and the server stays up",
                 "[admin][server][limits]") {
  const std::string inputs[] = {
      "POST /api/v1/caches/primitive/flush HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n"
      "Content-Length: 2\r\nContent-Length: 5\r\n\r\n{}",
      "POST /api/v1/caches/primitive/flush HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
      "POST /api/v1/caches/primitive/flush HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
      std::string(kTlsHello, sizeof kTlsHello - 1),
      "GET\r\n\r\n",
      "HELLO WORLD\r\n\r\n",
  };
  for (const auto& in : inputs) {
    raw_client c(server.port());
    c.send(in);
    const std::string out = c.read_all();
    INFO(out);
    CHECK(status_of(out) == 400);
  }
  CHECK(primitive.size() == 17);
  CHECK(status_of(exchange(server.port(), "GET", "/healthz")) == 200);
}

TEST_CASE_METHOD(server_fixture, "keep-alive serves several requests on one connection",
                 "[admin][server]") {
  raw_client c(server.port());
  for (int i = 0; i < 3; ++i) {
    c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(status_of(c.read_response()) == 200);
  }
}

TEST_CASE("a generated token goes to a new 0600 file, removed on stop", "[admin][server][auth]") {
  primcache::control_registry registry;
  const std::string path = "/tmp/primcache_admin_test_" + std::to_string(::getpid()) + ".token";
  ::unlink(path.c_str());
  primcache::admin_options o;
  o.registry = &registry;
  o.token_file = path;
  auto server = primcache::admin_server::start(o);
  CHECK(server.token_file() == path);
  CHECK(server.token().size() == 64);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  CHECK(line == server.token());
  // An existing file is never overwritten.
  o.port = 0;
  CHECK_THROWS_AS(primcache::admin_server::start(o), primcache::error);
  server.stop();
  server.stop();  // idempotent
  CHECK(::access(path.c_str(), F_OK) != 0);
}

TEST_CASE("bad options are refused with primcache::error", "[admin][server]") {
  primcache::control_registry registry;
  primcache::admin_options o;
  o.registry = &registry;
  o.token = "t";
  o.address = "not-an-address";
  CHECK_THROWS_AS(primcache::admin_server::start(o), primcache::error);
  o.address = "127.0.0.1";
  o.threads = 0;
  CHECK_THROWS_AS(primcache::admin_server::start(o), primcache::error);
  o.threads = 1;
  auto a = primcache::admin_server::start(o);
  o.port = a.port();
  CHECK_THROWS_AS(primcache::admin_server::start(o), primcache::error);  // port in use
}

TEST_CASE("out of descriptors, the server waits between accepts instead of spinning",
          "[admin][server]") {
  // In a child: a server, then the child's descriptor limit lowered to the
  // descriptors it has, so that accepting the connection the parent makes
  // fails (EMFILE) and the connection stays in the backlog.
  int port_pipe[2];
  REQUIRE(::pipe(port_pipe) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::alarm(30);
    ::close(port_pipe[0]);
    int code = 0;
    try {
      primcache::admin_options o;
      o.token = "tok";
      primcache::admin_server server = primcache::admin_server::start(o);
      const int next_fd = ::dup(0);  // the lowest free descriptor
      ::close(next_fd);
      rlimit saved{};
      if (::getrlimit(RLIMIT_NOFILE, &saved) != 0) ::_exit(2);
      const rlimit limit{static_cast<rlim_t>(next_fd), saved.rlim_max};
      if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) ::_exit(2);
      const std::uint16_t port = server.port();
      if (::write(port_pipe[1], &port, sizeof port) != sizeof port) ::_exit(3);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the connection arrives
      auto cpu_ms = [] {
        rusage u{};
        ::getrusage(RUSAGE_SELF, &u);
        return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000.0 +
               (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000.0;
      };
      const double before = cpu_ms();
      std::this_thread::sleep_for(std::chrono::seconds(1));
      // Retrying at once keeps an I/O thread on a core: about 1000 ms here.
      code = cpu_ms() - before < 300 ? 0 : 1;
      // The descriptors back before the server stops (UBSan's checks as its
      // threads end open a pipe).
      if (::setrlimit(RLIMIT_NOFILE, &saved) != 0) code = 5;
    } catch (...) {
      code = 4;
    }
    ::_exit(code);
  }
  ::close(port_pipe[1]);
  std::uint16_t port = 0;
  REQUIRE(::read(port_pipe[0], &port, sizeof port) == sizeof port);
  ::close(port_pipe[0]);
  raw_client client(port);  // connected: the kernel completes the handshake
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
