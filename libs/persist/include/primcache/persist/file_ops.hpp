// primcache/persist/file_ops.hpp — the file-system calls the directory store
// makes, behind an interface, so tests can make them fail (disk full, I/O
// errors) at any point.
//
// The store makes every open, read, write, fsync, mkdir and rename through
// directory_store_options::files; the default is system_file_ops(), which
// calls the kernel. A test wraps it and fails the calls it chooses:
//
//   struct full_disk : primcache::file_ops {
//     std::shared_ptr<primcache::file_ops> real = primcache::system_file_ops();
//     long write(int fd, const void* b, std::size_t n) override { return -ENOSPC; }
//     ... every other member forwards to real ...
//   };
//
// Convention: each call returns what the system call returns on success and
// -errno on failure (never -1 with errno set).
//
// Thread-safety: implementations are called from every thread that uses the
// store, at once. Exceptions: none expected.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>

#include "primcache/base/export.hpp"

namespace primcache {

class PRIMCACHE_API file_ops {
 public:
  virtual ~file_ops();
  // openat(2): a descriptor, or -errno.
  virtual int open_at(int dirfd, const char* path, int flags, mode_t mode) = 0;
  // read(2) / write(2): bytes moved, or -errno.
  virtual long read(int fd, void* buf, std::size_t n) = 0;
  virtual long write(int fd, const void* buf, std::size_t n) = 0;
  // fsync(2), mkdir(2), close(2): 0 or -errno.
  virtual int fsync(int fd) = 0;
  virtual int mkdir(const char* path, mode_t mode) = 0;
  virtual int close(int fd) = 0;
  // rename(2); with no_replace, fails with -EEXIST (or -ENOTEMPTY) rather
  // than replace an existing target.
  virtual int rename(const char* from, const char* to, bool no_replace) = 0;
};

// The kernel's calls. One shared object; stateless.
PRIMCACHE_API std::shared_ptr<file_ops> system_file_ops();

}  // namespace primcache
