// One connection to a Redis server, with a deadline on every call: the
// socket is non-blocking and every wait is a ppoll bounded by the deadline,
// so a call ends by its deadline however the server behaves (refusing,
// silent, stopped, trickling bytes). hiredis formats commands and parses
// replies; the I/O is ours, since hiredis's blocking timeouts bound each
// read, not the whole call. With a TLS context (OpenSSL's libssl) the
// handshake and every record go over the same non-blocking socket, under
// the same deadlines.
//
// Thread-safety: a connection is used by one thread at a time (the store's
// pool hands it out). Exceptions: std::bad_alloc only.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
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

// A TLS client context (SSL_CTX): TLS 1.2 or later, the server's
// certificate verified against `ca_file` (empty: the system's CAs), and a
// client certificate when `cert_file` is given. Throws error(invalid_arguments)
// naming the file and OpenSSL's reason when one cannot be loaded.
class tls_context {
 public:
  tls_context(const std::string& ca_file, const std::string& cert_file,
              const std::string& key_file);
  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;
  void* native() const noexcept { return ctx_; }  // SSL_CTX*

 private:
  void* ctx_;
};

// What a TLS connection checks the server's certificate against: a DNS
// name (also sent as SNI) or an IP address.
struct tls_peer {
  const tls_context* context = nullptr;  // null: plain TCP
  std::string name;
};

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

// What one reply may hold. hiredis 0.14 takes any length a header
// announces and buffers towards it, and builds an object per array element
// before anyone looks at the type; so the connection checks each header as
// its bytes arrive, before hiredis sees them, and refuses a reply over these
// bounds (a protocol error: the connection is closed, the call failed).
//
// Bytes: the largest entry any member of a fleet may have stored, whatever
// this store's own capacity (members' capacities differ, as for the
// directory store, whose entry files are at most 1 GiB too), and the
// framing around it. Elements: all the arrays of one reply together; the
// largest reply the store asks for is a SCAN batch of COUNT 1000 keys
// (COUNT is a hint: a batch may hold somewhat more).
// A put refuses an entry over max_value_bytes.
inline constexpr std::uint64_t max_value_bytes = std::uint64_t{1} << 30;
inline constexpr std::uint64_t max_reply_bytes = max_value_bytes + (1 << 20);
inline constexpr std::uint64_t max_reply_elements = 1 << 16;

// Checks the framing of one reply as its bytes arrive: each header's type
// and length, the bytes and elements of the reply so far. Bytes after the
// reply's end are not looked at (the caller finds them in hiredis's reader).
class reply_bounds {
 public:
  // Expects the first byte of a new reply.
  void start() noexcept;
  // Scans the next `n` bytes; empty when they keep to the bounds, else
  // what they break.
  std::string scan(const char* p, std::size_t n);

 private:
  enum class at { type, number, line, bulk };
  void item_done() noexcept;
  std::string header_done();
  at at_ = at::type;
  char type_ = 0;
  bool after_cr_ = false;
  bool negative_ = false;
  int digits_ = 0;
  std::uint64_t number_ = 0;     // saturates at UINT64_MAX
  std::uint64_t bulk_left_ = 0;  // of a string and its CRLF
  std::uint64_t bytes_ = 0;
  std::uint64_t elements_ = 0;
  std::vector<std::uint64_t> open_;  // elements still to come of each array being read
  bool done_ = false;
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
  // Connects to the first address that accepts before `deadline` (and,
  // with tls.context, completes the TLS handshake with it by then). Of the
  // time left, each address in turn gets an equal share, the last one the
  // rest, so one that never answers does not starve those after it.
  static std::unique_ptr<redis_connection> connect(const std::vector<socket_address>& addresses,
                                                   steady::time_point deadline, io_outcome& out,
                                                   const tls_peer& tls = {});
  ~redis_connection();
  redis_connection(const redis_connection&) = delete;
  redis_connection& operator=(const redis_connection&) = delete;

  // Sends one command and reads its reply, all before `deadline`. After a
  // failure the connection is in an unknown state: close it. A reply over
  // the bounds above, or followed by bytes no command asked for, is a
  // protocol failure.
  io_outcome command(std::span<const std::string_view> argv, steady::time_point deadline,
                     redis_reply& reply);

  // How long a read that finds nothing keeps asking the socket before it
  // sleeps in ppoll (0: sleeps at once). A reply that comes within it costs
  // no wake-up of this thread, which on a virtual machine's idle vCPU is
  // tens of microseconds, the larger part of a loopback GET.
  void set_reply_spin(std::chrono::microseconds spin) noexcept { reply_spin_ = spin; }

 private:
  redis_connection(int fd, void* reader) noexcept : fd_(fd), reader_(reader) {}
  // command() without its message's TLS mention.
  io_outcome exchange(std::span<const std::string_view> argv, steady::time_point deadline,
                      redis_reply& reply);
  // Fails unless the connection has no reply bytes waiting (a protocol
  // error) and is still open (closed: so a pooled connection the server
  // dropped is found before a command goes into it). Never waits for the
  // socket; over TLS it may send what the records found there ask for.
  io_outcome check_nothing_pending(steady::time_point deadline);
  io_outcome tls_check_nothing_pending(steady::time_point deadline);
  // Sends all `n` bytes on the socket before `deadline`.
  io_outcome send_all(const char* p, std::size_t n, steady::time_point deadline);
  // Receives what the socket has (waiting for some until `deadline`): the
  // byte count in `got`.
  io_outcome recv_some(char* p, std::size_t n, steady::time_point deadline, std::size_t& got);
  // TLS: OpenSSL reads and writes memory buffers; these move them over the
  // socket (so every byte goes through send_all/recv_some: MSG_NOSIGNAL,
  // the deadline).
  io_outcome tls_flush(steady::time_point deadline);
  io_outcome tls_fill(steady::time_point deadline);
  io_outcome tls_handshake(const tls_peer& peer, steady::time_point deadline);
  int fd_;
  void* reader_;  // redisReader*
  reply_bounds bounds_;
  void* ssl_ = nullptr;  // SSL*, or null for plain TCP
  std::chrono::microseconds reply_spin_{0};
};

}  // namespace primcache::persist_internal
