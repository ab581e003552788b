// primcache/base/regular_file.hpp — reading a small input file whole,
// only when it is a regular file of at most a given size.
//
//   primcache::regular_file_text f = primcache::read_regular_file(path, 16 << 20);
//   if (f.refusal != primcache::file_refusal::none) report(path + ": " + f.reason);
//   else parse(f.text);
//
// What the runtime and its tools read from paths they are given (a tune
// table, a graph file, a daemon's config) must not wait or grow without
// end: a directory reads as empty text, a FIFO's open waits for a writer,
// /dev/zero never ends. So the file is opened O_NONBLOCK, fstat'ed and
// refused unless regular and within the limit before a byte is read, and a
// file that grows past the limit while it is read is refused too (at most
// the limit and one byte are read). Callers word the refusal and choose
// its status (each says "tune table P: ...", "graph file P: ...").
// follow_links = false opens with O_NOFOLLOW (a symbolic link is then
// cannot_open, ELOOP), and the owner and mode fstat found are reported, for
// a caller that trusts only its own private file (a bearer token).
//
// Thread-safety: a free function over its arguments. Exceptions:
// std::bad_alloc only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "primcache/base/export.hpp"

namespace primcache {

enum class file_refusal {
  none,
  cannot_open,  // open failed (`error`: its errno; ENOENT: there is none)
  not_regular,  // a directory, FIFO, device or socket
  too_large,    // over the limit, at open or while read
  cannot_read,  // fstat or read failed (`error`)
};

struct regular_file_text {
  std::string text;  // the whole file, when refusal is none
  file_refusal refusal = file_refusal::none;
  int error = 0;            // the errno of cannot_open and cannot_read
  std::uint64_t bytes = 0;  // too_large: the size found (at open, or read so far)
  bool grew = false;        // too_large: found while reading, not at open
  std::string reason;       // "a FIFO, not a regular file", "No such file or directory",
                            // "70000000 bytes, more than the limit of 67108864"
  bool stat_known = false;  // fstat succeeded: mode and uid are the file's
  mode_t mode = 0;
  uid_t uid = 0;
};

PRIMCACHE_API regular_file_text read_regular_file(const std::string& path, std::uint64_t max_bytes,
                                                  bool follow_links = true);

// "a directory", "a FIFO", "a character device", "a block device",
// "a socket", else "a special file": what a file that is not regular is.
PRIMCACHE_API const char* file_type_name(mode_t mode) noexcept;

}  // namespace primcache
