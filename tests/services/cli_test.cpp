// The primcache command line's own safeguards: its HTTP requests end at their
// timeout whatever the server or the resolver does (http_client.hpp and
// resolve.hpp, called directly, and
// `primcache stats` as a process), and it reads the token file only when it
// is what primcached writes (main.cpp, read_token; run as a process).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "http_client.hpp"
#include "resolve.hpp"

#include "process.hpp"

namespace {

using namespace std::chrono_literals;
using primcache::test::run_program;
using primcache::test::run_result;
using primcache::test::temp_path;

// A TCP socket on 127.0.0.1 and an ephemeral port that listens and never
// accepts unless told to: the kernel completes connections into its accept
// queue (`backlog` of them), and nothing ever answers them.
struct silent_listener {
  int fd = -1;
  std::uint16_t port = 0;

  explicit silent_listener(int backlog) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd, backlog) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port = ntohs(addr.sin_port);
  }
  ~silent_listener() { close(); }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
};

// A client connection to `port`, made with no wait; true once established.
struct raw_client {
  int fd = -1;
  explicit raw_client(std::uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    REQUIRE((rc == 0 || errno == EINPROGRESS));
  }
  ~raw_client() { ::close(fd); }
  bool established() const {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    return ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0;
  }
};

struct outcome {
  std::string error;  // the connect_error's message; empty if the request returned
  std::chrono::milliseconds took{};
};

// http_request("127.0.0.1", port, GET /api/v1/caches, or POST `body`) with
// `timeout` on a thread of its own, so that a request that never ends fails
// the test rather than hanging it (the thread is then left behind, blocked).
std::future<outcome> request_async(std::uint16_t port, std::chrono::milliseconds timeout,
                                   std::string body = "") {
  auto promise = std::make_shared<std::promise<outcome>>();
  std::future<outcome> result = promise->get_future();
  std::thread([promise, port, timeout, body = std::move(body)] {
    outcome o;
    const auto start = std::chrono::steady_clock::now();
    try {
      primcache::cli::http_request("127.0.0.1", port, body.empty() ? "GET" : "POST",
                                   "/api/v1/caches", body, "", timeout);
    } catch (const primcache::cli::connect_error& e) {
      o.error = e.what();
    } catch (const std::exception& e) {
      o.error = std::string("not a connect_error: ") + e.what();
    }
    o.took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    promise->set_value(std::move(o));
  }).detach();
  return result;
}

// The outcome, or a failed test if the request is still waiting after
// `bound` (the listener is closed then, which ends a blocked connect or
// read with an error, so that the thread left behind can finish).
outcome finished_within(std::future<outcome>& f, silent_listener& l,
                        std::chrono::seconds bound = 10s) {
  if (f.wait_for(bound) != std::future_status::ready) {
    l.close();
    FAIL("http_request still waiting " << bound.count() << " s after a 300 ms timeout");
  }
  return f.get();
}

}  // namespace

TEST_CASE("primcache's HTTP requests end at their timeout whatever the server does",
          "[services][cli]") {
  SECTION("a server that listens and never accepts: no answer within the timeout") {
    silent_listener l(16);
    auto f = request_async(l.port, 300ms);
    const outcome o = finished_within(f, l);
    CHECK(o.error == "no answer from " + l.address() +
                         ": timed out after 300 ms (is primcached stopped or too busy?)");
    CHECK(o.took >= 250ms);
    CHECK(o.took < 5s);
  }
  SECTION("a server whose accept queue is full: no connection within the timeout") {
    // Backlog 0 holds one connection; SYNs past it are dropped, so a
    // connect waits (retransmitting) for as long as it is let.
    silent_listener l(0);
    raw_client first(l.port);
    for (int i = 0; i < 200 && !first.established(); ++i) std::this_thread::sleep_for(5ms);
    REQUIRE(first.established());
    raw_client second(l.port);  // in SYN_SENT: the queue is full for sure
    auto f = request_async(l.port, 300ms);
    const outcome o = finished_within(f, l);
    CHECK(o.error == "no primcached answers at " + l.address() + " (no connection within 300 ms)");
    CHECK(o.took >= 250ms);
    CHECK(o.took < 5s);
  }
  SECTION("a server that never reads a large request: sending ends at the timeout") {
    // 64 MiB: more than the socket buffers of both ends hold, so the write
    // waits for a reader that never comes.
    silent_listener l(16);
    auto f = request_async(l.port, 300ms, std::string(std::size_t{64} << 20, ' '));
    const outcome o = finished_within(f, l);
    CHECK(o.error == "cannot send to " + l.address() + ": timed out after 300 ms");
    CHECK(o.took >= 250ms);
    CHECK(o.took < 5s);
  }
  SECTION("a server that sends part of a header and stops: the whole request is bounded") {
    silent_listener l(16);
    auto f = request_async(l.port, 300ms);
    const int conn = ::accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC);
    REQUIRE(conn >= 0);
    char buf[4096];
    REQUIRE(::read(conn, buf, sizeof buf) > 0);  // the request
    const std::string partial = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n";
    REQUIRE(::write(conn, partial.data(), partial.size()) == static_cast<ssize_t>(partial.size()));
    const outcome o = finished_within(f, l);
    ::close(conn);
    CHECK(o.error == "no answer from " + l.address() +
                         ": timed out after 300 ms (is primcached stopped or too busy?)");
    CHECK(o.took < 5s);
  }
  SECTION("nothing listening: refused at once, as before") {
    silent_listener l(16);
    const std::string address = l.address();
    const std::uint16_t port = l.port;
    l.close();
    auto f = request_async(port, 300ms);
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    const outcome o = f.get();
    CHECK(o.error == "no primcached answers at " + address + " (Connection refused)");
  }
}

