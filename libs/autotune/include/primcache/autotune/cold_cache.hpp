// primcache/autotune/cold_cache.hpp — evicting the last-level cache between
// timed runs, so each run starts with its data in memory, as benchdnn's
// cold-cache mode measures (a kernel that looks fast only because the
// previous run left its operands in cache would win a warm measurement and
// lose in a real model).
//
//   primcache::cold_cache flusher;          // the process's flush buffer
//   for (...) { flusher.flush(); time(run); }
//
// flush() writes and reads back every cache line of a buffer larger than
// the last-level cache, which evicts whatever was there on every
// replacement policy in use (LRU and its approximations).
//
// The size rule (cold_cache_bytes_for): twice the last-level cache, at
// most max_cold_cache_bytes (128 MiB). The last-level cache is read from
// sysfs (cpu0's data or unified cache of the highest level), else from
// sysconf, else taken as 32 MiB. The cap exists because what hosts report
// is not always a cache one thread's data competes for: a VM's sysconf can
// say 508 MiB (CPUID as the hypervisor fills it, no sysfs entry), and a
// flush of twice that costs 50-60 ms (the tuner flushes some 200 times per
// primitive). 128 MiB is twice the 64 MiB a thread can plausibly use
// (32 MiB per AMD Zen CCD, 36 MiB on Intel client parts) and more than
// the largest such cache shipped (96 MiB per CCD with 3D V-Cache, 112.5
// MiB per Sapphire Rapids socket): writing more than the cache evicts it.
// Only a host whose one shared cache exceeds 128 MiB (Granite Rapids'
// 504 MB) is flushed partly.
//
// The buffer of a default-sized flusher (bytes 0) is the process's: made
// by the first such flusher (its pages committed by the first flush) and
// kept until the process exits, so tunings after the first allocate
// nothing and any number of threads share those bytes instead of holding
// a buffer each. A flusher of a chosen size owns its buffer.
//
// Thread-safety: one object per thread (flush() counts in the object);
// objects on different threads may flush the shared buffer at once (its
// words are written and read as relaxed atomics). The free functions may
// be called from anywhere. Exceptions: the constructor may throw
// std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "primcache/base/export.hpp"

namespace primcache {

// The most bytes a default-sized flusher writes (see the size rule above).
inline constexpr std::size_t max_cold_cache_bytes = std::size_t{128} << 20;

// The size of the largest data cache this host reports: sysfs's (the
// data or unified cache of the highest level under
// /sys/devices/system/cpu/cpu0/cache), else sysconf's (level 3, else 2),
// else 32 MiB. Unclamped: cold_cache_bytes_for bounds what a flush uses.
PRIMCACHE_API std::size_t last_level_cache_bytes();

// The size of the data or unified cache of the highest level described
// under `dir` (sysfs's form: index*/level, index*/type, index*/size such
// as "32768K"), the largest if several share that level; 0 when `dir`
// describes none.
PRIMCACHE_API std::size_t sysfs_last_level_cache_bytes(const std::string& dir);

// A default flusher's size for a last-level cache of `llc_bytes` (0: not
// known, taken as 32 MiB): twice it, at most max_cold_cache_bytes.
PRIMCACHE_API std::size_t cold_cache_bytes_for(std::size_t llc_bytes) noexcept;

class PRIMCACHE_API cold_cache {
 public:
  // bytes 0: the process's buffer of cold_cache_bytes_for(
  // last_level_cache_bytes()) bytes, allocated by the first such flusher.
  // Else a buffer of its own of `bytes` (at least one 64-byte line).
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
  std::unique_ptr<std::uint64_t[]> own_;  // a chosen size's buffer; null for the shared one
  std::uint64_t* buffer_;
  std::uint64_t flushes_ = 0;
  std::uint64_t sink_ = 0;
};

}  // namespace primcache
