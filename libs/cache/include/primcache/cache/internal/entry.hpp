// primcache/cache/internal/entry.hpp — one cache entry, and the list of
// entries that have left a cache and are released after its lock is let go.
//
// Private to the cache library (namespace primcache::cache_internal).
//
// Ownership: an entry holds a reference count. The cache's table owns one
// reference while the entry is linked; the caller running its creator owns
// another until the creation is finished. Whoever drops the last reference
// deletes the entry — always outside the cache's locks, so keys and values
// are destroyed outside them.
//
// Guarding: `ready`, `linked`, `weight`, `promise`, `future` and the order
// links are guarded by the owning cache's lock (the cache's annotations
// cannot name it from here). `value` is written once by the creating caller before `ready` is
// set under the exclusive lock, and never again; readers read it only after
// seeing `ready` under the lock, and the eviction listener only when the
// entry was ready when it was unlinked. The removal record is written under
// the lock by the thread that unlinks the entry and read by that same thread
// after it lets go of the lock.
//
// Thread-safety: as described. Exceptions: entry's constructor throws what
// Key's copy constructor throws; nothing else throws.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <optional>

#include "primcache/cache/cache_options.hpp"
#include "primcache/cache/internal/eviction_order.hpp"

namespace primcache::cache_internal {

template <typename Key, typename Value>
struct entry : entry_hook {
  entry(const Key& k, std::uint64_t h) : hash(h), key(k) {}

  // Fields the lookup path reads come first, to share the entry's first line.
  const std::uint64_t hash;
  entry* bucket_next = nullptr;
  bool ready = false;
  bool linked = false;
  // Removal record.
  bool ready_at_removal = false;
  bool notify = false;
  eviction_reason removal_reason = eviction_reason::capacity;
  entry* graveyard_next = nullptr;
  std::atomic<std::uint32_t> refs{1};
  std::optional<Value> value;
  // Made by the first waiter under the exclusive lock; taken (under it) and
  // fulfilled by the creating caller.
  std::optional<std::promise<Value>> promise;
  std::shared_future<Value> future;  // waiters' handle; dropped once ready
  const Key key;
};

template <typename Key, typename Value>
void release(entry<Key, Value>* e) noexcept {
  // acq_rel: the deleting thread must see every other owner's last use.
  if (e->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete e;
}

// Entries unlinked under the lock, released (and announced to the eviction
// listener) when the graveyard goes out of scope. Declare it before the lock
// guard so that it is destroyed after the guard, on every exit path.
template <typename Key, typename Value>
class graveyard {
 public:
  using listener = std::function<void(const Key&, const Value*, eviction_reason)>;
  using entry_type = entry<Key, Value>;

  explicit graveyard(const listener& on_evict) noexcept : on_evict_(on_evict) {}
  graveyard(const graveyard&) = delete;
  graveyard& operator=(const graveyard&) = delete;

  // Runs the listener; a listener that throws terminates the process
  // (destructors are noexcept), as its contract says.
  ~graveyard() {
    for (entry_type* e = head_; e != nullptr;) {
      entry_type* next = e->graveyard_next;
      if (e->notify && on_evict_) {
        on_evict_(e->key, e->ready_at_removal ? &*e->value : nullptr, e->removal_reason);
      }
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
  entry_type* head_ = nullptr;
  entry_type* tail_ = nullptr;
};

}  // namespace primcache::cache_internal
