// A real redis-server for the persist tests: started on a free loopback port
// with persistence off (--save '' --appendonly no) and DEBUG allowed, killed
// when the object goes; stopped, continued, killed and restarted on demand.
// Plus a raw client (hiredis) to plant values and to stall the server, and
// a scripted fake server for replies a real one never sends.
//
// A missing redis-server is a failure, never a skip: the tests throw with a
// message pointing at scripts/install-deps.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace primcache::test {

class redis_server {
 public:
  // Starts one and waits until it answers PING (throws std::runtime_error
  // when redis-server is missing or does not come up).
  redis_server();
  // On `port` (0: a free one), with `extra` arguments (e.g. --requirepass).
  explicit redis_server(int port, std::vector<std::string> extra = {});
  ~redis_server();  // SIGKILL and reap
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  int port() const { return port_; }
  // "redis://127.0.0.1:PORT/PREFIX".
  std::string url(std::string_view prefix) const;

  void kill();     // SIGKILL; the port stops answering
  void restart();  // a fresh server on the same port (empty: no persistence)
  void pause();    // SIGSTOP: connections hang
  void resume();   // SIGCONT
  bool running() const { return pid_ > 0; }

 private:
  void start();
  void make_dir();
  std::vector<std::string> extra_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// A port on 127.0.0.1 nothing listens on (bound and released).
int free_loopback_port();

// A listening TCP socket on 127.0.0.1 and a port the kernel picks (in
// `port`). Throws std::runtime_error naming `who` when it cannot listen.
int listen_on_loopback(const char* who, int& port);

// One blocking hiredis connection for test set-up (5 s timeouts by default).
class raw_redis {
 public:
  // Commands wait at most `timeout_s` for their reply.
  explicit raw_redis(int port, int timeout_s = 5);
  ~raw_redis();
  raw_redis(const raw_redis&) = delete;
  raw_redis& operator=(const raw_redis&) = delete;

  // Runs a command; the reply as text ("OK", the string, the integer in
  // decimal, "(nil)", "ERR ..." for errors); throws when the connection fails.
  std::string command(const std::vector<std::string>& argv);
  bool exists(const std::string& key) { return command({"EXISTS", key}) == "1"; }
  // The next reply the server pushes (after MONITOR), as command() shows
  // it; waits with no timeout. Throws when the connection fails.
  std::string next_reply();

 private:
  void* ctx_;
};

// A broken or hostile "Redis server" for what a real one never answers: a
// loopback listener whose thread reads each command (an array of bulk
// strings, as hiredis formats them) and writes back, byte for byte, what
// `answer` returns for it. Every wait is bounded — polls of 50 ms that
// check for stop(), and a reply not taken by the client within 5 s drops
// its connection — so a client that misbehaves cannot hang a test.
class fake_redis_server {
 public:
  // The bytes to write for a command (its argv), or nullopt to close the
  // connection. Called on the server's thread. The bytes after a `pause`
  // in them are written 20 ms after those before it, in a TCP segment of
  // their own.
  static constexpr std::string_view pause = "\x01pause\x01";
  using answer_fn = std::function<std::optional<std::string>(const std::vector<std::string>&)>;
  explicit fake_redis_server(answer_fn answer);
  ~fake_redis_server();  // stop()
  fake_redis_server(const fake_redis_server&) = delete;
  fake_redis_server& operator=(const fake_redis_server&) = delete;

  int port() const { return port_; }
  // Closes the listener and every connection, and joins the thread.
  void stop();

  // The commands received so far (argv[0] of each, in order).
  std::vector<std::string> commands() const;
  // Connections accepted so far.
  int connections() const { return connections_.load(); }
  // Bytes of replies the kernel took (a client that closes early leaves
  // the rest of a long reply unsent).
  std::uint64_t bytes_sent() const { return bytes_sent_.load(); }

 private:
  void serve();
  // Writes all of `bytes` on `fd` within 5 s; false when the client closed
  // or did not read.
  bool send_reply(int fd, std::string_view bytes);
  answer_fn answer_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::atomic<std::uint64_t> bytes_sent_{0};
  mutable std::mutex mu_;
  std::vector<std::string> commands_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace primcache::test
