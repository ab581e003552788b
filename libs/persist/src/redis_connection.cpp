#include "redis_connection.hpp"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <optional>

#include "primcache/base/error.hpp"

namespace primcache::persist_internal {
namespace {

// A hint to the core that this is a busy-wait loop (x86 PAUSE).
inline void spin_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

std::string errno_text(int e) {
  return std::strerror(e);
}

// Waits for `events` on `fd` until `deadline`: 1 ready, 0 timed out, -errno.
int wait_for(int fd, short events, steady::time_point deadline) {
  for (;;) {
    const auto left = deadline - steady::now();
    if (left <= steady::duration::zero()) return 0;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    pollfd p{fd, events, 0};
    int r = ::ppoll(&p, 1, &ts, nullptr);
    if (r > 0) return 1;
    if (r == 0) continue;  // the loop re-checks the clock
    if (errno != EINTR) return -errno;
  }
}

void convert(const redisReply& r, redis_reply& out) {
  switch (r.type) {
    case REDIS_REPLY_STRING: out.type = redis_reply::kind::string; break;
    case REDIS_REPLY_STATUS: out.type = redis_reply::kind::status; break;
    case REDIS_REPLY_ERROR: out.type = redis_reply::kind::error; break;
    case REDIS_REPLY_INTEGER: out.type = redis_reply::kind::integer; break;
    case REDIS_REPLY_ARRAY: out.type = redis_reply::kind::array; break;
    default: out.type = redis_reply::kind::nil; break;
  }
  out.integer = r.integer;
  if (r.str != nullptr) out.str = std::string_view(r.str, r.len);
  if (r.type == REDIS_REPLY_ARRAY) {
    out.elements.resize(r.elements);
    for (std::size_t i = 0; i < r.elements; ++i) convert(*r.element[i], out.elements[i]);
  }
}

redisReader* as_reader(void* p) {
  return static_cast<redisReader*>(p);
}

SSL* as_ssl(void* p) {
  return static_cast<SSL*>(p);
}

// OpenSSL's queued errors of this thread, as one line (and cleared).
std::string openssl_errors() {
  std::string out;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "no reason given" : out;
}

bool is_ip_address(const std::string& name) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, name.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

}  // namespace

void reply_bounds::start() noexcept {
  at_ = at::type;
  after_cr_ = false;
  bytes_ = 0;
  elements_ = 0;
  open_.clear();
  done_ = false;
}

void reply_bounds::item_done() noexcept {
  at_ = at::type;
  while (!open_.empty()) {
    if (--open_.back() > 0) return;
    open_.pop_back();  // that array is complete: an item of its parent
  }
  done_ = true;
}

std::string reply_bounds::header_done() {
  // What hiredis reads as a length: digits, or -1 (nil).
  if (digits_ == 0 || (negative_ && number_ != 1)) {
    return std::string("a malformed length in a '") + type_ + "' header";
  }
  if (negative_) {
    item_done();
    return {};
  }
  if (type_ == '$') {
    // Refused here, before a byte of it is buffered.
    if (max_reply_bytes - bytes_ < 2 || number_ > max_reply_bytes - bytes_ - 2) {
      return "a string of " + std::to_string(number_) + " bytes: a reply may hold at most " +
             std::to_string(max_reply_bytes >> 20) + " MiB";
    }
    bulk_left_ = number_ + 2;
    at_ = at::bulk;
    return {};
  }
  if (number_ > max_reply_elements - elements_) {
    return "an array of " + std::to_string(number_) + " elements: a reply may hold at most " +
           std::to_string(max_reply_elements) + " elements";
  }
  elements_ += number_;
  if (number_ == 0) {
    item_done();
  } else {
    open_.push_back(number_);
    at_ = at::type;
  }
  return {};
}

std::string reply_bounds::scan(const char* p, std::size_t n) {
  std::size_t i = 0;
  while (i < n && !done_) {
    if (at_ == at::bulk) {
      const std::uint64_t take = std::min<std::uint64_t>(bulk_left_, n - i);
      i += take;
      bytes_ += take;
      bulk_left_ -= take;
      if (bulk_left_ == 0) item_done();
      continue;
    }
    const char c = p[i++];
    // A status line that never ends is bounded here.
    if (++bytes_ > max_reply_bytes) {
      return "a reply of more than " + std::to_string(max_reply_bytes >> 20) + " MiB";
    }
    switch (at_) {
      case at::type:
        type_ = c;
        after_cr_ = false;
        if (c == '$' || c == '*') {
          at_ = at::number;
          negative_ = false;
          digits_ = 0;
          number_ = 0;
        } else if (c == '+' || c == '-' || c == ':') {
          at_ = at::line;
        } else {
          return "a reply of unknown type (byte " + std::to_string(static_cast<unsigned char>(c)) +
                 ")";
        }
        break;
      case at::number:
        if (after_cr_) {
          if (c != '\n') return std::string("a malformed length in a '") + type_ + "' header";
          if (std::string why = header_done(); !why.empty()) return why;
        } else if (c == '\r') {
          after_cr_ = true;
        } else if (c == '-' && digits_ == 0 && !negative_) {
          negative_ = true;
        } else if (c >= '0' && c <= '9') {
          ++digits_;
          const unsigned d = static_cast<unsigned>(c - '0');
          number_ = number_ > (UINT64_MAX - d) / 10 ? UINT64_MAX : number_ * 10 + d;
        } else {
          return std::string("a malformed length in a '") + type_ + "' header";
        }
        break;
      case at::line:
        if (after_cr_ && c == '\n') {
          item_done();
        } else {
          after_cr_ = c == '\r';
        }
        break;
      case at::bulk: break;  // above
    }
  }
  return {};
}

std::vector<socket_address> resolve(const std::string& host, int port, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  std::vector<socket_address> out;
  if (rc != 0) {
    why = ::gai_strerror(rc);
    return out;
  }
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    socket_address s;
    std::memcpy(&s.addr, a->ai_addr, a->ai_addrlen);
    s.len = a->ai_addrlen;
    out.push_back(s);
  }
  ::freeaddrinfo(res);
  if (out.empty()) why = "no address";
  return out;
}

