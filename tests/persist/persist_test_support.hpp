// Shared helpers of the persist tests: byte spans from strings, a private
// temporary directory removed at the end of the test, spans too large to hold.
#pragma once

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace primcache::test {

inline std::vector<std::byte> as_bytes(std::string_view s) {
  auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}

// n bytes that depend on the key alone: a reader can tell whether what it
// got is exactly what the writer of that key stored.
inline std::vector<std::byte> payload_of(std::string_view key, std::size_t n) {
  std::vector<std::byte> out(n);
  std::uint32_t x = 2166136261u;
  for (char c : key) x = (x ^ static_cast<unsigned char>(c)) * 16777619u;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    out[i] = static_cast<std::byte>(x >> 24);
  }
  return out;
}

// A fresh directory (mode 0700) under TMPDIR, removed with everything in it.
class temp_dir {
 public:
  temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/primcache-persist-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~temp_dir() {
    // Tests make parts read-only or hand them to other users; take them back.
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
         it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      ::chmod(it->path().c_str(), 0700);
    }
    ::chmod(path_.c_str(), 0700);
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// `size` bytes nobody may read: an anonymous mapping without memory behind
// it (MAP_NORESERVE; a read would fault a zero page in, never fail), for
// entries larger than a test could hold, which a store must refuse before
// it copies them.
class untouched_bytes {
 public:
  explicit untouched_bytes(std::size_t size) : size_(size) {
    p_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p_ == MAP_FAILED) std::abort();
  }
  ~untouched_bytes() { ::munmap(p_, size_); }
  untouched_bytes(const untouched_bytes&) = delete;
  untouched_bytes& operator=(const untouched_bytes&) = delete;
  std::span<const std::byte> span() const { return {static_cast<const std::byte*>(p_), size_}; }

 private:
  void* p_;
  std::size_t size_;
};

}  // namespace primcache::test
