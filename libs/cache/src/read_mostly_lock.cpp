#include "primcache/cache/internal/read_mostly_lock.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <new>
#include <thread>
#include <vector>

#include "primcache/base/thread_annotations.hpp"

namespace primcache::cache_internal {
namespace {

// Hands out the smallest ordinal no live thread holds, so that the threads
// alive at one time get distinct slots (up to the slot count) however many
// threads have come and gone. Lock-free (a bitmap of atomic words): there
// is no lock a fork could copy held, nor one for a prepare handler to hold
// while a thread-exit destructor waits for it. In a fork child the ordinals
// of the threads it does not have stay taken: their slots are shared by the
// child's threads, which costs speed, never safety.
class ordinal_pool {
 public:
  std::size_t acquire() noexcept {
    for (std::size_t w = 0; w < words; ++w) {
      std::uint64_t bits = used_[w].load(std::memory_order_relaxed);
      while (bits != ~std::uint64_t{0}) {
        const std::uint64_t lowest_free = ~bits & (bits + 1);
        if (used_[w].compare_exchange_weak(bits, bits | lowest_free, std::memory_order_relaxed)) {
          return w * 64 + static_cast<std::size_t>(std::countr_zero(lowest_free));
        }
      }
    }
    // More live threads than ordinals: past the bitmap, sharing slots.
    return words * 64 + overflow_.fetch_add(1, std::memory_order_relaxed) % (words * 64);
  }
  void release(std::size_t ordinal) noexcept {
    if (ordinal >= words * 64) return;
    used_[ordinal / 64].fetch_and(~(std::uint64_t{1} << (ordinal % 64)), std::memory_order_relaxed);
  }

 private:
  static constexpr std::size_t words = 64;  // 4096 ordinals
  std::atomic<std::uint64_t> used_[words] = {};
  std::atomic<std::size_t> overflow_{0};
};

ordinal_pool& pool() {
  static ordinal_pool* p = new ordinal_pool;  // never destroyed: threads exit after main
  return *p;
}

// Returns the thread's ordinal to the pool at thread exit. If a later
// thread-exit destructor of the same thread uses a cache again, it keeps the
// released ordinal and may share a slot with a new thread: slower, still safe.
struct ordinal_holder {
  std::size_t ordinal;
  ~ordinal_holder() { pool().release(ordinal); }
};

}  // namespace

std::size_t acquire_thread_ordinal() {
  static thread_local ordinal_holder holder{pool().acquire()};
  return holder.ordinal;
}

std::size_t reader_slot_count() noexcept {
  const std::size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<std::size_t>(std::bit_ceil(2 * hardware), 8, 256);
}

namespace {

// Every live lock, for the atfork handlers; the fork generation.
struct fork_registry {
  mutex mu;
  std::vector<read_mostly_lock*> locks PRIMCACHE_GUARDED_BY(mu);
  std::atomic<std::uint64_t> generation{0};
  // The thread that made the latest fork, in this process (written by the
  // child handler, before this process has any other thread).
  std::atomic<std::thread::id> forking_thread{};
  // The first generation from which every fork into this process was made
  // by forking_thread: a creation it started in an earlier generation was
  // started by another thread, whatever its id says (a child's new threads
  // can be given the ids of the threads it does not have).
  std::atomic<std::uint64_t> lineage_start{0};
};

fork_registry& forks() {
  // Never destroyed: caches may be used, and fork() called, until exit.
  static fork_registry* r = [] {
    auto* made = new fork_registry;
    ::pthread_atfork(
        []() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
          fork_registry& all = forks();
          all.mu.lock();
          for (read_mostly_lock* l : all.locks) l->lock_for_fork();
        },
        []() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
          fork_registry& all = forks();
          for (read_mostly_lock* l : all.locks) l->unlock_after_fork();
          all.mu.unlock();
        },
        []() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
          fork_registry& all = forks();
          const std::thread::id self = std::this_thread::get_id();
          const std::uint64_t parent = all.generation.load(std::memory_order_relaxed);
          if (all.forking_thread.load(std::memory_order_relaxed) != self) {
            all.lineage_start.store(parent, std::memory_order_relaxed);
          }
          all.forking_thread.store(self, std::memory_order_relaxed);
          all.generation.store(parent + 1, std::memory_order_relaxed);
          for (read_mostly_lock* l : all.locks) {
            l->reset_in_child();
            l->unlock_after_fork();
          }
          all.mu.unlock();
        });
    return made;
  }();
  return *r;
}

