#include "redis_test_support.hpp"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string_view>
#include <thread>

extern char** environ;

namespace primcache::test {
namespace {

// redis-server on PATH (or in /usr/bin, where Debian puts it); empty if none.
std::string find_redis_server() {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/bin:/usr/sbin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string candidate = path.substr(start, end - start) + "/redis-server";
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

bool answers_ping(int port) {
  timeval tv{0, 200000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c == nullptr) return false;
  bool ok = false;
  if (c->err == 0) {
    redisSetTimeout(c, tv);
    auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
    // NOAUTH: up, with --requirepass.
    ok = r != nullptr &&
         (r->type == REDIS_REPLY_STATUS ||
          (r->type == REDIS_REPLY_ERROR && std::string_view(r->str).starts_with("NOAUTH")));
    if (r) freeReplyObject(r);
  }
  redisFree(c);
  return ok;
}

}  // namespace

int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw std::runtime_error("cannot find a free loopback port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

int listen_on_loopback(const char* who, int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(fd, 16) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(std::string(who) + ": cannot listen on loopback");
  }
  port = ntohs(a.sin_port);
  return fd;
}

void redis_server::make_dir() {
  std::string tmpl = std::filesystem::temp_directory_path().string() + "/primcache-redis-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
}

redis_server::redis_server(int port, std::vector<std::string> extra) : extra_(std::move(extra)) {
  if (port == 0) port = free_loopback_port();
  make_dir();
  port_ = port;
  try {
    start();
  } catch (const std::runtime_error&) {
    if (pid_ > 0) kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

redis_server::redis_server() {
  make_dir();
  // Another test run may take the free port between our probe and the
  // server's bind (ctest -j): then the server exits at once; try another.
  for (int attempt = 1;; ++attempt) {
    port_ = free_loopback_port();
    try {
      start();
      return;
    } catch (const std::runtime_error&) {
      if (attempt == 5 || pid_ > 0) {
        if (pid_ > 0) kill();
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);  // no destructor runs for a throwing constructor
        throw;
      }
    }
  }
}

redis_server::~redis_server() {
  if (pid_ > 0) {
    ::kill(pid_, SIGCONT);  // a stopped server must be able to die
    kill();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string redis_server::url(std::string_view prefix) const {
  return "redis://127.0.0.1:" + std::to_string(port_) + "/" + std::string(prefix);
}

void redis_server::start() {
  const std::string exe = find_redis_server();
  if (exe.empty()) {
    throw std::runtime_error(
        "redis-server is not installed: the Redis store's tests need a real server; run "
        "scripts/install-deps (Debian package redis-server)");
  }
  std::vector<std::string> argv = {exe,
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--daemonize",
                                   "no",
                                   "--enable-debug-command",
                                   "yes",
                                   "--dir",
                                   dir_,
                                   "--logfile",
                                   dir_ + "/redis.log"};
  argv.insert(argv.end(), extra_.begin(), extra_.end());
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  int rc = ::posix_spawn(&pid_, exe.c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error("cannot start " + exe);
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < end) {
    if (answers_ping(port_)) return;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server exited at start; see " + dir_ + "/redis.log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("redis-server did not answer PING within 20 s on port " +
                           std::to_string(port_));
}

void redis_server::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  ::waitpid(pid_, &st, 0);
  pid_ = -1;
}

void redis_server::restart() {
  kill();
  start();
}

void redis_server::pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void redis_server::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

raw_redis::raw_redis(int port, int timeout_s) {
  timeval tv{timeout_s, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c == nullptr || c->err != 0) {
    std::string why = c ? c->errstr : "out of memory";
    if (c) redisFree(c);
    throw std::runtime_error("cannot connect to redis on port " + std::to_string(port) + ": " +
                             why);
  }
  redisSetTimeout(c, tv);
  ctx_ = c;
}

raw_redis::~raw_redis() {
  redisFree(static_cast<redisContext*>(ctx_));
}

namespace {
std::string reply_text(redisReply* r) {
  std::string out;
  switch (r->type) {
    case REDIS_REPLY_INTEGER: out = std::to_string(r->integer); break;
    case REDIS_REPLY_NIL: out = "(nil)"; break;
    case REDIS_REPLY_ARRAY: out = "(array of " + std::to_string(r->elements) + ")"; break;
    default: out.assign(r->str, r->len); break;
  }
  return out;
}
}  // namespace

std::string raw_redis::next_reply() {
  auto* c = static_cast<redisContext*>(ctx_);
  redisSetTimeout(c, timeval{0, 0});  // blocking: a monitor may be idle for long
  void* reply = nullptr;
  if (redisGetReply(c, &reply) != REDIS_OK || reply == nullptr) {
    throw std::runtime_error(std::string("redis read failed: ") + c->errstr);
  }
  auto* r = static_cast<redisReply*>(reply);
  std::string out = reply_text(r);
  freeReplyObject(r);
  return out;
}

std::string raw_redis::command(const std::vector<std::string>& argv) {
  std::vector<const char*> p;
  std::vector<std::size_t> l;
  for (const std::string& a : argv) {
    p.push_back(a.data());
    l.push_back(a.size());
  }
  auto* c = static_cast<redisContext*>(ctx_);
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), p.data(), l.data()));
  if (r == nullptr) throw std::runtime_error(std::string("redis command failed: ") + c->errstr);
  std::string out = reply_text(r);
  freeReplyObject(r);
  return out;
}

namespace {

// Parses one command (*N\r\n then N times $LEN\r\nBYTES\r\n) from the
// front of `in`: its length in bytes, 0 while incomplete, -1 when malformed.
std::ptrdiff_t parse_command(std::string_view in, std::vector<std::string>& argv) {
  std::size_t at = 0;
  auto number_line = [&](char type, long long& n) -> int {  // 1 ok, 0 incomplete, -1 malformed
    if (at >= in.size()) return 0;
    if (in[at] != type) return -1;
    const std::size_t end = in.find("\r\n", at);
    if (end == std::string_view::npos) return in.size() - at > 32 ? -1 : 0;
    n = 0;
    for (std::size_t i = at + 1; i < end; ++i) {
      if (in[i] < '0' || in[i] > '9' || n > (1LL << 40)) return -1;
      n = n * 10 + (in[i] - '0');
    }
    at = end + 2;
    return 1;
  };
  argv.clear();
  long long count = 0;
  if (int r = number_line('*', count); r <= 0) return r;
  for (long long i = 0; i < count; ++i) {
    long long len = 0;
    if (int r = number_line('$', len); r <= 0) return r;
    if (in.size() - at < static_cast<std::size_t>(len) + 2) return 0;
    argv.emplace_back(in.substr(at, static_cast<std::size_t>(len)));
    at += static_cast<std::size_t>(len) + 2;
  }
  return static_cast<std::ptrdiff_t>(at);
}

}  // namespace

fake_redis_server::fake_redis_server(answer_fn answer) : answer_(std::move(answer)) {
  listener_ = listen_on_loopback("fake redis server", port_);
  thread_ = std::thread([this] { serve(); });
}

fake_redis_server::~fake_redis_server() {
  stop();
}

void fake_redis_server::stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  if (listener_ >= 0) {
    ::close(listener_);
    listener_ = -1;
  }
}

std::vector<std::string> fake_redis_server::commands() const {
  std::lock_guard g(mu_);
  return commands_;
}

bool fake_redis_server::send_reply(int fd, std::string_view bytes) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!bytes.empty()) {
    const ssize_t w = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      bytes_sent_ += static_cast<std::uint64_t>(w);
      bytes.remove_prefix(static_cast<std::size_t>(w));
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    if (stopping_.load() || std::chrono::steady_clock::now() >= give_up) return false;
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, 50);
  }
  return true;
}

