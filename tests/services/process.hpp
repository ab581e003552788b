// tests/services/process.hpp — a child process for the services tests:
// started with posix_spawn, its stdout and stderr captured in files, waited
// for with a time bound.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace primcache::test {

class child_process {
 public:
  // Starts `argv[0]` with the arguments; throws std::runtime_error on failure.
  explicit child_process(std::vector<std::string> argv);
  ~child_process();  // kills (SIGKILL) and reaps a child still running
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  void signal(int sig) const;
  // The exit status, or nullopt if it has not exited within `limit`.
  // A child killed by a signal reports 128 + the signal.
  std::optional<int> wait(std::chrono::milliseconds limit);
  std::string out() const;
  std::string err() const;
  // Waits until stdout contains `text`; false after `limit` or if the child exited.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds limit);

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string out_path_, err_path_;
};

// Runs a program to completion (bounded by `limit`) and returns its exit
// status (nullopt: still running at the limit, killed), stdout and stderr.
struct run_result {
  std::optional<int> status;
  std::string out, err;
};
run_result run_program(std::vector<std::string> argv,
                       std::chrono::milliseconds limit = std::chrono::seconds(30));

// A fresh file path under a temporary directory of this test run.
std::string temp_path(const std::string& name);
void write_text(const std::string& path, const std::string& text);

}  // namespace primcache::test