// Made at load, not on first use (fork safety: docs/runtime.md). The fork
// registry is not: registering its atfork handlers at load would change
// their place among the other libraries' handlers, and so the order in
// which fork() takes their locks.
[[maybe_unused]] const ordinal_pool& ordinal_pool_at_load = pool();

}  // namespace

std::uint64_t fork_generation() noexcept {
  return forks().generation.load(std::memory_order_relaxed);
}

bool orphaned_by_fork(std::uint64_t generation, std::thread::id creator) noexcept {
  const fork_registry& all = forks();
  return generation != all.generation.load(std::memory_order_relaxed) &&
         (creator != all.forking_thread.load(std::memory_order_relaxed) ||
          generation < all.lineage_start.load(std::memory_order_relaxed));
}

read_mostly_lock::read_mostly_lock()
    : mask_(reader_slot_count() - 1), slots_(new reader_slot[mask_ + 1]) {
  fork_registry& all = forks();
  lock_guard g(all.mu);
  all.locks.push_back(this);
}

read_mostly_lock::~read_mostly_lock() {
  fork_registry& all = forks();
  lock_guard g(all.mu);
  all.locks.erase(std::find(all.locks.begin(), all.locks.end(), this));
}

void read_mostly_lock::lock_for_fork() noexcept {
  // Writers hold it briefly and never wait for anything while they do. The
  // grace-period mutex is not taken: its holder waits for readers, who may
  // be slow (a Value's copy); the child remakes it instead.
  writers_.lock();
}

void read_mostly_lock::unlock_after_fork() noexcept {
  writers_.unlock();
}

void read_mostly_lock::reset_in_child() noexcept {
  // The forking thread is inside no shared section (it is in fork()), so
  // every reader counted is a thread the child does not have. Hit counts
  // stay.
  for (std::size_t i = 0; i <= mask_; ++i) {
    for (auto& word : slots_[i].word) word.fetch_and(~reader_mask, std::memory_order_relaxed);
  }
  // Held by a thread in the middle of a grace period, perhaps: what it
  // guards (the phase) is an atomic, so the lock is made anew, not released
  // (destroying a held std::mutex is undefined).
  new (&grace_) mutex;
}

void read_mostly_lock::synchronize() noexcept {
  // Orders the caller's unlinking stores before the loads below (see the
  // header's argument).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // No reader inside at all: nothing to wait for, and no phase flip to
  // disturb readers' copy of phase_. (A reader whose increment these loads
  // miss sees the unlinks, by the same argument as below.)
  bool anyone = false;
  for (std::size_t i = 0; i <= mask_ && !anyone; ++i) {
    anyone = ((slots_[i].word[0].load(std::memory_order_seq_cst) |
               slots_[i].word[1].load(std::memory_order_seq_cst)) &
              reader_mask) != 0;
  }
  if (!anyone) return;
  lock_guard g(grace_);
  for (int round = 0; round < 2; ++round) {
    const unsigned old = phase_.load(std::memory_order_relaxed) & 1u;
    phase_.store(old ^ 1u, std::memory_order_seq_cst);
    for (std::size_t i = 0; i <= mask_; ++i) {
      // Readers stay inside for a lookup and a value copy; spin briefly,
      // then yield, in case the reader was preempted.
      for (unsigned spins = 0;
           (slots_[i].word[old].load(std::memory_order_seq_cst) & reader_mask) != 0; ++spins) {
        if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
}

std::uint64_t read_mostly_lock::hits() const noexcept {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i <= mask_; ++i) {
    sum += slots_[i].word[0].load(std::memory_order_relaxed) >> hit_shift;
    sum += slots_[i].word[1].load(std::memory_order_relaxed) >> hit_shift;
  }
  return sum;
}

std::uint64_t read_mostly_lock::waits() const noexcept {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i <= mask_; ++i) {
    sum += slots_[i].waits.load(std::memory_order_relaxed);
  }
  return sum;
}

}  // namespace primcache::cache_internal