tls_context::tls_context(const std::string& ca_file, const std::string& cert_file,
                         const std::string& key_file) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) throw std::bad_alloc();
  auto fail = [&](const std::string& what) {
    const std::string why = openssl_errors();
    SSL_CTX_free(ctx);
    throw error(status::invalid_arguments, "redis store: TLS: " + what + ": " + why);
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (!ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
      fail("cannot load the CA certificates " + ca_file);
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    fail("cannot load the system's CA certificates");
  }
  if (cert_file.empty() != key_file.empty()) {
    SSL_CTX_free(ctx);
    throw error(status::invalid_arguments,
                "redis store: TLS: a client certificate needs both tls_cert_file and tls_key_file");
  }
  if (!cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
      fail("cannot load the client certificate " + cert_file);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      fail("cannot load the client key " + key_file);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      fail("the client key " + key_file + " does not match the certificate " + cert_file);
    }
  }
  // OpenSSL fills a certificate's extension cache (key identifiers, ...) on
  // first use, under the certificate's lock, while other threads verifying
  // against the same CA read it without one (ThreadSanitizer: a race in
  // ASN1_STRING_set / ASN1_STRING_cmp between two handshakes). Fill it now,
  // on one thread, for every certificate the context shares.
  STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx));
  for (int i = 0; i < sk_X509_OBJECT_num(objects); ++i) {
    if (X509* x = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objects, i))) {
      X509_check_purpose(x, -1, 0);
    }
  }
  if (X509* own = SSL_CTX_get0_certificate(ctx)) X509_check_purpose(own, -1, 0);
  ctx_ = ctx;
}

tls_context::~tls_context() {
  SSL_CTX_free(static_cast<SSL_CTX*>(ctx_));
}

