// A file layer for the persist tests that forwards to the system's and fails
// the calls a test chooses (disk full, I/O errors, a read-only file system),
// counting the calls that would modify the file system, and, when asked,
// journaling the ones that name or make durable (mkdir, rename, fsync) so a
// test can check their order.
#pragma once

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "primcache/persist/file_ops.hpp"

namespace primcache::test {

class faulty_file_ops : public file_ops {
 public:
  // An errno (positive) to fail every such call with; 0: forward.
  std::atomic<int> fail_write{0};
  std::atomic<int> fail_fsync{0};
  std::atomic<int> fail_rename{0};
  std::atomic<int> fail_read{0};
  std::atomic<int> fail_mkdir{0};
  // Fail every open for writing or creating.
  std::atomic<int> fail_create{0};
  // Calls that would change the file system, whether failed or not.
  std::atomic<int> modifying_calls{0};

  int open_at(int dirfd, const char* path, int flags, mode_t mode) override {
    const bool modifies = (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0;
    if (modifies) {
      ++modifying_calls;
      if (int e = fail_create.load()) return -e;
    }
    return real_->open_at(dirfd, path, flags, mode);
  }
  long read(int fd, void* buf, std::size_t n) override {
    if (int e = fail_read.load()) return -e;
    return real_->read(fd, buf, n);
  }
  long write(int fd, const void* buf, std::size_t n) override {
    ++modifying_calls;
    if (int e = fail_write.load()) return -e;
    return real_->write(fd, buf, n);
  }
  int fsync(int fd) override {
    {
      std::lock_guard g(mu_);
      if (journaling_ || !fail_fsync_of_path.empty()) {
        const std::string path = path_of(fd);
        if (journaling_) journal_.push_back("fsync " + path);
        if (!fail_fsync_of_path.empty() && path == fail_fsync_of_path) return -EIO;
      }
    }
    if (int e = fail_fsync.load()) return -e;
    return real_->fsync(fd);
  }
  int mkdir(const char* path, mode_t mode) override {
    ++modifying_calls;
    note(std::string("mkdir ") + path);
    if (int e = fail_mkdir.load()) return -e;
    return real_->mkdir(path, mode);
  }
  int close(int fd) override { return real_->close(fd); }
  int rename(const char* from, const char* to, bool no_replace) override {
    ++modifying_calls;
    note(std::string("rename ") + to);
    if (int e = fail_rename.load()) return -e;
    return real_->rename(from, to, no_replace);
  }

  // fsync of the directory or file at this path (as /proc/self/fd names
  // it) fails with EIO; empty: none.
  void fail_fsync_of(std::string path) {
    std::lock_guard g(mu_);
    fail_fsync_of_path = std::move(path);
  }
  // Journaling starts (cleared) and stops.
  void start_journal() {
    std::lock_guard g(mu_);
    journal_.clear();
    journaling_ = true;
  }
  std::vector<std::string> stop_journal() {
    std::lock_guard g(mu_);
    journaling_ = false;
    return journal_;
  }

 private:
  static std::string path_of(int fd) {
    char buf[PATH_MAX];
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("?");
  }
  void note(std::string what) {
    std::lock_guard g(mu_);
    if (journaling_) journal_.push_back(std::move(what));
  }

  std::shared_ptr<file_ops> real_ = system_file_ops();
  std::mutex mu_;
  bool journaling_ = false;
  std::vector<std::string> journal_;
  std::string fail_fsync_of_path;
};

}  // namespace primcache::test
