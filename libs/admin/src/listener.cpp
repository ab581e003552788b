#include "listener.hpp"

#include <chrono>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/bind_handler.hpp>

namespace primcache::admin_internal {

namespace asio = boost::asio;
namespace beast = boost::beast;

namespace {
constexpr std::chrono::milliseconds k_accept_retry{50};
}  // namespace

listener::listener(asio::io_context& ioc, const asio::ip::tcp::endpoint& endpoint,
                   std::shared_ptr<server_shared> shared)
    : ioc_(ioc),
      acceptor_(asio::make_strand(ioc)),
      retry_(acceptor_.get_executor()),
      shared_(std::move(shared)) {
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen(asio::socket_base::max_listen_connections);
  port_ = acceptor_.local_endpoint().port();
}

void listener::run() {
  asio::post(acceptor_.get_executor(), [self = shared_from_this()] { self->accept(); });
}

void listener::close() {
  asio::post(acceptor_.get_executor(), [self = shared_from_this()] {
    beast::error_code ec;
    self->acceptor_.close(ec);
    self->retry_.cancel();
  });
}

void listener::accept() {
  acceptor_.async_accept(asio::make_strand(ioc_),
                         beast::bind_front_handler(&listener::on_accept, shared_from_this()));
}

void listener::on_accept(beast::error_code ec, asio::ip::tcp::socket socket) {
  if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
  if (!ec) {
    if (shared_->connections.fetch_add(1, std::memory_order_relaxed) >= shared_->max_connections) {
      shared_->connections.fetch_sub(1, std::memory_order_relaxed);
      beast::error_code ignored;
      socket.close(ignored);  // over the cap: refused at once, nothing read
    } else {
      auto s = std::make_shared<session>(std::move(socket), shared_);
      bool stopping = false;
      {
        lock_guard g(shared_->mu);
        stopping = shared_->stopping;
        if (!stopping) {
          // Drop the entries of sessions that have ended while we are here.
          std::erase_if(shared_->sessions, [](const auto& w) { return w.expired(); });
          shared_->sessions.insert(s);
        }
      }
      if (stopping) return;
      s->run();
    }
  } else {
    retry_.expires_after(k_accept_retry);
    retry_.async_wait([self = shared_from_this()](beast::error_code wait_ec) {
      if (wait_ec || !self->acceptor_.is_open()) return;
      self->accept();
    });
    return;
  }
  accept();
}

}  // namespace primcache::admin_internal
