#include "http_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace primcache::cli {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

http_response http_request(const std::string& host, std::uint16_t port, const std::string& method,
                           const std::string& target, const std::string& body,
                           const std::string& token, std::chrono::milliseconds timeout) {
  const std::string where = host + ":" + std::to_string(port);
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec) throw connect_error("cannot resolve " + where + ": " + ec.message());
  stream.expires_after(timeout);
  stream.connect(endpoints, ec);
  if (ec) {
    throw connect_error("no primcached answers at " + where + " (" + ec.message() + ")");
  }

  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, where);
  req.set(http::field::user_agent, "primcache-cli");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();
  stream.expires_after(timeout);
  http::write(stream, req, ec);
  if (ec) throw connect_error("cannot send to " + where + ": " + ec.message());

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  stream.expires_after(timeout);
  http::read(stream, buffer, parser, ec);
  if (ec) throw connect_error("no answer from " + where + ": " + ec.message());
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  http_response out;
  out.status = static_cast<int>(parser.get().result_int());
  out.body = std::move(parser.get().body());
  return out;
}

}  // namespace primcache::cli