void fake_redis_server::serve() {
  struct connection {
    int fd;
    std::string in;
  };
  std::vector<connection> open;
  while (!stopping_.load()) {
    std::vector<pollfd> fds{{listener_, POLLIN, 0}};
    for (const connection& c : open) fds.push_back({c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        ++connections_;
        open.push_back({fd, {}});
      }
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      connection& c = open[i - 1];
      char buf[64 * 1024];
      const ssize_t r = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
      bool keep = r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR));
      if (r > 0) c.in.append(buf, static_cast<std::size_t>(r));
      std::vector<std::string> argv;
      while (keep) {
        const std::ptrdiff_t used = parse_command(c.in, argv);
        if (used == 0) break;
        if (used < 0 || argv.empty()) {
          keep = false;
          break;
        }
        c.in.erase(0, static_cast<std::size_t>(used));
        {
          std::lock_guard g(mu_);
          commands_.push_back(argv[0]);
        }
        std::optional<std::string> reply = answer_(argv);
        keep = reply.has_value();
        std::string_view rest = keep ? std::string_view(*reply) : std::string_view();
        for (std::size_t at; keep && (at = rest.find(pause)) != std::string_view::npos;) {
          keep = send_reply(c.fd, rest.substr(0, at));
          rest.remove_prefix(at + pause.size());
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        keep = keep && send_reply(c.fd, rest);
      }
      if (!keep) {
        ::close(c.fd);
        c.fd = -1;
      }
    }
    std::erase_if(open, [](const connection& c) { return c.fd < 0; });
  }
  for (const connection& c : open) ::close(c.fd);
}

}  // namespace primcache::test