std::unique_ptr<redis_connection> redis_connection::connect(
    const std::vector<socket_address>& addresses, steady::time_point deadline, io_outcome& out,
    const tls_peer& tls) {
  out = {io_failure::error, "no address to connect to"};
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    const socket_address& a = addresses[i];
    // Each address gets an equal share of what is left, the last one all of
    // it: a first address that drops the handshake (a host that is down, a
    // firewall) must not spend the deadline of one that would answer.
    const steady::time_point now = steady::now();
    if (now >= deadline) {
      out = {io_failure::timeout, "connect timed out"};
      return nullptr;
    }
    const steady::time_point attempt_deadline =
        now + (deadline - now) / static_cast<long>(addresses.size() - i);
    int fd = ::socket(a.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      out = {io_failure::error, "socket: " + errno_text(errno)};
      continue;
    }
    int r = ::connect(fd, reinterpret_cast<const sockaddr*>(&a.addr), a.len);
    if (r != 0 && errno == EINPROGRESS) {
      int w = wait_for(fd, POLLOUT, attempt_deadline);
      if (w == 0) {
        ::close(fd);
        out = {io_failure::timeout, "connect timed out"};
        continue;  // the next address has its share (none when this was the last)
      }
      int err = 0;
      socklen_t len = sizeof err;
      if (w < 0) {
        err = -w;
      } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
      }
      r = err == 0 ? 0 : -1;
      errno = err;
    }
    if (r != 0) {
      const int e = errno;
      ::close(fd);
      out = {e == ECONNREFUSED || e == ECONNRESET ? io_failure::closed : io_failure::error,
             "connect: " + errno_text(e)};
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    redisReader* reader = redisReaderCreate();
    if (reader == nullptr) {
      ::close(fd);
      throw std::bad_alloc();
    }
    // Keep the read buffer between replies up to 1 MiB (hiredis frees one
    // past 16 KiB after each reply): regrowing it for every 256 KiB value
    // cost a GET several page-faulting reallocations.
    reader->maxbuf = std::size_t{1} << 20;
    std::unique_ptr<redis_connection> c(new redis_connection(fd, reader));
    if (tls.context != nullptr) {
      out = c->tls_handshake(tls, deadline);
      // A refused certificate or a timeout: no other address either.
      if (!out.ok()) return nullptr;
    }
    out = {};
    return c;
  }
  return nullptr;
}

redis_connection::~redis_connection() {
  if (ssl_ != nullptr) SSL_free(as_ssl(ssl_));  // frees its memory BIOs
  redisReaderFree(as_reader(reader_));
  ::close(fd_);
}

io_outcome redis_connection::tls_handshake(const tls_peer& peer, steady::time_point deadline) {
  SSL* ssl = SSL_new(static_cast<SSL_CTX*>(peer.context->native()));
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  if (ssl == nullptr || rbio == nullptr || wbio == nullptr) {
    if (ssl) SSL_free(ssl);
    if (rbio) BIO_free(rbio);
    if (wbio) BIO_free(wbio);
    throw std::bad_alloc();
  }
  BIO_set_mem_eof_return(rbio, -1);  // empty: "retry" (want read), not end of file
  SSL_set_bio(ssl, rbio, wbio);
  ssl_ = ssl;
  if (is_ip_address(peer.name)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), peer.name.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, peer.name.c_str());
    SSL_set1_host(ssl, peer.name.c_str());
  }
  for (;;) {
    ERR_clear_error();
    const int r = SSL_connect(ssl);
    const int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl, r);
    if (io_outcome f = tls_flush(deadline); !f.ok()) return f;
    if (r == 1) return {};
    if (e == SSL_ERROR_WANT_READ) {
      io_outcome f = tls_fill(deadline);
      if (f.failure == io_failure::timeout) return {io_failure::timeout, "TLS handshake timed out"};
      if (!f.ok()) return {f.failure, "TLS handshake: " + f.message};
      continue;
    }
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
      ERR_clear_error();
      return {io_failure::error,
              std::string("TLS handshake: the server's certificate is refused: ") +
                  X509_verify_cert_error_string(verify)};
    }
    return {io_failure::error, "TLS handshake failed: " + openssl_errors()};
  }
}

io_outcome redis_connection::tls_flush(steady::time_point deadline) {
  BIO* wbio = SSL_get_wbio(as_ssl(ssl_));
  char* data = nullptr;
  const long n = BIO_get_mem_data(wbio, &data);
  if (n <= 0) return {};
  io_outcome out = send_all(data, static_cast<std::size_t>(n), deadline);
  (void)BIO_reset(wbio);
  return out;
}

io_outcome redis_connection::tls_fill(steady::time_point deadline) {
  char buf[16 * 1024];
  std::size_t got = 0;
  io_outcome out = recv_some(buf, sizeof buf, deadline, got);
  if (out.ok() &&
      BIO_write(SSL_get_rbio(as_ssl(ssl_)), buf, static_cast<int>(got)) != static_cast<int>(got)) {
    throw std::bad_alloc();
  }
  return out;
}

io_outcome redis_connection::send_all(const char* p, std::size_t n, steady::time_point deadline) {
  std::size_t sent = 0;
  while (sent < n) {
    ssize_t w = ::send(fd_, p + sent, n - sent, MSG_NOSIGNAL);
    if (w > 0) {
      sent += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int r = wait_for(fd_, POLLOUT, deadline);
      if (r == 0) return {io_failure::timeout, "send timed out"};
      if (r < 0) return {io_failure::error, "send: " + errno_text(-r)};
      continue;
    }
    const int e = w < 0 ? errno : EPIPE;
    return {e == EPIPE || e == ECONNRESET ? io_failure::closed : io_failure::error,
            "send: " + errno_text(e)};
  }
  return {};
}

