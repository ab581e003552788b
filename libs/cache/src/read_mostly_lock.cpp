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
// threads have come and gone.
class ordinal_pool {
 public:
  std::size_t acquire() PRIMCACHE_EXCLUDES(mu_) {
    lock_guard g(mu_);
    auto free = std::find(used_.begin(), used_.end(), false);
    if (free == used_.end()) {
      used_.push_back(true);
      return used_.size() - 1;
    }
    *free = true;
    return static_cast<std::size_t>(free - used_.begin());
  }
  void release(std::size_t ordinal) PRIMCACHE_EXCLUDES(mu_) {
    lock_guard g(mu_);
    used_[ordinal] = false;
  }
  // Held across fork(). The ordinals of the threads a child does not have
  // stay taken there: their slots are shared by the child's threads, which
  // costs speed, never safety.
  void lock_for_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { mu_.lock(); }
  void unlock_after_fork() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS { mu_.unlock(); }

 private:
  mutex mu_;
  std::vector<bool> used_ PRIMCACHE_GUARDED_BY(mu_);
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
};

fork_registry& forks() {
  // Never destroyed: caches may be used, and fork() called, until exit.
  static fork_registry* r = [] {
    auto* made = new fork_registry;
    ::pthread_atfork(
        []() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
          fork_registry& all = forks();
          all.mu.lock();
          pool().lock_for_fork();
          for (read_mostly_lock* l : all.locks) l->lock_for_fork();
        },
        []() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
          fork_registry& all = forks();
          for (read_mostly_lock* l : all.locks) l->unlock_after_fork();
          pool().unlock_after_fork();
          all.mu.unlock();
        },
        []() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
          fork_registry& all = forks();
          all.forking_thread.store(std::this_thread::get_id(), std::memory_order_relaxed);
          all.generation.fetch_add(1, std::memory_order_relaxed);
          for (read_mostly_lock* l : all.locks) {
            l->reset_in_child();
            l->unlock_after_fork();
          }
          pool().unlock_after_fork();
          all.mu.unlock();
        });
    return made;
  }();
  return *r;
}

}  // namespace

std::uint64_t fork_generation() noexcept {
  return forks().generation.load(std::memory_order_relaxed);
}

bool orphaned_by_fork(std::uint64_t generation, std::thread::id creator) noexcept {
  const fork_registry& all = forks();
  return generation != all.generation.load(std::memory_order_relaxed) &&
         creator != all.forking_thread.load(std::memory_order_relaxed);
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
