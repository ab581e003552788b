// primcache/autotune/cold_cache.hpp — evicting the last-level cache between
// timed runs, so each run starts with its data in memory, as benchdnn's
// cold-cache mode measures (a kernel that looks fast only because the
// previous run left its operands in cache would win a warm measurement and
// lose in a real model).
//
//   primcache::cold_cache flusher;          // twice the last-level cache
//   for (...) { flusher.flush(); time(run); }
//
// flush() writes and reads back every cache line of a private buffer larger
// than the last-level cache, which evicts whatever was there on every
// replacement policy in use (LRU and its approximations); the buffer is
// allocated once, by the constructor.
//
// Thread-safety: one object per thread (flush() writes the object's
// buffer); last_level_cache_bytes() may be called from anywhere.
// Exceptions: the constructor may throw std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "primcache/base/export.hpp"

namespace primcache {

// The size of the largest data cache this host reports (sysconf, then
// /sys/devices/system/cpu/cpu0/cache), or 32 MiB when it reports none.
PRIMCACHE_API std::size_t last_level_cache_bytes();

class PRIMCACHE_API cold_cache {
 public:
  // bytes 0: twice last_level_cache_bytes(), at most 512 MiB.
  explicit cold_cache(std::size_t bytes = 0);
  ~cold_cache();
  cold_cache(const cold_cache&) = delete;
  cold_cache& operator=(const cold_cache&) = delete;

  void flush();
  std::size_t bytes() const noexcept { return bytes_; }
  // How many flushes this object has done.
  std::uint64_t flushes() const noexcept { return flushes_; }

 private:
  std::size_t bytes_;
  std::unique_ptr<std::uint64_t[]> buffer_;
  std::uint64_t flushes_ = 0;
  std::uint64_t sink_ = 0;
};

}  // namespace primcache
