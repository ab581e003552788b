// primcache/persist/redis_store.hpp — the persistent cache in a Redis
// server, shared by a fleet of processes; short timeouts and a circuit
// breaker, so a dead or stalled server costs creators a bounded wait and,
// once the breaker opens, nothing.
//
//   primcache::redis_store_options o =
//       primcache::parse_redis_url("redis://cache.internal:6379/primcache?ttl=86400");
//   o.format.library_version = primcache_version_and_build_id;
//   o.format.key = fleet_key;                  // optional; keep it alive as long as the store
//   std::unique_ptr<primcache::redis_store> s = primcache::redis_store::open(o);
//   s->put(id, blob);                          // SET <prefix>:<hash> <entry> NX [EX ttl]
//   std::optional<std::vector<std::byte>> b = s->get(id);
//
// URL: redis[s]://HOST[:PORT]/PREFIX[?NAME=VALUE&...] — HOST a name, an IPv4
// address or [an IPv6 address]; PORT 1-65535 (default 6379); PREFIX one or
// more of A-Z a-z 0-9 _ . : / - (the path is a key prefix, not a database
// number); parameters ttl (seconds, 0 = none), connect_timeout_ms,
// command_timeout_ms, reply_spin_us, breaker_failures, breaker_cool_down_ms; with
// rediss:// (TLS) also tls_ca_file, tls_cert_file, tls_key_file (paths,
// %XX escapes allowed) and tls_server_name. A password
// (and an ACL user name) may come before the host
// (redis://[USER]:PASSWORD@HOST..., %XX escapes allowed): every connection
// sends AUTH first; the password is never put in a message or describe().
// Anything else (another scheme, credentials without ':', an empty
// password, an unknown or repeated parameter, a bad number) is refused with
// error(invalid_arguments) naming what is wrong (without the password).
//
// Contract:
// - Keys: PREFIX ":" and the 32 hex digits of the key's XXH3-128; values are
//   entries (entry.hpp), so what get() returns was checked like a directory
//   entry (whole, same version, same key, checksum, signature). A bad value
//   is never returned: it is counted (corrupt_entries) and deleted from the
//   server if it is still the value read (unless read-only). So is a value
//   of another type (a list, ...) under an entry's key, which would
//   otherwise make every put of that entry `exists`.
// - put() stores with SET NX (an existing entry is kept: `exists`) and the
//   TTL when one is set. capacity() is only a bound on one entry's size
//   (too_large); the server's maxmemory policy does the evicting.
// - size(): the bytes of the values under PREFIX:<32 hex digits>, whoever
//   wrote them, counted by a walk of the server's keys (SCAN, a batch of
//   1000 keys summed by a script per round trip). A call walks only when
//   the last complete walk is older than size_refresh or this store has
//   put, erased or cleared since; it walks for at most size_walk_budget
//   (plus one call's timeout) and a walk that does not finish is resumed
//   by the next call. Meanwhile, and when the server fails, it returns the
//   last complete walk's figure (0 before the first). stats().bytes is that
//   figure; stats() never touches the network.
// - Time: a call waits at most connect_timeout + command_timeout (default
//   50 + 50 ms) for the server, however it fails (refusing, silent,
//   stopped, slow); the I/O is non-blocking, bounded by one deadline. A
//   get() that finds a bad value deletes it with a second call, bounded
//   alike.
// - Circuit breaker (circuit_breaker.hpp): breaker_failures consecutive
//   failed calls (connection refused or reset, timeouts, protocol errors)
//   open it; while open, calls do not reach the server (get() misses,
//   put() fails, erase() is false) and cost nothing; after breaker_cool_down
//   one call probes; its success closes the breaker. Error replies (OOM,
//   READONLY, ...) are counted in remote_errors but do not open it: the
//   server answered at once.
// - Connections: a pool of up to max_idle_connections idle connections; a
//   call takes one (or connects), uses it alone and gives it back unless it
//   failed. A failed connection empties the pool (after a restart all of
//   them are stale) and a call whose pooled connection turns out closed
//   retries once on a fresh one within its time.
// - TLS (rediss://, OpenSSL's libssl over the same non-blocking socket and
//   deadlines): TLS 1.2 or later; the server's certificate must chain to
//   tls_ca_file (default: the system's CAs) and name tls_server_name
//   (default: HOST; an IP address is matched against the certificate's IP
//   addresses); tls_cert_file and tls_key_file present a client certificate
//   (for tls-auth-clients). A refused certificate or a failed handshake is
//   a failed call (remote_errors; it counts toward the breaker). The
//   handshake is part of connecting, within connect_timeout + command_timeout.
// - The host is resolved once, by open().
//
// Thread-safety: every member may be called from any thread at once (no
// lock is held during I/O). A forked child must open its own store.
// Exceptions: parse_redis_url and open() throw error(invalid_arguments) for
// malformed options (open(): also TLS files that cannot be loaded, naming
// the file and OpenSSL's reason), open() error(not_found) for a host that does not
// resolve; clear() throws error(permission_denied) when read-only and
// error(runtime_error) when the server cannot be reached; the rest report
// failures as values.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "primcache/base/export.hpp"
#include "primcache/persist/blob_store.hpp"
#include "primcache/persist/circuit_breaker.hpp"
#include "primcache/persist/entry.hpp"