io_outcome redis_connection::recv_some(char* p, std::size_t n, steady::time_point deadline,
                                       std::size_t& got) {
  std::optional<steady::time_point> spin_until;
  for (;;) {
    // A server trickling a large reply must not stretch the call past its deadline.
    const steady::time_point now = steady::now();
    if (now >= deadline) return {io_failure::timeout, "reply timed out"};
    ssize_t r = ::recv(fd_, p, n, 0);
    if (r > 0) {
      got = static_cast<std::size_t>(r);
      return {};
    }
    if (r == 0) return {io_failure::closed, "the server closed the connection"};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!spin_until) spin_until = std::min(deadline, now + reply_spin_);
      if (now < *spin_until) {
        for (int i = 0; i < 16; ++i) spin_pause();
        continue;
      }
      int w = wait_for(fd_, POLLIN, deadline);
      if (w == 0) return {io_failure::timeout, "reply timed out"};
      if (w < 0) return {io_failure::error, "recv: " + errno_text(-w)};
      continue;
    }
    const int e = errno;
    return {e == ECONNRESET ? io_failure::closed : io_failure::error, "recv: " + errno_text(e)};
  }
}

io_outcome redis_connection::command(std::span<const std::string_view> argv,
                                     steady::time_point deadline, redis_reply& reply) {
  io_outcome out = exchange(argv, deadline, reply);
  // Say so: over TLS a refused client certificate shows as a reset after
  // the handshake, an unknown CA on the server's side likewise.
  if (!out.ok() && ssl_ != nullptr && !out.message.starts_with("TLS")) {
    out.message = "TLS connection: " + out.message;
  }
  return out;
}

namespace {

// The failure for bytes a server sent unasked (`head`: the first of them).
// Redis writes an error reply and closes a connection it will not serve
// (maxclients at accept, its own protocol errors): its line says why.
io_outcome unasked_bytes(std::string_view head) {
  std::string message = "protocol error: bytes nobody asked for";
  const std::size_t end = head.find("\r\n");
  if (head.starts_with('-') && end != std::string_view::npos) {
    std::string said(head.substr(1, end - 1));
    for (char& c : said) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
    }
    message += " (the server said: " + said + ")";
  }
  return {io_failure::protocol, std::move(message)};
}

}  // namespace

io_outcome redis_connection::check_nothing_pending(steady::time_point deadline) {
  if (ssl_ != nullptr) return tls_check_nothing_pending(deadline);
  // What a peek shows of unasked bytes: enough for an error line.
  char head[256];
  for (;;) {
    const ssize_t r = ::recv(fd_, head, sizeof head, MSG_PEEK | MSG_DONTWAIT);
    if (r > 0) return unasked_bytes(std::string_view(head, static_cast<std::size_t>(r)));
    // Closed while idle (a server's timeout, a restart): as a send into it
    // would find, but before this command is sent.
    if (r == 0) return {io_failure::closed, "the server closed the connection"};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {};
    const int e = errno;
    return {e == ECONNRESET ? io_failure::closed : io_failure::error, "recv: " + errno_text(e)};
  }
}

