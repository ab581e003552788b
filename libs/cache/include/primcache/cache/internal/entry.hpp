// primcache/cache/internal/entry.hpp — one cache entry, and the list of
// entries that have left a cache and are released after its lock is let go.
//
// Private to the cache library (namespace primcache::cache_internal).
//
// Ownership: an entry holds a reference count. The cache's table owns one
// reference while the entry is linked; the caller running its creator owns
// another until the creation is finished; each caller waiting for the
// creation owns one until it has copied the value out. The table's
// reference is dropped (by the graveyard) only after a grace period, once no
// reader can still hold a pointer to the entry; whoever drops the last
// reference deletes the entry — always outside the cache's locks, so keys
// and values are destroyed outside them.
//
// Guarding: `linked`, `weight`, `promise`, `future` and the order links are
// guarded by the owning cache's exclusive lock (the cache's annotations
// cannot name it from here). `bucket_next` and `ready` are written under it
// and read by readers concurrently (atomics; see entry_table.hpp). `value`
// is written once by the creating caller before `ready` is set (release)
// under the exclusive lock, and never again; readers read it only after
// seeing `ready` (acquire), and the eviction listener only when the entry
// was ready when it was unlinked. Waiters read `value` after the promise is
// fulfilled, which the creating caller does after writing it; a failure
// value, which never becomes ready, is written for waiters only after the
// entry is unlinked. `hash`, `key`, `creator_thread` and `fork_generation` are written before
// the entry is linked and never change. The removal record is written under
// the lock by the thread that unlinks the entry and read by that same
// thread after it lets go of the lock.
//
// Thread-safety: as described. Exceptions: entry's constructor throws what
// Key's copy constructor throws; nothing else throws.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <thread>

#include "primcache/cache/cache_options.hpp"
#include "primcache/cache/internal/eviction_order.hpp"
#include "primcache/cache/internal/read_mostly_lock.hpp"

namespace primcache::cache_internal {

template <typename Key, typename Value>
struct entry : entry_hook {
  entry(const Key& k, std::uint64_t h) : hash(h), key(k) {}

