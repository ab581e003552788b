// Accepts connections (private), each on its own strand, up to the
// connection cap; connections past it are closed at once.
#pragma once

#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "session.hpp"

namespace primcache::admin_internal {

class listener : public std::enable_shared_from_this<listener> {
 public:
  // Opens, binds and listens; throws boost::system::system_error.
  listener(boost::asio::io_context& ioc, const boost::asio::ip::tcp::endpoint& endpoint,
           std::shared_ptr<server_shared> shared);

  void run();
  // Stops accepting (posted to the acceptor's strand).
  void close();
  unsigned short port() const { return port_; }

 private:
  void accept();
  void on_accept(boost::beast::error_code ec, boost::asio::ip::tcp::socket socket);

  boost::asio::io_context& ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  // After a failed accept (EMFILE, ENFILE, ENOBUFS: the connection stays in
  // the backlog), the next try waits for it, on the acceptor's strand:
  // retrying at once would spin a core until descriptors free up.
  boost::asio::steady_timer retry_;
  std::shared_ptr<server_shared> shared_;
  unsigned short port_ = 0;
};

}  // namespace primcache::admin_internal
