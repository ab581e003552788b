// services/cli/http_client.hpp — one synchronous HTTP/1.1 request to a
// primcached admin server (Boost.Beast), as the primcache command line needs.
//
//   primcache::cli::http_response r =
//       primcache::cli::http_request("127.0.0.1", 8477, "GET", "/api/v1/caches", "", "");
//   if (r.status == 200) ...
//
// `timeout` bounds the whole request: looking the host up, connecting,
// sending and reading the answer together (asynchronous operations under one
// deadline; the system's resolver, which cannot be interrupted, runs on a
// thread of its own that is left behind if it outlasts the deadline). A
// server that accepts but never answers, a stopped one, or a name server
// that does not answer, is an error after `timeout`, not a wait without end.
//
// Thread-safety: independent calls may run concurrently. Exceptions:
// primcache::cli::connect_error when nothing answers at the address (or the
// connection fails, or the timeout passes), with a message naming the
// address and why: "no primcached answers at 127.0.0.1:8477 (Connection
// refused)", "... (no connection within 10 s)", "no answer from
// 127.0.0.1:8477: timed out after 10 s (is primcached stopped or too busy?)",
// "cannot resolve admin.example:8477: no answer from the resolver within 10 s".
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace primcache::cli {

struct http_response {
  int status = 0;
  std::string body;
};

class connect_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `token` non-empty: sent as Authorization: Bearer; `body` non-empty: sent as
// application/json. `timeout`: for the whole request (above).
http_response http_request(const std::string& host, std::uint16_t port, const std::string& method,
                           const std::string& target, const std::string& body,
                           const std::string& token,
                           std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace primcache::cli
