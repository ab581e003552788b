#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "primcache/admin/admin_server.hpp"
#include "test_support.hpp"

using admin_test::exchange;
using admin_test::raw_client;
using admin_test::status_of;

TEST_CASE("many concurrent clients are all answered while capacities change",
          "[admin][concurrency]") {
  admin_test::fixture f;
  primcache::admin_options o;
  o.registry = &f.registry;
  o.token = "tok";
  o.threads = 2;
  auto server = primcache::admin_server::start(o);
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        const std::string r =
            (i % 5 == 0) ? exchange(server.port(), "POST", "/api/v1/caches/primitive/capacity",
                                    "{\"capacity\":" + std::to_string(100 + t) + "}", "tok")
                         : exchange(server.port(), "GET", i % 2 ? "/metrics" : "/api/v1/caches");
        if (status_of(r) == 200) ++ok;
      }
    });
  }
  for (auto& c : clients) c.join();
  CHECK(ok == 8 * 25);
  CHECK(f.primitive.capacity() >= 100);
  CHECK(f.primitive.capacity() < 108);
}

TEST_CASE("slow clients holding connections open do not delay others, and are timed out",
          "[admin][concurrency]") {
  admin_test::fixture f;
  primcache::admin_options o;
  o.registry = &f.registry;
  o.token = "tok";
  o.read_timeout = std::chrono::milliseconds(1500);
  o.max_connections = 16;
  auto server = primcache::admin_server::start(o);
  std::vector<std::unique_ptr<raw_client>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<raw_client>(server.port()));
    slow.back()->send("GET /healthz HTTP/1.1\r\nHost: x\r\n");  // never finishes its headers
  }
  const auto start = std::chrono::steady_clock::now();
  CHECK(status_of(exchange(server.port(), "GET", "/healthz")) == 200);
  // Answered long before the slow clients' read timeout would free anything.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(750));
  for (auto& c : slow) CHECK(c->read_all().empty());  // closed by the read timeout
}

TEST_CASE("connections past the cap are closed at once and the server recovers",
          "[admin][concurrency]") {
  admin_test::fixture f;
  primcache::admin_options o;
  o.registry = &f.registry;
  o.token = "tok";
  o.read_timeout = std::chrono::milliseconds(2000);
  o.max_connections = 2;
  auto server = primcache::admin_server::start(o);
  raw_client a(server.port());
  raw_client b(server.port());
  a.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  b.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(status_of(a.read_response()) == 200);
  CHECK(status_of(b.read_response()) == 200);
  {
    raw_client c(server.port());
    c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(c.read_all().empty());
  }
  ::shutdown(a.fd(), SHUT_RDWR);
  ::shutdown(b.fd(), SHUT_RDWR);
  std::string r;
  for (int i = 0; i < 50 && status_of(r) != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    r = exchange(server.port(), "GET", "/healthz");
  }
  CHECK(status_of(r) == 200);
}

TEST_CASE("stop while clients are connected drains and joins", "[admin][concurrency]") {
  admin_test::fixture f;
  primcache::admin_options o;
  o.registry = &f.registry;
  o.token = "tok";
  o.threads = 2;
  auto server = primcache::admin_server::start(o);
  std::vector<std::unique_ptr<raw_client>> open;
  for (int i = 0; i < 4; ++i) open.push_back(std::make_unique<raw_client>(server.port()));
  std::atomic<bool> done{false};
  std::thread hammer([&] {
    while (!done) (void)exchange(server.port(), "GET", "/metrics");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  done = true;
  hammer.join();
  server.stop();
  for (auto& c : open) CHECK(c->read_all().empty());
}
