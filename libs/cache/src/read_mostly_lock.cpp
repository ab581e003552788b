#include "primcache/cache/internal/read_mostly_lock.hpp"

#include <algorithm>
#include <bit>
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

read_mostly_lock::read_mostly_lock()
    : mask_(reader_slot_count() - 1), slots_(new reader_slot[mask_ + 1]) {}

void read_mostly_lock::lock() {
  writers_.lock();
  writer_.store(true, std::memory_order_seq_cst);
  for (std::size_t i = 0; i <= mask_; ++i) {
    // Readers stay inside for a lookup and a value copy; spin briefly, then
    // yield, in case the reader was preempted.
    for (unsigned spins = 0; (slots_[i].word.load(std::memory_order_seq_cst) & reader_mask) != 0;
         ++spins) {
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

void read_mostly_lock::unlock() {
  writer_.store(false, std::memory_order_release);
  writers_.unlock();
}

void read_mostly_lock::lock_shared_slow(reader_slot& slot) {
  // Retreat so that the writer can finish, wait for it on its mutex, and
  // re-enter while holding that mutex: no writer is inside then, and the next
  // one acquires the mutex after this thread releases it, so it sees the count.
  slot.word.fetch_sub(1, std::memory_order_release);
  lock_guard g(writers_);
  slot.word.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t read_mostly_lock::hits() const noexcept {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i <= mask_; ++i) {
    sum += slots_[i].word.load(std::memory_order_relaxed) >> hit_shift;
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
