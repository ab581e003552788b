// primcache/cache/internal/read_mostly_lock.hpp — a reader-writer lock whose
// shared side writes only the calling thread's own cache line.
//
// Private to the cache library (namespace primcache::cache_internal).
//
// Why: a std::shared_mutex's lock_shared is a read-modify-write of one word
// that every reader shares, so two threads that only read still bounce that
// line between their cores and a second thread adds little throughput. Here
// each thread enters through its own slot: 128 bytes (two cache lines, as
// Intel's adjacent-line prefetcher moves lines in pairs) holding a reader
// count. A writer raises a flag and waits until every slot's count is zero.
//
// Memory ordering (the argument the cache's hit path relies on):
//   reader enter:  slot.fetch_add(1, seq_cst); then writer_.load(seq_cst)
//   writer enter:  writer_.store(true, seq_cst); then slot.load(acquire) == 0
//                  for every slot
// The two pairs are the store-then-load halves of Dekker's protocol; with all
// four operations in the single seq_cst order, either the reader sees the
// flag (and backs off) or the writer sees the reader's count (and waits), so
// a reader and a writer are never inside together. A reader leaves with a
// release RMW on its slot; the writer's acquire load that sees the count at
// zero makes everything the reader read happen before what the writer then
// writes. The writer leaves with writer_.store(false, release); a reader's
// seq_cst load that reads that false (or a later one) acquires what the
// writer wrote. A reader that saw the flag retreats, parks on the writers'
// mutex, and re-enters while holding it, when no writer can be inside; the
// next writer takes that mutex after it and so sees its count.
//
// Slots are chosen by a per-thread ordinal (the smallest one free when the
// thread first entered any cache; released at thread exit). Two live threads
// share a slot only when there are more of them than slots; sharing costs
// speed, never safety, because counts are read-modify-writes.
//
// A slot's word also carries the hits counted by the cache: bits 0..15 are
// readers inside, bits 16..63 are hits. Leaving after a hit adds
// (1 << 16) - 1 — one more hit and one less reader in one RMW — so a hit
// costs two atomic RMWs, both on a line the thread already owns. (So at most
// 65535 threads may be inside through one slot at once; hits wrap after
// 2^48 per slot.)
//
// Thread-safety: all members are thread-safe. A thread must not take the
// exclusive side while inside a shared section (it would wait for itself).
// Exceptions: none, except std::bad_alloc from the constructor.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "primcache/base/export.hpp"
#include "primcache/base/thread_annotations.hpp"

namespace primcache::cache_internal {

struct alignas(128) reader_slot {
  std::atomic<std::uint64_t> word{0};   // readers (bits 0..15) and hits (16..63)
  std::atomic<std::uint64_t> waits{0};  // waited lookups made through this slot
};

inline constexpr std::uint64_t reader_mask = 0xffff;
inline constexpr unsigned hit_shift = 16;

// The calling thread's ordinal, assigned on first use: the smallest not held
// by a live thread. Released when the thread exits.
PRIMCACHE_API std::size_t acquire_thread_ordinal();
// Slots per lock: a power of two, twice the hardware threads, within [8, 256].
PRIMCACHE_API std::size_t reader_slot_count() noexcept;

inline std::size_t this_thread_ordinal() {
  // Ordinal + 1, so that zero means "not assigned yet" and the variable needs
  // no dynamic initialization (no guard, no allocation on the hit path).
  static constinit thread_local std::size_t ordinal_plus_one = 0;
  if (ordinal_plus_one == 0) [[unlikely]] {
    ordinal_plus_one = acquire_thread_ordinal() + 1;
  }
  return ordinal_plus_one - 1;
}

class PRIMCACHE_API PRIMCACHE_CAPABILITY("mutex") read_mostly_lock {
 public:
  read_mostly_lock();
  read_mostly_lock(const read_mostly_lock&) = delete;
  read_mostly_lock& operator=(const read_mostly_lock&) = delete;

  // Out of line: once per first entry of a thread, plus the slot lookup.
  reader_slot& slot_for_this_thread() noexcept { return slots_[this_thread_ordinal() & mask_]; }

  // Exclusive side. Blocks other writers on a mutex and spins (then yields)
  // while readers drain.
  void lock() PRIMCACHE_ACQUIRE() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  void unlock() PRIMCACHE_RELEASE() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;

  // Shared side, through the caller's slot (slot_for_this_thread()).
  void lock_shared(reader_slot& slot) PRIMCACHE_ACQUIRE_SHARED() {
    slot.word.fetch_add(1, std::memory_order_seq_cst);
    if (writer_.load(std::memory_order_seq_cst)) [[unlikely]] {
      lock_shared_slow(slot);
    }
  }
  // Leaves a shared section; counts one hit on the slot when `hit`.
  void unlock_shared(reader_slot& slot, bool hit) PRIMCACHE_RELEASE_SHARED() {
    slot.word.fetch_add(hit ? (std::uint64_t{1} << hit_shift) - 1 : ~std::uint64_t{0},
                        std::memory_order_release);
  }

  // Hits and waits summed over the slots (relaxed reads).
  std::uint64_t hits() const noexcept;
  std::uint64_t waits() const noexcept;

 private:
  void lock_shared_slow(reader_slot& slot) PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;

  // Read by every shared entry; written only when a writer enters or leaves.
  alignas(128) std::atomic<bool> writer_{false};
  std::size_t mask_;
  std::unique_ptr<reader_slot[]> slots_;
  // Serializes writers and parks readers while a writer is inside. Its own
  // line, so that writers taking it do not invalidate readers' copy of writer_.
  alignas(128) mutex writers_;
};

// A shared section for its scope; count_hit() makes leaving it count a hit.
class PRIMCACHE_SCOPED_CAPABILITY shared_section {
 public:
  shared_section(read_mostly_lock& lock, reader_slot& slot) PRIMCACHE_ACQUIRE_SHARED(lock)
      : lock_(lock), slot_(slot) {
    lock_.lock_shared(slot_);
  }
  ~shared_section() PRIMCACHE_RELEASE() { lock_.unlock_shared(slot_, hit_); }
  shared_section(const shared_section&) = delete;
  shared_section& operator=(const shared_section&) = delete;

  void count_hit() noexcept { hit_ = true; }

 private:
  read_mostly_lock& lock_;
  reader_slot& slot_;
  bool hit_ = false;
};

}  // namespace primcache::cache_internal
