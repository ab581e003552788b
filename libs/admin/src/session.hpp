// One HTTP connection (private): reads a request with a timeout and size
// limits, answers it with handle_request, repeats while kept alive. Shaped
// like Beast's example/http/server/async: every handler of a session runs on
// its own strand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <set>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>

#include "primcache/admin/handle_request.hpp"
#include "primcache/base/thread_annotations.hpp"

namespace primcache::admin_internal {

inline constexpr std::size_t header_limit = 8 * 1024;
inline constexpr std::size_t body_limit = 64 * 1024;

class session;

// What the listener and every session share.
struct server_shared {
  admin_context context;
  std::chrono::milliseconds read_timeout{5000};
  std::size_t max_connections = 64;
  std::atomic<std::size_t> connections{0};

  mutex mu;
  std::set<std::weak_ptr<session>, std::owner_less<std::weak_ptr<session>>> sessions
      PRIMCACHE_GUARDED_BY(mu);
  bool stopping PRIMCACHE_GUARDED_BY(mu) = false;
};

class session : public std::enable_shared_from_this<session> {
 public:
  session(boost::asio::ip::tcp::socket&& socket, std::shared_ptr<server_shared> shared);
  ~session();

  void run();
  // Closes the connection from any thread (posted to the strand).
  void close();

 private:
  void read();
  void on_read(boost::beast::error_code ec, std::size_t bytes);
  void send(admin_response res, bool close_after);
  void on_write(bool close_after, boost::beast::error_code ec, std::size_t bytes);
  void shutdown();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::shared_ptr<admin_response> response_;
  std::shared_ptr<server_shared> shared_;
};

}  // namespace primcache::admin_internal
