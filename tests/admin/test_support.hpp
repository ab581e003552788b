// Shared by the admin tests: a toy cache, a registry with it, and a raw
// loopback client that sends exact bytes and reads the whole answer.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include "primcache/control/registry.hpp"

namespace admin_test {

struct toy_stats {
  std::uint64_t hits = 0, misses = 0, waits = 0, evictions = 0, failures = 0;
};

// Thread-safe enough for the tests: atomics only.
struct toy_cache {
  std::uint64_t capacity() const { return capacity_.load(); }
  void set_capacity(std::uint64_t n) {
    capacity_ = n;
    if (size_ > n) size_ = n;
  }
  std::uint64_t size() const { return size_.load(); }
  toy_stats stats() const { return {hits.load(), 2, 1, 3, 0}; }
  void clear() { size_ = 0; }

  std::atomic<std::uint64_t> capacity_{1024};
  std::atomic<std::uint64_t> size_{17};
  std::atomic<std::uint64_t> hits{5};
};

struct weighed_cache : toy_cache {
  std::uint64_t weight() const { return 4096; }
  std::map<std::string, std::uint64_t> extra_stats() const { return {{"disk_reads", 9}}; }
};

// A registry holding a "primitive" cache, a "constant.cpu" cache, a switch,
// settings and two events.
struct fixture {
  fixture() {
    registry.record_event({.kind = "create",
                           .name = "matmul",
                           .source = "compile",
                           .duration_ms = 1.5,
                           .detail = "f32"});
    registry.record_event({.kind = "create", .name = "conv", .source = "memory"});
  }
  primcache::control_registry registry;
  toy_cache primitive;
  weighed_cache constant;
  primcache::cache_registration r1 = registry.register_cache("primitive", primitive);
  primcache::cache_registration r2 =
      registry.register_cache("constant.cpu", constant, primcache::capacity_unit::bytes);
  primcache::switch_registration tune = registry.register_switch("tune", "measure", false);
  primcache::setting_registration threads = registry.register_setting(
      primcache::setting_spec::integer("threads", "worker threads", 4, 1, 64));
  primcache::setting_registration mode = registry.register_setting(primcache::setting_spec::choice(
      "jit_mode", "how kernels compile", "tiered", {"tiered", "sync"}));
};

// A connected loopback socket, closed on destruction.
class raw_client {
 public:
  explicit raw_client(std::uint16_t port, int timeout_ms = 5000) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error("connect failed");
    }
  }
  ~raw_client() { ::close(fd_); }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  void send(const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may close early (limits); the answer is read next
      off += static_cast<std::size_t>(n);
    }
  }
  // Everything until the server closes (or the timeout).
  std::string read_all() {
    std::string out;
    char buf[8192];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }
  // One response with a Content-Length body.
  std::string read_response() {
    std::string out;
    char buf[8192];
    for (;;) {
      const auto end = out.find("\r\n\r\n");
      if (end != std::string::npos) {
        const auto cl = out.find("Content-Length: ");
        const std::size_t len = cl == std::string::npos ? 0 : std::stoul(out.substr(cl + 16));
        if (out.size() >= end + 4 + len) return out.substr(0, end + 4 + len);
      }
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return out;
      out.append(buf, static_cast<std::size_t>(n));
    }
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// Sends one request with Connection: close and returns the whole answer.
inline std::string exchange(std::uint16_t port, const std::string& method,
                            const std::string& target, const std::string& body = "",
                            const std::string& token = "") {
  raw_client c(port);
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
  if (!body.empty() || method == "POST") {
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n" + body;
  c.send(req);
  return c.read_all();
}

inline int status_of(const std::string& response) {
  if (response.size() < 12 || response.compare(0, 9, "HTTP/1.1 ") != 0) return 0;
  return std::stoi(response.substr(9, 3));
}

inline std::string body_of(const std::string& response) {
  const auto p = response.find("\r\n\r\n");
  return p == std::string::npos ? "" : response.substr(p + 4);
}

}  // namespace admin_test
