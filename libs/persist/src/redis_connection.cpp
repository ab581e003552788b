#include "redis_connection.hpp"

#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace primcache::persist_internal {
namespace {

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

}  // namespace

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

std::unique_ptr<redis_connection> redis_connection::connect(
    const std::vector<socket_address>& addresses, steady::time_point deadline, io_outcome& out) {
  out = {io_failure::error, "no address to connect to"};
  for (const socket_address& a : addresses) {
    int fd = ::socket(a.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      out = {io_failure::error, "socket: " + errno_text(errno)};
      continue;
    }
    int r = ::connect(fd, reinterpret_cast<const sockaddr*>(&a.addr), a.len);
    if (r != 0 && errno == EINPROGRESS) {
      int w = wait_for(fd, POLLOUT, deadline);
      if (w == 0) {
        ::close(fd);
        out = {io_failure::timeout, "connect timed out"};
        return nullptr;  // the deadline is spent: no other address either
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
    out = {};
    return std::unique_ptr<redis_connection>(new redis_connection(fd, reader));
  }
  return nullptr;
}

redis_connection::~redis_connection() {
  redisReaderFree(as_reader(reader_));
  ::close(fd_);
}

io_outcome redis_connection::command(std::span<const std::string_view> argv,
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

  // Send.
  std::size_t sent = 0;
  while (sent < static_cast<std::size_t>(n)) {
    ssize_t w = ::send(fd_, cmd + sent, static_cast<std::size_t>(n) - sent, MSG_NOSIGNAL);
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

  // Receive until one whole reply has been parsed.
  char buf[64 * 1024];
  for (;;) {
    void* parsed = nullptr;
    if (redisReaderGetReply(as_reader(reader_), &parsed) != REDIS_OK) {
      return {io_failure::protocol, std::string("protocol error: ") + as_reader(reader_)->errstr};
    }
    if (parsed != nullptr) {
      std::shared_ptr<const void> owner(parsed, freeReplyObject);
      reply = redis_reply{};
      convert(*static_cast<const redisReply*>(parsed), reply);
      reply.owner = std::move(owner);
      return {};
    }
    // A server trickling a large reply must not stretch the call past its deadline.
    if (steady::now() >= deadline) return {io_failure::timeout, "reply timed out"};
    ssize_t got = ::recv(fd_, buf, sizeof buf, 0);
    if (got > 0) {
      if (redisReaderFeed(as_reader(reader_), buf, static_cast<std::size_t>(got)) != REDIS_OK) {
        return {io_failure::protocol, std::string("protocol error: ") + as_reader(reader_)->errstr};
      }
      continue;
    }
    if (got == 0) return {io_failure::closed, "the server closed the connection"};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int r = wait_for(fd_, POLLIN, deadline);
      if (r == 0) return {io_failure::timeout, "reply timed out"};
      if (r < 0) return {io_failure::error, "recv: " + errno_text(-r)};
      continue;
    }
    const int e = errno;
    return {e == ECONNRESET ? io_failure::closed : io_failure::error, "recv: " + errno_text(e)};
  }
}

}  // namespace primcache::persist_internal