  // Fields the lookup path reads come first, to share the entry's first line.
  const std::uint64_t hash;
  std::atomic<entry*> bucket_next{nullptr};
  std::atomic<bool> ready{false};
  bool linked = false;
  // Removal record.
  bool ready_at_removal = false;
  bool notify = false;
  eviction_reason removal_reason = eviction_reason::capacity;
  entry* graveyard_next = nullptr;
  std::atomic<std::uint32_t> refs{1};
  std::optional<Value> value;
  // The thread running the creator: a lookup of the same key from that
  // thread while the entry is in flight would wait for itself.
  std::thread::id creator_thread;
  // The fork generation the creation started in (read_mostly_lock.hpp): a
  // fork child finds the creations of the threads it does not have orphaned.
  std::uint64_t fork_generation = 0;
  // Made by the first waiter under the exclusive lock; taken (under it) and
  // fulfilled by the creating caller once `value` is written (or with the
  // creation's exception). Waiters copy `value` out themselves, so that a
  // throwing copy reaches that waiter alone.
  std::optional<std::promise<void>> promise;
  std::shared_future<void> future;  // waiters' handle; dropped once ready
  const Key key;
};

template <typename Key, typename Value>
void release(entry<Key, Value>* e) noexcept {
  // acq_rel: the deleting thread must see every other owner's last use.
  if (e->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete e;
}

// Entries that have left a cache and whose release waits for the next grace
// period, so that one grace period (read_mostly_lock::synchronize) serves up
// to kDeferredLimit evictions instead of one each: a writer evicting on every
// insert then disturbs readers' cache lines once per kDeferredLimit inserts.
// Pushes are lock-free (a stack linked through graveyard_next); whoever
// pushes it to the limit takes the whole stack, waits for a grace period and
// releases it. Entries pushed were unlinked before, so that grace period
// covers them.
template <typename Key, typename Value>
class deferred_releases {
 public:
  using entry_type = entry<Key, Value>;
  static constexpr std::size_t kDeferredLimit = 32;

  deferred_releases() = default;
  deferred_releases(const deferred_releases&) = delete;
  deferred_releases& operator=(const deferred_releases&) = delete;
  // Single-threaded by then: no reader remains.
  ~deferred_releases() { release_chain(head_.exchange(nullptr, std::memory_order_acquire)); }

  // Adds the chain first..last (graveyard_next links, `n` entries); true when
  // the list has reached the limit.
  bool push(entry_type* first, entry_type* last, std::size_t n) noexcept {
    entry_type* head = head_.load(std::memory_order_relaxed);
    do {
      last->graveyard_next = head;
    } while (!head_.compare_exchange_weak(head, first, std::memory_order_release,
                                          std::memory_order_relaxed));
    return count_.fetch_add(n, std::memory_order_relaxed) + n >= kDeferredLimit;
  }

  // Releases everything pushed so far, after a grace period. Never inside a
  // shared section.
  void flush(read_mostly_lock& lock) noexcept {
    entry_type* chain = head_.exchange(nullptr, std::memory_order_acquire);
    if (chain == nullptr) return;
    std::size_t n = 0;
    for (entry_type* e = chain; e != nullptr; e = e->graveyard_next) ++n;
    count_.fetch_sub(n, std::memory_order_relaxed);
    lock.synchronize();
    release_chain(chain);
  }

 private:
  static void release_chain(entry_type* e) noexcept {
    while (e != nullptr) {
      entry_type* next = e->graveyard_next;
      release(e);
      e = next;
    }
  }

  std::atomic<entry_type*> head_{nullptr};
  std::atomic<std::size_t> count_{0};
};

// Entries unlinked under the lock, announced to the eviction listener when
// the graveyard goes out of scope, and released after a grace period (so
// that no reader still stands on them): at once (synchronize), or, when
// `deferred` is given, with the next batch of deferred_releases. Declare it
// before the lock guard so that it is destroyed after the guard, on every
// exit path; never inside a shared section.
template <typename Key, typename Value>
class graveyard {
 public:
  using listener = std::function<void(const Key&, const Value*, eviction_reason)>;
  using entry_type = entry<Key, Value>;

  graveyard(const listener& on_evict, read_mostly_lock& lock,
            deferred_releases<Key, Value>* deferred = nullptr) noexcept
      : on_evict_(on_evict), lock_(lock), deferred_(deferred) {}
  graveyard(const graveyard&) = delete;
  graveyard& operator=(const graveyard&) = delete;

  // Runs the listener; a listener that throws terminates the process
  // (destructors are noexcept), as its contract says.
  ~graveyard() {
    if (head_ == nullptr) return;
    std::size_t n = 0;
    for (entry_type* e = head_; e != nullptr; e = e->graveyard_next) {
      if (e->notify && on_evict_) {
        on_evict_(e->key, e->ready_at_removal ? &*e->value : nullptr, e->removal_reason);
      }
      ++n;
    }
    if (deferred_ != nullptr) {
      if (deferred_->push(head_, tail_, n)) deferred_->flush(lock_);
      return;
    }
    lock_.synchronize();
    for (entry_type* e = head_; e != nullptr;) {
      entry_type* next = e->graveyard_next;
      release(e);
      e = next;
    }
  }

  // Takes over the table's reference. Keeps removal order for the listener.
  void bury(entry_type* e) noexcept {
    e->graveyard_next = nullptr;
    if (tail_ == nullptr) {
      head_ = e;
    } else {
      tail_->graveyard_next = e;
    }
    tail_ = e;
  }

 private:
  const listener& on_evict_;
  read_mostly_lock& lock_;
  deferred_releases<Key, Value>* const deferred_;
  entry_type* head_ = nullptr;
  entry_type* tail_ = nullptr;
};

}  // namespace primcache::cache_internal
