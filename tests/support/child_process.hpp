// Helpers for tests that fork: waiting for a child with a deadline, and
// making a process allocate from every small size class of the allocator.
//
//   const pid_t pid = ::fork();
//   if (pid == 0) { ...; ::_exit(code); }
//   const int status = primcache_test::wait_child(pid, 30);  // 0 when it exited with 0
//
//   // The same, the fork and the exit done for you:
//   const int status = primcache_test::run_in_child(30, [] { return ...; });
//
//   // Rounds 0..n-1, each in a new child; messages for the first 3 that failed.
//   std::vector<std::string> failed = primcache_test::run_in_children(n, 30, [](int round) {
//     return ...;  // the child's exit status
//   });
//
// A child's own alarm() cannot end a hang inside fork() itself (an atfork
// child handler runs before the alarm is set), and a hung child left behind
// would keep running after the test; wait_child kills it at the deadline.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace primcache_test {

// Status codes wait_child returns besides a child's exit status.
inline constexpr int k_child_killed = 254;    // still running at the deadline: killed
inline constexpr int k_child_lost = 253;      // waitpid failed
inline constexpr int k_child_signaled = 128;  // plus the signal that ended it

// Waits at most `seconds` for `pid`, then kills it (SIGKILL) and reaps it.
// Returns its exit status, k_child_signaled + the signal that ended it,
// k_child_killed, or k_child_lost.
inline int wait_child(pid_t pid, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return k_child_lost;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return k_child_killed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return k_child_signaled + WTERMSIG(status);
  return k_child_lost;
}

// What a wait_child status means, for a failure message.
inline std::string describe_child_status(int status) {
  if (status == k_child_killed) return "killed at the deadline (a hang)";
  if (status == k_child_lost) return "lost (waitpid failed)";
  if (status > k_child_signaled && status < k_child_lost) {
    return "signal " + std::to_string(status - k_child_signaled);
  }
  return "exit status " + std::to_string(status);
}

// Status run_in_child returns when fork() itself failed.
inline constexpr int k_child_not_forked = -1;

// Runs body() in a forked child (its return value is the child's exit
// status; an exception, 255) and returns wait_child's status for it, at
// most `seconds` later, or k_child_not_forked.
inline int run_in_child(int seconds, const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid < 0) return k_child_not_forked;
  if (pid == 0) {
    int code = 255;
    try {
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  return wait_child(pid, seconds);
}

// Runs body(round) for round 0 .. rounds-1, each in a child forked for it
// (run_in_child). Returns a message for each round that did not exit with
// 0, stopping after the third.
inline std::vector<std::string> run_in_children(int rounds, int seconds,
                                                const std::function<int(int)>& body) {
  std::vector<std::string> failures;
  for (int i = 0; i < rounds && failures.size() < 3; ++i) {
    const int status = run_in_child(seconds, [&] { return body(i); });
    if (status == k_child_not_forked) {
      failures.push_back("round " + std::to_string(i) + ": fork failed");
    } else if (status != 0) {
      failures.push_back("round " + std::to_string(i) + ": " + describe_child_status(status));
    }
  }
  return failures;
}

// Allocates and frees enough blocks of each size up to 2 KiB that the
// calling thread's allocator cache of each size class runs dry and is
// refilled from the shared allocator, under that class's lock: a child that
// inherited one of those locks held hangs here.
inline void allocate_from_every_size_class() {
  std::vector<std::unique_ptr<char[]>> blocks;
  blocks.reserve(128 * 300);
  for (std::size_t size = 16; size <= 2048; size += 16) {
    for (int k = 0; k < 300; ++k) blocks.push_back(std::make_unique<char[]>(size));
  }
}

}  // namespace primcache_test
