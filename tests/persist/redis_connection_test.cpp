// The Redis store's connection layer (libs/persist/src/redis_connection.cpp,
// compiled into this test): how connect() shares its deadline among the
// addresses a host resolves to. A "silent" address is a loopback listener
// whose accept queue is full, so the kernel drops every further handshake
// (what a host that is down or a dropping firewall does): a connect to it
// neither succeeds nor fails until its deadline.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "redis_connection.hpp"

using primcache::persist_internal::io_failure;
using primcache::persist_internal::io_outcome;
using primcache::persist_internal::redis_connection;
using primcache::persist_internal::socket_address;
using namespace std::chrono_literals;

namespace {

using steady = std::chrono::steady_clock;

class fd_guard {
 public:
  explicit fd_guard(int fd) : fd_(fd) {
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  }
  ~fd_guard() { ::close(fd_); }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// A listener on 127.0.0.1 with `backlog`, on a port the kernel picks.
class listener {
 public:
  explicit listener(int backlog) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd_.get(), backlog) != 0) {
      throw std::runtime_error(std::string("listen: ") + std::strerror(errno));
    }
    socklen_t len = sizeof address_.addr;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&address_.addr), &len);
    address_.len = len;
  }
  const socket_address& address() const { return address_; }

 private:
  fd_guard fd_;
  socket_address address_;
};

// A listener nobody accepts from, filled until the kernel drops handshakes.
class silent_listener {
 public:
  silent_listener() : listener_(0) {
    for (int i = 0; i < 16; ++i) {
      auto& c = clients_.emplace_back(std::make_unique<fd_guard>(
          ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)));
      const socket_address& a = listener_.address();
      if (::connect(c->get(), reinterpret_cast<const sockaddr*>(&a.addr), a.len) == 0) continue;
      if (errno != EINPROGRESS) {
        throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
      }
      pollfd p{c->get(), POLLOUT, 0};
      if (::poll(&p, 1, 300) == 0) return;  // dropped: the queue is full
    }
    throw std::runtime_error("the listener kept accepting handshakes");
  }
  const socket_address& address() const { return listener_.address(); }

 private:
  listener listener_;
  std::vector<std::unique_ptr<fd_guard>> clients_;
};

}  // namespace

TEST_CASE("a silent first address leaves the next one its share of the connect deadline",
          "[redis_connection]") {
  silent_listener silent;
  listener answering(16);
  io_outcome out;
  const auto t0 = steady::now();
  auto c = redis_connection::connect({silent.address(), answering.address()}, t0 + 2s, out);
  CHECK(out.message == "");
  CHECK(out.ok());
  REQUIRE(c != nullptr);
  // The silent address had half of the 2 s, no more.
  CHECK(steady::now() - t0 < 2s);
}

TEST_CASE("a connect whose every address is silent times out by its deadline",
          "[redis_connection]") {
  silent_listener first;
  silent_listener second;
  io_outcome out;
  const auto t0 = steady::now();
  auto c = redis_connection::connect({first.address(), second.address()}, t0 + 400ms, out);
  CHECK(c == nullptr);
  CHECK(out.failure == io_failure::timeout);
  CHECK(out.message == "connect timed out");
  CHECK(steady::now() - t0 >= 400ms);
}

TEST_CASE("a refusing first address passes to the next at once", "[redis_connection]") {
  socket_address closed;
  {
    listener l(1);
    closed = l.address();
  }  // closed: nothing listens on its port now
  listener answering(16);
  io_outcome out;
  auto c = redis_connection::connect({closed, answering.address()}, steady::now() + 2s, out);
  CHECK(out.ok());
  CHECK(c != nullptr);
}

TEST_CASE("a connect with no address or a spent deadline fails with the reason",
          "[redis_connection]") {
  io_outcome out;
  CHECK(redis_connection::connect({}, steady::now() + 1s, out) == nullptr);
  CHECK(out.failure == io_failure::error);
  CHECK(out.message == "no address to connect to");

  listener answering(16);
  CHECK(redis_connection::connect({answering.address()}, steady::now() - 1ms, out) == nullptr);
  CHECK(out.failure == io_failure::timeout);
  CHECK(out.message == "connect timed out");
}
