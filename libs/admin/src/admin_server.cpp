#include "primcache/admin/admin_server.hpp"

#include <unistd.h>

#include <iostream>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>

#include "listener.hpp"
#include "primcache/base/error.hpp"
#include "primcache/base/thread_startup.hpp"
#include "primcache/control/registry.hpp"
#include "token.hpp"

namespace primcache {
namespace admin_internal {

namespace asio = boost::asio;

class server_state {
 public:
  explicit server_state(int threads) : ioc_(threads), work_(asio::make_work_guard(ioc_)) {}
  ~server_state() { stop(); }

  void stop() {
    if (stopped_) return;
    stopped_ = true;
    if (listener_) listener_->close();
    std::vector<std::shared_ptr<session>> live;
    {
      lock_guard g(shared_->mu);
      shared_->stopping = true;
      for (const auto& w : shared_->sessions) {
        if (auto s = w.lock()) live.push_back(std::move(s));
      }
      shared_->sessions.clear();
    }
    for (const auto& s : live) s->close();
    live.clear();
    work_.reset();  // run() returns once the closed sessions' handlers are done
    for (auto& t : threads_) t.join();
    threads_.clear();
    listener_.reset();
    if (!token_file_.empty()) ::unlink(token_file_.c_str());
  }

  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::shared_ptr<server_shared> shared_ = std::make_shared<server_shared>();
  std::shared_ptr<listener> listener_;
  std::vector<std::thread> threads_;
  thread_startups startups_;  // threads_ inside run() (start())
  std::string address_;
  std::string token_;
  std::string token_file_;  // generated here; removed by stop()
  std::uint16_t port_ = 0;
  bool stopped_ = false;
};

}  // namespace admin_internal

admin_server admin_server::start(const admin_options& options) {
  namespace asio = boost::asio;
  if (options.threads < 1 || options.threads > 64) {
    throw error(status::invalid_arguments, "admin threads " + std::to_string(options.threads) +
                                               " is out of range; use 1 to 64");
  }
  if (options.max_connections < 1) {
    throw error(status::invalid_arguments, "admin max_connections must be at least 1");
  }
  if (options.read_timeout.count() <= 0) {
    throw error(status::invalid_arguments, "admin read_timeout must be positive");
  }
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(options.address, ec);
  if (ec) {
    throw error(status::invalid_arguments,
                "admin address '" + options.address + "' is not an IP address: " + ec.message());
  }
  if (!address.is_loopback()) {
    std::cerr << "primcache admin: WARNING: listening on " << options.address
              << ", reachable from other machines; POST requests still need the token\n";
  }

  auto state = std::make_unique<admin_internal::server_state>(options.threads);
  state->address_ = address.to_string();
  state->shared_->context.registry = options.registry != nullptr ? options.registry : &control();
  state->shared_->read_timeout = options.read_timeout;
  state->shared_->max_connections = options.max_connections;
  try {
    state->listener_ = std::make_shared<admin_internal::listener>(
        state->ioc_, asio::ip::tcp::endpoint(address, options.port), state->shared_);
  } catch (const boost::system::system_error& e) {
    throw error(status::runtime_error, "admin server cannot listen on " + options.address + ":" +
                                           std::to_string(options.port) + ": " +
                                           e.code().message());
  }
  state->port_ = state->listener_->port();

  if (options.token.empty()) {
    state->token_ = admin_internal::generate_token();
    const std::string path =
        options.token_file.empty() ? admin_internal::default_token_path() : options.token_file;
    admin_internal::write_token_file(path, state->token_);
    state->token_file_ = path;
    std::cerr << "primcache admin: token written to " << path << "\n";
  } else {
    state->token_ = options.token;
  }
  state->shared_->context.token = state->token_;
  state->shared_->context.started = std::chrono::steady_clock::now();

  state->listener_->run();
  for (int i = 0; i < options.threads; ++i) {
    state->threads_.emplace_back([s = state.get()] { s->ioc_.run(); });
  }
  // Returns once every thread is inside run(), past what it allocates when it
  // starts and enters run(): a fork() right after start() must not copy an
  // allocator lock one of them holds (thread_startup.hpp). One handler per
  // thread, each waiting for all: no thread can run two of them.
  const int threads = options.threads;
  for (int i = 0; i < threads; ++i) {
    asio::post(state->ioc_, [s = state.get(), threads] {
      s->startups_.mark_started();
      s->startups_.wait_for(threads);
    });
  }
  state->startups_.wait_for(threads);
  return admin_server(std::move(state));
}

admin_server::admin_server(std::unique_ptr<admin_internal::server_state> state) noexcept
    : state_(std::move(state)) {}
admin_server::admin_server(admin_server&&) noexcept = default;
admin_server& admin_server::operator=(admin_server&&) noexcept = default;
admin_server::~admin_server() = default;

std::uint16_t admin_server::port() const {
  return state_->port_;
}
const std::string& admin_server::address() const {
  return state_->address_;
}
std::string admin_server::url() const {
  const bool v6 = state_->address_.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + state_->address_ + "]" : state_->address_) + ":" +
         std::to_string(state_->port_) + "/";
}
const std::string& admin_server::token_file() const {
  return state_->token_file_;
}
const std::string& admin_server::token() const {
  return state_->token_;
}
void admin_server::stop() {
  if (state_) state_->stop();
}

}  // namespace primcache
