#include "process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

// The listener below needs Catch2's event-listener interfaces.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

extern char** environ;

namespace primcache::test {

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Made on first use; empty until then.
std::string made_temp_dir;

const std::string& temp_dir() {
  static const std::string dir = [] {
    std::string tmpl = "/tmp/primcache-services-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    made_temp_dir = tmpl;
    return tmpl;
  }();
  return dir;
}

// The temporary directory holds the children's stdout and stderr: removed
// after a run in which everything passed, kept (and named) after a failure,
// where it is what explains the failure.
class temp_dir_cleanup : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  void testRunEnded(const Catch::TestRunStats& stats) override {
    if (made_temp_dir.empty()) return;
    if (stats.totals.assertions.failed == 0 && stats.totals.testCases.failed == 0) {
      std::error_code ec;
      std::filesystem::remove_all(made_temp_dir, ec);
    } else {
      std::cerr << "the children's output is kept in " << made_temp_dir << "\n";
    }
  }
};
CATCH_REGISTER_LISTENER(temp_dir_cleanup)

}  // namespace

std::string temp_path(const std::string& name) {
  static int counter = 0;
  return temp_dir() + "/" + std::to_string(++counter) + "-" + name;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

child_process::child_process(std::vector<std::string> argv) {
  out_path_ = temp_path("stdout");
  err_path_ = temp_path("stderr");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const int rc = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn " + argv[0] + " failed");
}

child_process::~child_process() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
}

void child_process::signal(int sig) const {
  if (!status_) ::kill(pid_, sig);
}

std::optional<int> child_process::wait(std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!status_) {
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    if (std::chrono::steady_clock::now() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status_;
}

std::string child_process::out() const {
  return read_all(out_path_);
}

std::string child_process::err() const {
  return read_all(err_path_);
}

bool child_process::wait_for_output(const std::string& text, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (out().find(text) != std::string::npos) return true;
    if (wait(std::chrono::milliseconds(0))) return out().find(text) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

run_result run_program(std::vector<std::string> argv, std::chrono::milliseconds limit) {
  child_process p(std::move(argv));
  run_result r;
  r.status = p.wait(limit);
  r.out = p.out();
  r.err = p.err();
  return r;
}

}  // namespace primcache::test
