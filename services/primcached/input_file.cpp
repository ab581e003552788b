#include "input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "primcache/base/error.hpp"

namespace primcache::primcached {

namespace {

// What a file that is not a regular file is, for the message.
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

std::string size_text(std::size_t bytes) {
  if (bytes % (std::size_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// Closes the descriptor however the read ends.
struct fd_closer {
  int fd;
  ~fd_closer() { ::close(fd); }
};

}  // namespace

std::string read_input_file(const std::string& path, const std::string& cannot_read,
                            std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait for one
  // (reading a regular file does not block either way).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) throw error(status::not_found, cannot_read);
  const fd_closer closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw error(status::runtime_error, cannot_read + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw error(status::not_found,
                cannot_read + ": " + file_kind(st.st_mode) + ", not a regular file");
  }
  const std::string too_large = cannot_read + ": larger than " + size_text(max_bytes) +
                                ", the limit for a config, workload or graph file";
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    throw error(status::permission_denied, too_large);
  }
  // What fstat said, and one byte more: a file that grew since is caught
  // without reading more than the limit.
  std::string text(static_cast<std::size_t>(st.st_size) + 1, '\0');
  std::size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      if (text.size() > max_bytes) throw error(status::permission_denied, too_large);
      text.resize(std::min(text.size() * 2, max_bytes + 1));
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw error(status::runtime_error, cannot_read + ": " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

}  // namespace primcache::primcached
