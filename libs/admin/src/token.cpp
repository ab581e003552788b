#include "token.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "handlers.hpp"
#include "primcache/base/error.hpp"

namespace primcache::admin_internal {

bool token_matches(std::string_view given, std::string_view token) noexcept {
  // Every byte of the expected token is visited whatever `given` holds, and
  // the differences are OR-ed, so the time does not tell where they differ.
  unsigned char diff = given.size() == token.size() ? 0 : 1;
  for (std::size_t i = 0; i < token.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(g ^ static_cast<unsigned char>(token[i]));
  }
  return diff == 0 && !token.empty();
}

std::string generate_token() {
  std::random_device rd;  // /dev/urandom or getrandom on Linux
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 8; ++i) {
    std::uint32_t w = rd();
    for (int j = 0; j < 8; ++j) {
      out += hex[w & 0xf];
      w >>= 4;
    }
  }
  return out;
}

std::string default_token_path() {
  const char* dir = std::getenv("XDG_RUNTIME_DIR");
  std::string base = (dir != nullptr && dir[0] == '/') ? dir : "/tmp";
  return base + "/primcache-admin-" + std::to_string(::getpid()) + "-" +
         generate_token().substr(0, 12) + ".token";
}

void write_token_file(const std::string& path, const std::string& token) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw error(status::runtime_error,
                "admin token file " + path + " cannot be created: " + std::strerror(errno));
  }
  const std::string text = token + "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fchmod(fd, 0600) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    throw error(status::runtime_error,
                "admin token file " + path + " cannot be written: " + std::strerror(saved));
  }
}

}  // namespace primcache::admin_internal
