// One connection to a Redis server, with a deadline on every call: the
// socket is non-blocking and every wait is a ppoll bounded by the deadline,
// so a call ends by its deadline however the server behaves (refusing,
// silent, stopped, trickling bytes). hiredis formats commands and parses
// replies; the I/O is ours, since hiredis's blocking timeouts bound each
// read, not the whole call.
//
// Thread-safety: a connection is used by one thread at a time (the store's
// pool hands it out). Exceptions: std::bad_alloc only.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace primcache::persist_internal {

using steady = std::chrono::steady_clock;

// A resolved server address.
struct socket_address {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

// The addresses `host`:`port` resolves to (numeric addresses without a
// lookup). Empty with `why` set on failure.
std::vector<socket_address> resolve(const std::string& host, int port, std::string& why);

// A reply: hiredis's reply objects, held (not copied: values are up to
// megabytes) by the top-level reply, and a view of them.
struct redis_reply {
  enum class kind { nil, status, error, string, integer, array };
  kind type = kind::nil;
  std::string_view str;  // status, error and string replies (bytes, not text)
  long long integer = 0;
  std::vector<redis_reply> elements;  // views into the same objects
  std::shared_ptr<const void> owner;  // the top-level hiredis reply
};

enum class io_failure {
  none,
  timeout,   // the deadline passed
  closed,    // the peer refused the connection, closed it or reset it
  error,     // another socket error
  protocol,  // the reply did not parse
};

struct io_outcome {
  io_failure failure = io_failure::none;
  std::string message;  // empty when ok
  bool ok() const noexcept { return failure == io_failure::none; }
};

class redis_connection {
 public:
  // Connects to the first address that accepts before `deadline`.
  static std::unique_ptr<redis_connection> connect(const std::vector<socket_address>& addresses,
                                                   steady::time_point deadline, io_outcome& out);
  ~redis_connection();
  redis_connection(const redis_connection&) = delete;
  redis_connection& operator=(const redis_connection&) = delete;

  // Sends one command and reads its reply, all before `deadline`. After a
  // failure the connection is in an unknown state: close it.
  io_outcome command(std::span<const std::string_view> argv, steady::time_point deadline,
                     redis_reply& reply);

 private:
  redis_connection(int fd, void* reader) noexcept : fd_(fd), reader_(reader) {}
  int fd_;
  void* reader_;  // redisReader*
};

}  // namespace primcache::persist_internal
