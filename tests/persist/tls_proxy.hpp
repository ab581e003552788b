// A TLS front for a plain test server: accepts TLS connections on a
// loopback port (the given certificate and key), opens a plain connection
// to the backend for each, and forwards both ways. Each read from the
// backend goes out as TLS records of its own, so a fake_redis_server's
// `pause` becomes a later record: what a test needs to play a server that
// sends bytes after a reply over TLS. Its OpenSSL server sends TLS 1.3
// session tickets after the handshake, as redis-server does.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace primcache::test {

class tls_proxy {
 public:
  tls_proxy(const std::string& cert_file, const std::string& key_file, int backend_port);
  ~tls_proxy();  // stop()
  tls_proxy(const tls_proxy&) = delete;
  tls_proxy& operator=(const tls_proxy&) = delete;

  int port() const { return port_; }
  // Closes the listener and every connection, and joins the threads.
  void stop();

 private:
  void accept_loop();
  void forward(int client);
  void* ctx_ = nullptr;  // SSL_CTX*
  int backend_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::vector<std::thread> connections_;  // guarded by mu_
  std::thread acceptor_;
};

}  // namespace primcache::test
