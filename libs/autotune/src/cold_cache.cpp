#include "primcache/autotune/cold_cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "primcache/base/env.hpp"

namespace primcache {
namespace {

// "32768K", "8M" as sysfs writes cache sizes.
std::size_t sysfs_size(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text)) return 0;
  auto r = parse_size(text, std::uint64_t{1} << 40);
  return r ? static_cast<std::size_t>(r.value()) : 0;
}

}  // namespace

std::size_t last_level_cache_bytes() {
  long best = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  best = std::max(best, ::sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
  best = std::max(best, ::sysconf(_SC_LEVEL2_CACHE_SIZE));
#endif
  std::size_t bytes = best > 0 ? static_cast<std::size_t>(best) : 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
    bytes = std::max(bytes, sysfs_size(dir + "/size"));
  }
  return bytes ? bytes : std::size_t{32} << 20;
}

cold_cache::cold_cache(std::size_t bytes)
    : bytes_(bytes ? bytes : std::min(2 * last_level_cache_bytes(), std::size_t{512} << 20)) {
  bytes_ = std::max<std::size_t>(bytes_, 64);
  buffer_ = std::make_unique<std::uint64_t[]>(bytes_ / sizeof(std::uint64_t));
}

cold_cache::~cold_cache() = default;

void cold_cache::flush() {
  const std::size_t words = bytes_ / sizeof(std::uint64_t);
  const std::uint64_t stamp = ++flushes_;
  // One write per 64-byte line makes the line dirty and ours; the read-back
  // keeps the compiler from dropping the writes.
  volatile std::uint64_t* p = buffer_.get();
  for (std::size_t i = 0; i < words; i += 8) p[i] = stamp + i;
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < words; i += 8) sum += p[i];
  sink_ += sum;
}

}  // namespace primcache
