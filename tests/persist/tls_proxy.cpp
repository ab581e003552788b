#include "tls_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <stdexcept>

#include "redis_test_support.hpp"

namespace primcache::test {

namespace {

int connect_to_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

// Every blocking call on a proxied socket gives up after 5 s.
void bound_waits(int fd) {
  timeval t{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
}

bool send_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace

tls_proxy::tls_proxy(const std::string& cert_file, const std::string& key_file, int backend_port)
    : backend_port_(backend_port) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr || SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ctx) SSL_CTX_free(ctx);
    throw std::runtime_error("tls proxy: cannot load " + cert_file + " and " + key_file);
  }
  ctx_ = ctx;
  listener_ = listen_on_loopback("tls proxy", port_);
  acceptor_ = std::thread([this] { accept_loop(); });
}

tls_proxy::~tls_proxy() {
  stop();
  SSL_CTX_free(static_cast<SSL_CTX*>(ctx_));
}

void tls_proxy::stop() {
  stopping_.store(true);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard g(mu_);
    threads.swap(connections_);
  }
  for (std::thread& t : threads) t.join();
  if (listener_ >= 0) {
    ::close(listener_);
    listener_ = -1;
  }
}

void tls_proxy::accept_loop() {
  while (!stopping_.load()) {
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard g(mu_);
    connections_.emplace_back([this, fd] { forward(fd); });
  }
}

void tls_proxy::forward(int client) {
  bound_waits(client);
  SSL* ssl = SSL_new(static_cast<SSL_CTX*>(ctx_));
  const int backend = connect_to_loopback(backend_port_);
  if (ssl != nullptr && backend >= 0 && SSL_set_fd(ssl, client) == 1 && SSL_accept(ssl) == 1) {
    bound_waits(backend);
    char buf[16 * 1024];
    while (!stopping_.load()) {
      pollfd fds[2] = {{client, POLLIN, 0}, {backend, POLLIN, 0}};
      if (SSL_pending(ssl) == 0 && ::poll(fds, 2, 50) <= 0) continue;
      if (SSL_pending(ssl) > 0 || fds[0].revents != 0) {
        const int r = SSL_read(ssl, buf, sizeof buf);
        if (r <= 0) {
          if (SSL_get_error(ssl, r) == SSL_ERROR_WANT_READ) continue;  // a record with no data
          break;
        }
        if (!send_all(backend, buf, static_cast<std::size_t>(r))) break;
      }
      if (fds[1].revents != 0) {
        const ssize_t r = ::recv(backend, buf, sizeof buf, 0);
        if (r <= 0 || SSL_write(ssl, buf, static_cast<int>(r)) != r) break;
      }
    }
    SSL_shutdown(ssl);
  }
  ERR_clear_error();
  if (ssl != nullptr) SSL_free(ssl);
  if (backend >= 0) ::close(backend);
  ::close(client);
}

}  // namespace primcache::test