namespace primcache {

struct redis_store_options {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string prefix = "primcache";
  // Seconds an entry lives in Redis; 0: no TTL.
  std::uint32_t ttl_seconds = 0;
  std::chrono::milliseconds connect_timeout{50};
  std::chrono::milliseconds command_timeout{50};
  // How long a call waiting for its reply keeps asking the socket before it
  // sleeps (0: sleeps at once): a reply within it costs no wake-up of the
  // caller's thread, which is most of a loopback or same-rack GET on a
  // virtual machine. Spent only while a reply is awaited, at most once per
  // read.
  std::chrono::microseconds reply_spin{100};
  circuit_breaker_options breaker;
  std::uint32_t max_idle_connections = 8;
  // Sent with AUTH on every new connection when the password is not empty
  // (AUTH PASSWORD for requirepass; AUTH USER PASSWORD for an ACL user).
  std::string username;
  std::string password;
  // TLS (rediss://): the server's certificate is verified against
  // tls_ca_file (PEM; empty: the system's CAs) and tls_server_name (empty:
  // host); tls_cert_file (a PEM chain) and tls_key_file (its PEM key), both
  // or neither, are the client's certificate.
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_server_name;
  // size(): how old a complete walk may be before size() walks again, and
  // how long one size() call may walk.
  std::chrono::milliseconds size_refresh{5000};
  std::chrono::milliseconds size_walk_budget{50};
  // MB; only an entry larger than this is refused (too_large).
  std::uint64_t capacity_mb = 1024;
  bool read_only = false;
  // Library version and fleet key (borrowed) of the entries written and accepted.
  entry_format format;
};

// `base` with the URL's host, port, prefix and parameters applied.
PRIMCACHE_API redis_store_options parse_redis_url(std::string_view url,
                                                  redis_store_options base = {});

// The URL as a message may show it: credentials (anything before the last
// '@') replaced by "***". What to print of a URL from a user.
PRIMCACHE_API std::string redact_redis_url(std::string_view url);

class PRIMCACHE_API redis_store final : public blob_store {
 public:
  // Checks the options and resolves the host; does not connect (a server
  // that is down at start makes calls miss, and the breaker open).
  static std::unique_ptr<redis_store> open(redis_store_options options);
  ~redis_store() override;

  std::optional<std::vector<std::byte>> get(std::span<const std::byte> key) override;
  put_result put(std::span<const std::byte> key, std::span<const std::byte> payload) override;
  bool erase(std::span<const std::byte> key) override;
  // Bytes under the prefix, by a bounded, resumable walk: see above.
  std::uint64_t size() const override;
  std::uint64_t capacity() const override;
  void set_capacity(std::uint64_t megabytes) override;
  // Deletes every key under the prefix (SCAN + UNLINK).
  void clear() override;
  blob_store_stats stats() const override;
  bool read_only() const noexcept override;
  // "redis HOST:PORT/PREFIX" ("rediss ..." with TLS; never the password).
  std::string describe() const override;

  breaker_state breaker() const;
  // The Redis key an entry for `key` is stored under.
  std::string redis_key(std::span<const std::byte> key) const;

 private:
  struct state;
  explicit redis_store(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

}  // namespace primcache
