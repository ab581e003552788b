// primcache/cache/internal/read_mostly_lock.hpp — the cache's concurrency
// control: writers exclude each other on a mutex; readers never wait for
// anything, and writers that unlink memory wait for the readers that might
// still see it before freeing it (read-copy-update).
//
// Private to the cache library (namespace primcache::cache_internal).
//
// Readers enter through the calling thread's own slot: 128 bytes (two cache
// lines, as Intel's adjacent-line prefetcher moves lines in pairs) holding
// two words, one per grace-period phase. Entering reads the current phase and
// increments that phase's word; leaving decrements it. A reader touches no
// line a writer writes except the phase word (written twice per grace
// period, only by writers that freed something) and the table itself, which
// writers change with release stores that keep it traversable.
//
// Writers serialize on `writers_` (lock()/unlock()). They never wait for
// readers while holding it. A writer that has unlinked entries (or anything
// else readers may be looking at) calls synchronize() after unlock(), then
// frees them: synchronize() flips the phase and waits until the old phase's
// words are all zero, twice (so readers of both phases that entered before
// the call have left; a reader that read the phase just before a flip and
// increments after it is caught by the second round). New readers enter the
// new phase, so a wait only ever drains.
//
// Memory ordering (the argument the cache's lookup relies on):
//   reader enter:  word[p].fetch_add(1, seq_cst); then seq_cst loads of the
//                  table's links
//   synchronize:   (after the unlinking stores) fence(seq_cst); then seq_cst
//                  loads of every slot's words
// If a synchronize load does not see a reader's increment, the fence
// precedes that increment in the single total order S ([atomics.order]/4.3),
// the reader's seq_cst link loads follow it in S, and so ([atomics.order]/4.2)
// they see the unlink: the reader cannot reach what was unlinked. Otherwise
// synchronize waits for the reader to leave (release RMW; the writer's
// acquire load that sees the count fall makes the reader's reads happen
// before the free). On x86 the seq_cst loads are plain loads.
//
// Slots are chosen by a per-thread ordinal (the smallest one free when the
// thread first entered any cache; released at thread exit). Two live threads
// share a slot only when there are more of them than slots; sharing costs
// speed, never safety, because counts are read-modify-writes.
//
// A slot's words also carry the hits counted by the cache: bits 0..15 are
// readers inside, bits 16..63 are hits. Leaving after a hit adds
// (1 << 16) - 1 — one more hit and one less reader in one RMW — so a hit
// costs two atomic RMWs, both on a line the thread already owns. (So at most
// 65535 threads may be inside through one slot at once; hits wrap after
// 2^48 per slot word.)
//
// fork(): a child has only the forking thread. pthread_atfork handlers
// (registered with the first lock) hold every live lock's writers' mutex
// across the fork, so the child copies no table in the middle of a change;
// in the child they forget the readers other threads had inside shared
// sections (their words' reader counts: those threads are gone, and a grace
// period would wait for them for ever), remake the grace-period mutex, and
// start a new fork generation: an in-flight creation whose creator is not
// the forking thread is orphaned (orphaned_by_fork) and never finishes
// there, so the cache replaces it instead of waiting for it.
//
// Thread-safety: all members are thread-safe. A thread must not call
// synchronize() while inside a shared section (it would wait for itself).
// Exceptions: none, except std::bad_alloc from the constructor.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

#include "primcache/base/export.hpp"
#include "primcache/base/thread_annotations.hpp"

