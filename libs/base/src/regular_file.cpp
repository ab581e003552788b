#include "primcache/base/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace primcache {
const char* file_type_name(mode_t mode) noexcept {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

namespace {

struct fd_closer {
  int fd;
  ~fd_closer() { ::close(fd); }
};

regular_file_text refused(file_refusal why, std::string reason, int error = 0) {
  regular_file_text out;
  out.refusal = why;
  out.error = error;
  out.reason = std::move(reason);
  return out;
}

regular_file_text too_large(std::uint64_t bytes, std::uint64_t max_bytes, bool grew) {
  regular_file_text out =
      refused(file_refusal::too_large, std::to_string(bytes) + " bytes, more than the limit of " +
                                           std::to_string(max_bytes));
  out.bytes = bytes;
  out.grew = grew;
  return out;
}

}  // namespace

regular_file_text read_regular_file(const std::string& path, std::uint64_t max_bytes,
                                    bool follow_links) {
  // O_NONBLOCK: opening a FIFO does not wait for a writer (it is refused
  // below); reads of a regular file ignore the flag.
  const int fd = ::open(
      path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (follow_links ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    const int e = errno;
    return refused(file_refusal::cannot_open, std::strerror(e), e);
  }
  const fd_closer closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    return refused(file_refusal::cannot_read, std::strerror(e), e);
  }
  // Every outcome from here on says what fstat found.
  auto with_stat = [&st](regular_file_text r) {
    r.stat_known = true;
    r.mode = st.st_mode;
    r.uid = st.st_uid;
    return r;
  };
  if (!S_ISREG(st.st_mode)) {
    return with_stat(refused(file_refusal::not_regular,
                             std::string(file_type_name(st.st_mode)) + ", not a regular file"));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) return with_stat(too_large(size, max_bytes, false));
  // What fstat said and one byte more, growing to at most the limit and one
  // byte: a file that grew since is read no further than that.
  regular_file_text out = with_stat({});
  out.text.resize(static_cast<std::size_t>(size) + 1);
  std::size_t got = 0;
  for (;;) {
    if (got == out.text.size()) {
      if (got > max_bytes) return with_stat(too_large(got, max_bytes, true));
      out.text.resize(static_cast<std::size_t>(
          std::min<std::uint64_t>(std::uint64_t{out.text.size()} * 2, max_bytes + 1)));
    }
    const ssize_t n = ::read(fd, out.text.data() + got, out.text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      return with_stat(refused(file_refusal::cannot_read, std::strerror(e), e));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.text.resize(got);
  return out;
}

}  // namespace primcache
