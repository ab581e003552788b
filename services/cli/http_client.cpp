#include "http_client.hpp"

#include "resolve.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <future>
#include <memory>
#include <thread>

namespace primcache::cli {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

namespace {

// "300 ms", "10 s": the timeout as the messages say it.
std::string duration_text(std::chrono::milliseconds d) {
  const long long ms = d.count();
  if (ms >= 1000 && ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

// Runs the operations started on `ioc` to completion. Every operation is
// bounded by the stream's expiry (beast::tcp_stream closes the socket and
// completes it with beast::error::timeout), so this returns by the deadline.
void run_all(boost::asio::io_context& ioc) {
  ioc.restart();
  ioc.run();
}

}  // namespace

tcp::resolver::results_type resolve_within(const std::string& host, std::uint16_t port,
                                           std::chrono::steady_clock::time_point deadline,
                                           const std::string& within, lookup_fn lookup) {
  const std::string where = host + ":" + std::to_string(port);
  if (!lookup) {
    lookup = [](const std::string& h, const std::string& p) {
      boost::asio::io_context ioc;
      return tcp::resolver(ioc).resolve(h, p);  // throws boost::system::system_error
    };
  }
  // getaddrinfo cannot be cancelled: the thread owns all it uses (the
  // promise's shared state, copies of the arguments), so leaving it
  // behind at the deadline is safe.
  auto answer = std::make_shared<std::promise<tcp::resolver::results_type>>();
  std::future<tcp::resolver::results_type> f = answer->get_future();
  std::thread([answer, lookup = std::move(lookup), host, service = std::to_string(port)] {
    try {
      answer->set_value(lookup(host, service));
    } catch (...) {
      answer->set_exception(std::current_exception());
    }
  }).detach();
  if (f.wait_until(deadline) != std::future_status::ready) {
    throw connect_error("cannot resolve " + where + ": no answer from the resolver within " +
                        within);
  }
  try {
    return f.get();
  } catch (const boost::system::system_error& e) {
    throw connect_error("cannot resolve " + where + ": " + e.code().message());
  }
}

http_response http_request(const std::string& host, std::uint16_t port, const std::string& method,
                           const std::string& target, const std::string& body,
                           const std::string& token, std::chrono::milliseconds timeout) {
  const std::string where = host + ":" + std::to_string(port);
  const std::string within = duration_text(timeout);
  // One deadline for the whole request: lookup, connect, send and the
  // answer together take at most `timeout`. Beast's timeouts apply to its
  // asynchronous operations only, hence async_* driven by the io_context.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto endpoints = resolve_within(host, port, deadline, within);
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;

  stream.expires_at(deadline);
  stream.async_connect(endpoints,
                       [&](const beast::error_code& e, const tcp::endpoint&) { ec = e; });
  run_all(ioc);
  if (ec == beast::error::timeout) {
    throw connect_error("no primcached answers at " + where + " (no connection within " + within +
                        ")");
  }
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
  stream.expires_at(deadline);
  http::async_write(stream, req, [&](const beast::error_code& e, std::size_t) { ec = e; });
  run_all(ioc);
  if (ec == beast::error::timeout) {
    throw connect_error("cannot send to " + where + ": timed out after " + within);
  }
  if (ec) throw connect_error("cannot send to " + where + ": " + ec.message());

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  stream.expires_at(deadline);
  http::async_read(stream, buffer, parser,
                   [&](const beast::error_code& e, std::size_t) { ec = e; });
  run_all(ioc);
  if (ec == beast::error::timeout) {
    throw connect_error("no answer from " + where + ": timed out after " + within +
                        " (is primcached stopped or too busy?)");
  }
  if (ec) throw connect_error("no answer from " + where + ": " + ec.message());
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  http_response out;
  out.status = static_cast<int>(parser.get().result_int());
  out.body = std::move(parser.get().body());
  return out;
}

}  // namespace primcache::cli
