#include "primcache/autotune/cold_cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <string>

#include "primcache/base/env.hpp"

namespace primcache {
namespace {

constexpr std::size_t kUnknownCacheBytes = std::size_t{32} << 20;

// The first word of a file ("32768K", "3", "Unified"); empty if unreadable.
std::string first_word(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  in >> text;
  return text;
}

// The process's flush buffer: never freed, so a flush on a thread that
// outlives static destruction still writes live memory. Not
// value-initialized: its pages are committed by the first flush, not here.
std::uint64_t* shared_buffer(std::size_t bytes) {
  static std::uint64_t* const buffer = new std::uint64_t[bytes / sizeof(std::uint64_t)];
  return buffer;
}

std::size_t shared_buffer_bytes() {
  static const std::size_t bytes = cold_cache_bytes_for(last_level_cache_bytes());
  return bytes;
}

}  // namespace

std::size_t sysfs_last_level_cache_bytes(const std::string& dir) {
  int best_level = 0;
  std::size_t best = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string index = dir + "/index" + std::to_string(i);
    const std::string type = first_word(index + "/type");
    if (type != "Data" && type != "Unified") continue;  // "Instruction", or no such index
    const auto level = parse_int(first_word(index + "/level"), 0, 16);
    const auto size = parse_size(first_word(index + "/size"), std::uint64_t{1} << 40);
    if (!level || !size || size.value() == 0) continue;
    const int l = static_cast<int>(level.value());
    const auto bytes = static_cast<std::size_t>(size.value());
    if (l > best_level || (l == best_level && bytes > best)) {
      best_level = l;
      best = bytes;
    }
  }
  return best;
}

std::size_t last_level_cache_bytes() {
  // sysfs first: the kernel's cache topology. sysconf is glibc's reading
  // of CPUID, which a hypervisor may fill with anything (508 MiB of L3 on
  // a 2-vCPU VM with no sysfs cache entries).
  if (const std::size_t b = sysfs_last_level_cache_bytes("/sys/devices/system/cpu/cpu0/cache")) {
    return b;
  }
  long reported = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  reported = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
  if (reported <= 0) reported = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return reported > 0 ? static_cast<std::size_t>(reported) : kUnknownCacheBytes;
}

std::size_t cold_cache_bytes_for(std::size_t llc_bytes) noexcept {
  const std::size_t llc = llc_bytes ? llc_bytes : kUnknownCacheBytes;
  // Twice the cache, computed without overflow; then the cap (header).
  const std::size_t twice = llc > max_cold_cache_bytes / 2 ? max_cold_cache_bytes : 2 * llc;
  return std::max<std::size_t>(twice, 64);
}

cold_cache::cold_cache(std::size_t bytes) {
  if (bytes == 0) {
    bytes_ = shared_buffer_bytes();
    buffer_ = shared_buffer(bytes_);
  } else {
    bytes_ = std::max<std::size_t>(bytes, 64);
    own_ = std::make_unique<std::uint64_t[]>(bytes_ / sizeof(std::uint64_t));
    buffer_ = own_.get();
  }
}

cold_cache::~cold_cache() = default;

void cold_cache::flush() {
  const std::size_t words = bytes_ / sizeof(std::uint64_t);
  const std::uint64_t stamp = ++flushes_;
  // One write per 64-byte line makes the line dirty and ours; the read-back
  // keeps the compiler from dropping the writes. Relaxed atomics (plain
  // moves on x86-64): threads may flush the shared buffer at once.
  std::uint64_t* p = buffer_;
  for (std::size_t i = 0; i < words; i += 8) {
    std::atomic_ref<std::uint64_t>(p[i]).store(stamp + i, std::memory_order_relaxed);
  }
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < words; i += 8) {
    sum += std::atomic_ref<std::uint64_t>(p[i]).load(std::memory_order_relaxed);
  }
  sink_ += sum;
}

}  // namespace primcache
