#include "primcache/persist/file_ops.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace primcache {
namespace {

class system_ops final : public file_ops {
 public:
  int open_at(int dirfd, const char* path, int flags, mode_t mode) override {
    int fd;
    do {
      fd = ::openat(dirfd, path, flags | O_CLOEXEC, mode);
    } while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : fd;
  }
  long read(int fd, void* buf, std::size_t n) override {
    ssize_t r;
    do {
      r = ::read(fd, buf, n);
    } while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : static_cast<long>(r);
  }
  long write(int fd, const void* buf, std::size_t n) override {
    ssize_t r;
    do {
      r = ::write(fd, buf, n);
    } while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : static_cast<long>(r);
  }
  int fsync(int fd) override { return ::fsync(fd) != 0 ? -errno : 0; }
  int mkdir(const char* path, mode_t mode) override {
    return ::mkdir(path, mode) != 0 ? -errno : 0;
  }
  int close(int fd) override { return ::close(fd) != 0 ? -errno : 0; }
  int rename(const char* from, const char* to, bool no_replace) override {
    if (no_replace) {
      if (::renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
      // File systems without RENAME_NOREPLACE: a directory renamed onto a
      // non-empty directory fails with ENOTEMPTY, which is what the store
      // relies on (it never leaves an empty entry directory behind).
      if (errno != EINVAL && errno != ENOSYS) return -errno;
    }
    return ::rename(from, to) != 0 ? -errno : 0;
  }
};

}  // namespace

file_ops::~file_ops() = default;

std::shared_ptr<file_ops> system_file_ops() {
  static const std::shared_ptr<file_ops> ops = std::make_shared<system_ops>();
  return ops;
}

}  // namespace primcache