namespace primcache::cache_internal {

struct alignas(128) reader_slot {
  // Per phase: readers inside (bits 0..15) and hits (16..63).
  std::atomic<std::uint64_t> word[2] = {0, 0};
  std::atomic<std::uint64_t> waits{0};  // waited lookups made through this slot
};

inline constexpr std::uint64_t reader_mask = 0xffff;
inline constexpr unsigned hit_shift = 16;

// The calling thread's ordinal, assigned on first use: the smallest not held
// by a live thread. Released when the thread exits.
PRIMCACHE_API std::size_t acquire_thread_ordinal();
// Slots per lock: a power of two, twice the hardware threads, within [8, 256].
PRIMCACHE_API std::size_t reader_slot_count() noexcept;

// How many fork()s separate this process from the first that used a cache
// (0 until then); a child's is its parent's + 1.
PRIMCACHE_API std::uint64_t fork_generation() noexcept;
// Whether a creation that `creator` started in fork generation `generation`
// can no longer finish in this process: it started before the latest fork,
// on a thread other than the one that forked (a thread the child does not
// have).
PRIMCACHE_API bool orphaned_by_fork(std::uint64_t generation, std::thread::id creator) noexcept;

inline std::size_t this_thread_ordinal() {
  // Ordinal + 1, so that zero means "not assigned yet" and the variable needs
  // no dynamic initialization (no guard, no allocation on the hit path).
  static constinit thread_local std::size_t ordinal_plus_one = 0;
  if (ordinal_plus_one == 0) [[unlikely]] {
    ordinal_plus_one = acquire_thread_ordinal() + 1;
  }
  return ordinal_plus_one - 1;
}

// The capability clang's analysis tracks: held exclusively by writers, "held
// shared" by readers inside a shared section (which may read what writers
// publish while writers run).
class PRIMCACHE_API PRIMCACHE_CAPABILITY("mutex") read_mostly_lock {
 public:
  read_mostly_lock();
  ~read_mostly_lock();
  read_mostly_lock(const read_mostly_lock&) = delete;
  read_mostly_lock& operator=(const read_mostly_lock&) = delete;

  reader_slot& slot_for_this_thread() noexcept { return slots_[this_thread_ordinal() & mask_]; }

  // Exclusive side: writers only; readers are not excluded.
  void lock() PRIMCACHE_ACQUIRE() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { writers_.lock(); }
  void unlock() PRIMCACHE_RELEASE() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { writers_.unlock(); }

  // Shared side, through the caller's slot (slot_for_this_thread()). Never
  // blocks. Returns the phase to pass to unlock_shared.
  unsigned lock_shared(reader_slot& slot) PRIMCACHE_ACQUIRE_SHARED() {
    const unsigned phase = phase_.load(std::memory_order_relaxed) & 1u;
    slot.word[phase].fetch_add(1, std::memory_order_seq_cst);
    return phase;
  }
  // Leaves a shared section; counts one hit on the slot when `hit`.
  void unlock_shared(reader_slot& slot, unsigned phase, bool hit) PRIMCACHE_RELEASE_SHARED() {
    slot.word[phase].fetch_add(hit ? (std::uint64_t{1} << hit_shift) - 1 : ~std::uint64_t{0},
                               std::memory_order_release);
  }
  // Counts a hit found outside a shared section (under the exclusive side).
  static void count_hit(reader_slot& slot) noexcept {
    slot.word[0].fetch_add(std::uint64_t{1} << hit_shift, std::memory_order_relaxed);
  }

  // Returns once every reader that was inside a shared section when it was
  // called has left. Call it after unlinking (and after unlock()), before
  // freeing what was unlinked. Never inside a shared section.
  void synchronize() noexcept;

  // Hits and waits summed over the slots (relaxed reads).
  std::uint64_t hits() const noexcept;
  std::uint64_t waits() const noexcept;

  // The atfork handlers' steps (read_mostly_lock.cpp).
  void lock_for_fork() noexcept PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  void unlock_after_fork() noexcept PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;
  void reset_in_child() noexcept PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS;

 private:
  // Read by every shared entry; written only by synchronize().
  alignas(128) std::atomic<unsigned> phase_{0};
  std::size_t mask_;
  std::unique_ptr<reader_slot[]> slots_;
  // Serializes writers. Its own line, so that writers taking it do not
  // invalidate readers' copy of phase_.
  alignas(128) mutex writers_;
  // Serializes grace periods (phase flips).
  mutex grace_;
};

// A shared section for its scope; count_hit() makes leaving it count a hit.
class PRIMCACHE_SCOPED_CAPABILITY shared_section {
 public:
  shared_section(read_mostly_lock& lock, reader_slot& slot) PRIMCACHE_ACQUIRE_SHARED(lock)
      : lock_(lock), slot_(slot), phase_(lock_.lock_shared(slot_)) {}
  ~shared_section() PRIMCACHE_RELEASE() { lock_.unlock_shared(slot_, phase_, hit_); }
  shared_section(const shared_section&) = delete;
  shared_section& operator=(const shared_section&) = delete;

  void count_hit() noexcept { hit_ = true; }

 private:
  read_mostly_lock& lock_;
  reader_slot& slot_;
  const unsigned phase_;
  bool hit_ = false;
};

}  // namespace primcache::cache_internal
