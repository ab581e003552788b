// libFuzzer target: arbitrary bytes are parsed as an HTTP request by Beast's
// parser with the server's limits, and every request that parses goes through
// handle_request against a registry with a cache, a switch and settings. The
// handler must never crash, hang or throw, and every answer must be a
// well-formed status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>

#include "primcache/admin/handle_request.hpp"
#include "test_support.hpp"

namespace {

admin_test::fixture& world() {
  static admin_test::fixture* f = new admin_test::fixture;
  return *f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace http = boost::beast::http;
  static const primcache::admin_context ctx{&world().registry, "fuzz-token"};
  http::request_parser<http::string_body> parser;
  parser.header_limit(8 * 1024);
  parser.body_limit(64 * 1024);
  parser.eager(true);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (!ec && !parser.is_done()) parser.put_eof(ec);
  if (ec || !parser.is_done()) return 0;
  const primcache::admin_response res = primcache::handle_request(parser.get(), ctx);
  const unsigned code = res.result_int();
  if (code < 200 || code > 599) std::abort();
  return 0;
}
