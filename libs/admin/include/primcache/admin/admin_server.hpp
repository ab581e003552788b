// primcache/admin/admin_server.hpp — the embeddable admin HTTP server: the
// admin API, /metrics and the web console, on its own I/O threads.
//
// One call starts it; the handle stops it (stop() or the destructor drain the
// connections and join the threads). It never runs on the host's threads.
//
//   primcache::admin_server server = primcache::admin_server::start({});
//   std::cerr << "console: " << server.url() << "\n";   // http://127.0.0.1:PORT/
//   ...
//   server.stop();
//
// Security (docs/admin.md): binds 127.0.0.1 unless another address is
// configured (then a warning goes to stderr). Every POST needs
// "Authorization: Bearer <token>"; without a configured token one is generated
// and written to a new file (mode 0600, created exclusively) whose path is
// printed to stderr and removed again by stop(). Requests are bounded:
// headers 8 KiB (431), bodies 64 KiB (413), read_timeout per request, at most
// max_connections open connections (others are closed at once).
//
// Thread-safety: start() may be called from any thread; a handle is one
// owner's (move-only); its accessors are const and safe from any thread.
// Exceptions: start() throws primcache::error — invalid_arguments for bad
// options, runtime_error when the address cannot be bound or the token file
// cannot be created.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "primcache/base/export.hpp"

namespace primcache {

class control_registry;

struct admin_options {
  std::string address = "127.0.0.1";  // another address only when set, with a warning on stderr
  std::uint16_t port = 0;             // 0: an ephemeral port (read it back with port())
  std::string token;                  // bearer token; empty: generate one
  std::string token_file;             // where the generated token is written (new file, mode 0600);
                                      // empty: $XDG_RUNTIME_DIR or /tmp, a unique name; printed
  int threads = 1;                    // I/O threads
  std::size_t max_connections = 64;
  std::chrono::milliseconds read_timeout{5000};
  control_registry* registry = nullptr;  // nullptr: primcache::control()
};

namespace admin_internal {
class server_state;
}  // namespace admin_internal

class PRIMCACHE_API admin_server {
 public:
  static admin_server start(const admin_options& options);

  admin_server(admin_server&&) noexcept;
  admin_server& operator=(admin_server&&) noexcept;
  admin_server(const admin_server&) = delete;
  admin_server& operator=(const admin_server&) = delete;
  ~admin_server();

  std::uint16_t port() const;
  const std::string& address() const;
  std::string url() const;                // "http://127.0.0.1:PORT/"
  const std::string& token_file() const;  // "" when the token was given
  const std::string& token() const;
  // Stops accepting, closes every connection, joins the I/O threads and
  // removes a generated token file. Idempotent; also run by the destructor.
  void stop();

 private:
  explicit admin_server(std::unique_ptr<admin_internal::server_state> state) noexcept;
  std::unique_ptr<admin_internal::server_state> state_;
};

}  // namespace primcache
