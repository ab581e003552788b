#include "primcache/persist/fleet_key.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "primcache/base/env.hpp"

namespace primcache {
namespace {

failure key_failure(status code, const std::string& path, const std::string& why) {
  return failure{code, "fleet key file " + path + " " + why};
}

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

result<fleet_key> fleet_key::from_bytes(std::span<const std::byte> secret) {
  if (secret.size() < min_bytes) {
    return failure{status::invalid_arguments, "fleet key has " + std::to_string(secret.size()) +
                                                  " bytes; at least " + std::to_string(min_bytes) +
                                                  " are needed"};
  }
  return fleet_key(std::vector<std::byte>(secret.begin(), secret.end()));
}

result<fleet_key> fleet_key::from_file(const std::string& path) {
  // O_NONBLOCK: a FIFO at the path is refused below instead of blocking the
  // opening process until something writes to it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    return key_failure(e == ENOENT ? status::not_found : status::permission_denied, path,
                       std::string("cannot be opened: ") + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return key_failure(status::invalid_arguments, path, "is not a regular file");
  }
  if (st.st_size > static_cast<off_t>(max_file_bytes)) {
    ::close(fd);
    return key_failure(status::invalid_arguments, path,
                       "has " + std::to_string(st.st_size) + " bytes; a key file has at most " +
                           std::to_string(max_file_bytes));
  }
  // Another user's key file, however private its mode, is theirs to read
  // and to replace: they could sign any code. (Only a process that may
  // read others' files, root, gets this far with one.)
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    ::close(fd);
    return key_failure(status::permission_denied, path,
                       "is owned by uid " + std::to_string(st.st_uid) + ", not by root or uid " +
                           std::to_string(::geteuid()) +
                           " who runs this process: refusing a signing key another user holds");
  }
  const char* who = nullptr;
  if ((st.st_mode & (S_IRGRP | S_IWGRP)) != 0) who = "group";
  if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0) who = who ? "group and others" : "others";
  if (who != nullptr) {
    ::close(fd);
    return key_failure(status::permission_denied, path,
                       "is readable or writable by " + std::string(who) + " (mode " +
                           octal_mode(st.st_mode) +
                           "): refusing a signing key others can read; chmod 600 it");
  }
  std::vector<std::byte> bytes;
  std::byte buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return key_failure(status::runtime_error, path,
                         std::string("cannot be read: ") + std::strerror(e));
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buf, buf + n);
  }
  ::close(fd);
  while (!bytes.empty()) {
    auto c = static_cast<char>(bytes.back());
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') break;
    bytes.pop_back();
  }
  if (bytes.size() < min_bytes) {
    return key_failure(status::invalid_arguments, path,
                       "holds " + std::to_string(bytes.size()) + " bytes; a fleet key needs " +
                           std::to_string(min_bytes) + " or more");
  }
  return fleet_key(std::move(bytes));
}

result<std::optional<fleet_key>> fleet_key_from_env() {
  std::optional<std::string> path = env_string(persistent_cache_key_file_env);
  if (!path || path->empty()) return std::optional<fleet_key>();
  result<fleet_key> k = fleet_key::from_file(*path);
  if (!k) {
    return failure{k.why().code,
                   std::string(persistent_cache_key_file_env) + ": " + k.why().message};
  }
  return std::optional<fleet_key>(std::move(k).value());
}

}  // namespace primcache