TEST_CASE("a host's lookup is bounded by the request's deadline", "[services][cli]") {
  using primcache::cli::resolve_within;
  using results = boost::asio::ip::tcp::resolver::results_type;
  const auto now = [] { return std::chrono::steady_clock::now(); };
  SECTION("a resolver that does not answer: an error at the deadline, the lookup left behind") {
    // A name server that never answers, played by a lookup that waits for
    // the test to let it go (so nothing is left running when the test ends).
    auto release = std::make_shared<std::promise<void>>();
    auto finished = std::make_shared<std::promise<void>>();
    std::shared_future<void> released = release->get_future().share();
    std::future<void> lookup_done = finished->get_future();
    const auto start = now();
    try {
      resolve_within("admin.example", 8477, start + 300ms, "300 ms",
                     [released, finished](const std::string&, const std::string&) {
                       released.wait();
                       finished->set_value();
                       return results();
                     });
      FAIL("resolve_within returned while its lookup was still waiting");
    } catch (const primcache::cli::connect_error& e) {
      CHECK(std::string(e.what()) ==
            "cannot resolve admin.example:8477: no answer from the resolver within 300 ms");
    }
    CHECK(now() - start >= 300ms);
    CHECK(now() - start < 5s);
    release->set_value();
    CHECK(lookup_done.wait_for(10s) == std::future_status::ready);
  }
  SECTION("a lookup that fails: its reason") {
    CHECK_THROWS_WITH(
        resolve_within("nowhere.invalid", 1, now() + 10s, "10 s",
                       [](const std::string&, const std::string&) -> results {
                         throw boost::system::system_error(boost::asio::error::host_not_found);
                       }),
        "cannot resolve nowhere.invalid:1: " +
            boost::system::error_code(boost::asio::error::host_not_found).message());
  }
  SECTION("the system's resolver: a numeric address and localhost") {
    auto numeric = resolve_within("127.0.0.1", 8477, now() + 10s, "10 s");
    REQUIRE(numeric.size() == 1);
    CHECK(numeric.begin()->endpoint().port() == 8477);
    CHECK(numeric.begin()->endpoint().address().to_string() == "127.0.0.1");
    CHECK(resolve_within("localhost", 8477, now() + 10s, "10 s").size() >= 1);
  }
}

TEST_CASE("primcache stats ends with exit 1 when the server never answers", "[services][cli]") {
  // The command line's default timeout, 10 s: a stopped daemon (SIGSTOP)
  // or any listener that never answers looks like this.
  silent_listener l(16);
  const auto start = std::chrono::steady_clock::now();
  const run_result r = run_program({PRIMCACHE_CLI_PATH, "--admin", l.address(), "stats"}, 40s);
  const auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(r.status.has_value());  // not still running at 40 s
  CHECK(*r.status == 1);
  CHECK(r.err == "primcache: no answer from " + l.address() +
                     ": timed out after 10 s (is primcached stopped or too busy?)\n");
  CHECK(took >= 9s);
  CHECK(took < 30s);
}

namespace {

// A file with exactly `mode` (the umask aside) holding `text`.
void write_file(const std::string& path, const std::string& text, mode_t mode = 0600) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  REQUIRE(::fchmod(fd, mode) == 0);
  ::close(fd);
}

const std::string good_token(64, 'a');

// `primcache flush primitive` with the token file `path`, against a port
// where nothing listens: the token is read (or refused) before any request.
run_result flush_with(const std::string& path) {
  return run_program(
      {PRIMCACHE_CLI_PATH, "--admin", "127.0.0.1:1", "--token-file", path, "flush", "primitive"},
      10s);
}

}  // namespace

