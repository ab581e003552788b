#include "session.hpp"

#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

namespace primcache::admin_internal {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

session::session(asio::ip::tcp::socket&& socket, std::shared_ptr<server_shared> shared)
    : stream_(std::move(socket)), shared_(std::move(shared)) {}

session::~session() {
  shared_->connections.fetch_sub(1, std::memory_order_relaxed);
}

void session::run() {
  // The accepted socket's executor is the strand the listener made for it.
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
}

void session::close() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] {
    beast::error_code ec;
    self->stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    self->stream_.close();
  });
}

void session::read() {
  parser_.emplace();
  parser_->header_limit(header_limit);
  parser_->body_limit(body_limit);
  // The whole request (headers and body) must arrive within the timeout.
  stream_.expires_after(shared_->read_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   beast::bind_front_handler(&session::on_read, shared_from_this()));
}

void session::on_read(beast::error_code ec, std::size_t) {
  if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
      ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
      ec == asio::error::eof) {
    return shutdown();
  }
  if (ec) {
    // A request we refuse whole; the connection cannot be trusted past it.
    admin_request stub;
    stub.version(11);
    stub.keep_alive(false);
    if (ec == http::error::header_limit) {
      return send(admin_error(stub, http::status::request_header_fields_too_large,
                              "the request headers are larger than 8 KiB"),
                  true);
    }
    if (ec == http::error::body_limit) {
      return send(admin_error(stub, http::status::payload_too_large,
                              "the request body is larger than 64 KiB"),
                  true);
    }
    if (ec == asio::error::not_connected || ec == asio::error::bad_descriptor) return shutdown();
    return send(admin_error(stub, http::status::bad_request, "malformed request: " + ec.message()),
                true);
  }
  const admin_request& req = parser_->get();
  admin_response res = handle_request(req, shared_->context);
  const bool close_after = !req.keep_alive() || res.need_eof();
  send(std::move(res), close_after);
}

void session::send(admin_response res, bool close_after) {
  if (close_after) res.keep_alive(false);
  response_ = std::make_shared<admin_response>(std::move(res));
  stream_.expires_after(shared_->read_timeout);
  http::async_write(stream_, *response_,
                    beast::bind_front_handler(&session::on_write, shared_from_this(), close_after));
}

void session::on_write(bool close_after, beast::error_code ec, std::size_t) {
  response_.reset();
  if (ec || close_after) return shutdown();
  read();
}

void session::shutdown() {
  beast::error_code ec;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  stream_.close();
}

}  // namespace primcache::admin_internal
