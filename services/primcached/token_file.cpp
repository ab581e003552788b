#include "token_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "primcache/base/error.hpp"

namespace primcache::primcached {

namespace {

[[noreturn]] void fail_errno(status code, const std::string& what) {
  throw error(code, what + ": " + std::strerror(errno));
}

}  // namespace

std::string generate_token() {
  unsigned char bytes[32];
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno(status::runtime_error, "cannot open /dev/urandom");
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::read(fd, bytes + got, sizeof bytes - got);
    if (n <= 0) {
      ::close(fd);
      fail_errno(status::runtime_error, "cannot read /dev/urandom");
    }
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  static constexpr char hex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += hex[b >> 4];
    token += hex[b & 15];
  }
  return token;
}

void write_token_file(const std::string& path, const std::string& token) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
      throw error(status::permission_denied,
                  "token file " + path +
                      " exists and is not a regular file of this user: refusing to replace it");
    }
    if (::unlink(path.c_str()) != 0) {
      fail_errno(status::runtime_error, "cannot replace the stale token file " + path);
    }
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) fail_errno(status::runtime_error, "cannot create token file " + path);
  const std::string line = token + "\n";
  const ssize_t n = ::write(fd, line.data(), line.size());
  const bool ok = n == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    fail_errno(status::runtime_error, "cannot write token file " + path);
  }
}

void remove_token_file(const std::string& path, const std::string& token) noexcept {
  try {
    std::ifstream in(path);
    std::string content;
    std::getline(in, content);
    if (in && content == token) ::unlink(path.c_str());
  } catch (...) {
  }
}

}  // namespace primcache::primcached