TEST_CASE("primcache reads the token file only when it is this user's, 0600, and a token",
          "[services][cli]") {
  SECTION("a good token file: read, and the request made") {
    const std::string path = temp_path("token");
    write_file(path, good_token + "\n");
    const run_result r = flush_with(path);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::StartsWith("primcache: no primcached answers at 127.0.0.1:1"));
  }
  SECTION("no file") {
    const std::string path = temp_path("none.token");
    const run_result r = flush_with(path);
    CHECK(r.status == 1);
    CHECK(r.err == "primcache: cannot read the token file " + path +
                       ": No such file or directory (is primcached running? give the path with "
                       "--token-file)\n");
  }
  SECTION("a FIFO: refused at once, not waited on for a writer") {
    const std::string path = temp_path("token.fifo");
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    const run_result r = flush_with(path);
    REQUIRE(r.status.has_value());
    CHECK(*r.status == 1);
    CHECK(r.err == "primcache: the token file " + path +
                       " is a FIFO, not a regular file: refusing to read it\n");
  }
  SECTION("/dev/zero: refused at once, not read without end") {
    const run_result r = flush_with("/dev/zero");
    REQUIRE(r.status.has_value());
    CHECK(*r.status == 1);
    CHECK(r.err ==
          "primcache: the token file /dev/zero is a character device, not a regular file: "
          "refusing to read it\n");
  }
  SECTION("a directory") {
    const std::string path = temp_path("token-dir");
    REQUIRE(::mkdir(path.c_str(), 0700) == 0);
    const run_result r = flush_with(path);
    CHECK(r.status == 1);
    CHECK(r.err == "primcache: the token file " + path +
                       " is a directory, not a regular file: refusing to read it\n");
  }
  SECTION("a symbolic link, even to a good token file of this user") {
    const std::string target = temp_path("real.token");
    write_file(target, good_token + "\n");
    const std::string path = temp_path("link.token");
    REQUIRE(::symlink(target.c_str(), path.c_str()) == 0);
    const run_result r = flush_with(path);
    CHECK(r.status == 1);
    CHECK(r.err ==
          "primcache: the token file " + path + " is a symbolic link: refusing to follow it\n");
  }
  SECTION("a file others may read or write") {
    for (const auto& [mode, text] : std::vector<std::pair<mode_t, std::string>>{
             {0640, "0640"}, {0604, "0604"}, {0620, "0620"}, {0602, "0602"}, {0644, "0644"}}) {
      const std::string path = temp_path("open.token");
      write_file(path, good_token + "\n", mode);
      const run_result r = flush_with(path);
      INFO(text);
      CHECK(r.status == 1);
      CHECK(r.err == "primcache: the token file " + path + " has mode " + text +
                         ": others may read or change it (primcached writes it 0600): "
                         "refusing it\n");
    }
  }
  SECTION("another user's file") {
    if (::geteuid() != 0) {
      WARN("not running as root: cannot make a file of another user; section skipped");
      return;
    }
    const std::string path = temp_path("other.token");
    write_file(path, good_token + "\n");
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
    const run_result r = flush_with(path);
    CHECK(r.status == 1);
    CHECK(r.err == "primcache: the token file " + path +
                       " is owned by uid 65534, not by this user (uid 0): refusing it\n");
  }
  SECTION("a file over 4 KiB") {
    const std::string path = temp_path("large.token");
    write_file(path, good_token + "\n" + std::string(5000, 'x'));
    const run_result r = flush_with(path);
    CHECK(r.status == 1);
    CHECK(r.err == "primcache: the token file " + path + " is " + std::to_string(65 + 5000) +
                       " bytes, more than 4096: not a token file\n");
  }
  SECTION("an empty file") {
    const std::string path = temp_path("empty.token");
    write_file(path, "");
    const run_result r = flush_with(path);
    CHECK(r.status == 1);
    CHECK(r.err == "primcache: the token file " + path + " is empty\n");
  }
  SECTION("a file that does not hold a token of primcached's form") {
    for (const std::string& text :
         std::vector<std::string>{"0123456789abcdef\n",              // too short
                                  good_token + "a\n",                // too long
                                  std::string(64, 'A') + "\n",       // not lowercase
                                  std::string(63, 'a') + "g\n",      // not hex
                                  good_token + "\n" + good_token,    // a second line
                                  good_token + "\r\n",               // a carriage return
                                  " " + good_token + "\n",           // a leading space
                                  "\n",                              // an empty line
                                  "Bearer " + good_token + "\n"}) {  // more than the token
      const std::string path = temp_path("bad.token");
      write_file(path, text);
      const run_result r = flush_with(path);
      INFO(text);
      CHECK(r.status == 1);
      CHECK(r.err == "primcache: the token file " + path +
                         " does not hold a token of primcached's form (64 lowercase hex digits "
                         "and a newline): refusing to send it\n");
    }
  }
  SECTION("a token without the newline is accepted") {
    const std::string path = temp_path("bare.token");
    write_file(path, good_token);
    const run_result r = flush_with(path);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::StartsWith("primcache: no primcached answers at 127.0.0.1:1"));
  }
}
