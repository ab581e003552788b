// A real redis-server for the persist tests: started on a free loopback port
// with persistence off (--save '' --appendonly no) and DEBUG allowed, killed
// when the object goes; stopped, continued, killed and restarted on demand.
// Plus a raw client (hiredis) to plant values and to stall the server.
//
// A missing redis-server is a failure, never a skip: the tests throw with a
// message pointing at scripts/install-deps.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
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

}  // namespace primcache::test
