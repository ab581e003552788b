// primcache/admin/handle_request.hpp — the admin API as a pure function from
// an HTTP request to an HTTP response, over a route table (docs/admin.md).
//
// The server's sessions call it once per parsed request; tests and the fuzzer
// call it directly. It never touches the network or the filesystem: it reads
// and turns the registry in the context, renders /metrics, and serves the
// console from the in-binary asset table.
//
//   primcache::admin_context ctx{&registry, "secret-token"};
//   primcache::admin_request req{boost::beast::http::verb::get, "/api/v1/caches", 11};
//   primcache::admin_response res = primcache::handle_request(req, ctx);
//   // res.result() == 200, res.body() == R"({"caches":[...]})"
//
// Errors are responses, not exceptions: unknown route or name 404, wrong
// method 405 (with Allow), missing or wrong bearer token on a POST 401,
// malformed JSON, wrong type or out-of-range value 400, each with a JSON body
// {"error": "..."} saying what was wrong. A GET on a mutating path is 405 and
// mutates nothing.
//
// Thread-safety: may be called from any thread at once (the registry is).
// Exceptions: std::bad_alloc only.
#pragma once

#include <chrono>
#include <string>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "primcache/base/export.hpp"

namespace primcache {

class control_registry;

using admin_request = boost::beast::http::request<boost::beast::http::string_body>;
using admin_response = boost::beast::http::response<boost::beast::http::string_body>;

struct admin_context {
  control_registry* registry = nullptr;  // nullptr: primcache::control()
  std::string token;                     // the bearer token every POST must carry
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

// The largest capacity accepted over HTTP: 2^53, exact in a JSON number.
inline constexpr std::uint64_t admin_max_capacity = std::uint64_t{1} << 53;

PRIMCACHE_API admin_response handle_request(const admin_request& request,
                                            const admin_context& context);

// A response {"error": message} with `status`, keep-alive as the request's.
PRIMCACHE_API admin_response admin_error(const admin_request& request,
                                         boost::beast::http::status status,
                                         const std::string& message);

}  // namespace primcache