io_outcome redis_connection::tls_check_nothing_pending(steady::time_point deadline) {
  // The socket may hold records that are no reply (TLS 1.3 session
  // tickets, a key update): so what it holds goes into OpenSSL without
  // waiting, and only the application data OpenSSL makes of it counts.
  // (At most 256 KiB: far more than such records take; past that a peek
  // has unasked bytes to show, however many more a server sends.)
  bool peer_closed = false;
  for (std::size_t taken = 0; taken < 256 * 1024;) {
    char buf[16 * 1024];
    const ssize_t r = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (r > 0) {
      if (BIO_write(SSL_get_rbio(as_ssl(ssl_)), buf, static_cast<int>(r)) != r) {
        throw std::bad_alloc();
      }
      taken += static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) {
      peer_closed = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    const int e = errno;
    return {e == ECONNRESET ? io_failure::closed : io_failure::error, "recv: " + errno_text(e)};
  }
  if (SSL_pending(as_ssl(ssl_)) > 0 || BIO_ctrl_pending(SSL_get_rbio(as_ssl(ssl_))) > 0) {
    char head[256];
    ERR_clear_error();
    const int n = SSL_peek(as_ssl(ssl_), head, sizeof head);
    if (n > 0) return unasked_bytes(std::string_view(head, static_cast<std::size_t>(n)));
    const int e = SSL_get_error(as_ssl(ssl_), n);
    if (e == SSL_ERROR_ZERO_RETURN) return {io_failure::closed, "the server closed TLS"};
    if (e != SSL_ERROR_WANT_READ) return {io_failure::error, "TLS: " + openssl_errors()};
    // Only records that are no data: what they ask for (a key update's
    // answer) goes out before the command.
    if (io_outcome o = tls_flush(deadline); !o.ok()) return o;
  }
  if (peer_closed) return {io_failure::closed, "the server closed the connection"};
  return {};
}

io_outcome redis_connection::exchange(std::span<const std::string_view> argv,
                                      steady::time_point deadline, redis_reply& reply) {
  std::vector<const char*> ptrs;
  std::vector<std::size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (std::string_view a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  const int n =
      redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), ptrs.data(), lens.data());
  if (n < 0 || cmd == nullptr) throw std::bad_alloc();
  std::unique_ptr<char, void (*)(char*)> owned(cmd, redisFreeCommand);

  // Nothing may be waiting before a command: no command is pipelined, so
  // bytes there answer nothing we asked (a reply's tail that came after the
  // reply, in a later segment). Read as this command's reply they would put
  // the connection one reply behind for good.
  if (io_outcome o = check_nothing_pending(deadline); !o.ok()) return o;

  // Send.
  if (ssl_ == nullptr) {
    if (io_outcome o = send_all(cmd, static_cast<std::size_t>(n), deadline); !o.ok()) return o;
  } else {
    // Into OpenSSL's memory buffer (whole: it never asks to wait), then out.
    ERR_clear_error();
    if (SSL_write(as_ssl(ssl_), cmd, n) != n) {
      return {io_failure::error, "TLS send: " + openssl_errors()};
    }
    if (io_outcome o = tls_flush(deadline); !o.ok()) return o;
  }

  // Receive until one whole reply has been parsed.
  char buf[64 * 1024];
  bounds_.start();
  for (;;) {
    void* parsed = nullptr;
    if (redisReaderGetReply(as_reader(reader_), &parsed) != REDIS_OK) {
      return {io_failure::protocol, std::string("protocol error: ") + as_reader(reader_)->errstr};
    }
    if (parsed != nullptr) {
      std::shared_ptr<const void> owner(parsed, freeReplyObject);
      // No command is pipelined, so bytes after the reply (in the reader,
      // or decrypted and not yet read) answer nothing we asked: left there,
      // they would be the next command's reply, and that one's the next's.
      const redisReader* r = as_reader(reader_);
      if (r->pos < r->len || (ssl_ != nullptr && SSL_pending(as_ssl(ssl_)) > 0)) {
        return {io_failure::protocol, "protocol error: bytes after the reply"};
      }
      reply = redis_reply{};
      convert(*static_cast<const redisReply*>(parsed), reply);
      reply.owner = std::move(owner);
      return {};
    }
    std::size_t got = 0;
    if (ssl_ == nullptr) {
      if (io_outcome o = recv_some(buf, sizeof buf, deadline, got); !o.ok()) return o;
    } else {
      ERR_clear_error();
      const int r = SSL_read(as_ssl(ssl_), buf, sizeof buf);
      if (r > 0) {
        got = static_cast<std::size_t>(r);
      } else {
        const int e = SSL_get_error(as_ssl(ssl_), r);
        if (e == SSL_ERROR_ZERO_RETURN) return {io_failure::closed, "the server closed TLS"};
        if (e != SSL_ERROR_WANT_READ) return {io_failure::error, "TLS: " + openssl_errors()};
        // Records (or a key update) to answer first, then more from the socket.
        if (io_outcome o = tls_flush(deadline); !o.ok()) return o;
        if (io_outcome o = tls_fill(deadline); !o.ok()) return o;
        continue;
      }
    }
    if (std::string why = bounds_.scan(buf, got); !why.empty()) {
      return {io_failure::protocol, "protocol error: " + why};
    }
    if (redisReaderFeed(as_reader(reader_), buf, got) != REDIS_OK) {
      return {io_failure::protocol, std::string("protocol error: ") + as_reader(reader_)->errstr};
    }
  }
}

}  // namespace primcache::persist_internal
