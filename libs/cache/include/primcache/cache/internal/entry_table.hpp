// primcache/cache/internal/entry_table.hpp — the cache's index: an intrusive
// chained hash table of entries that readers traverse while a writer changes
// it.
//
// Private to the cache library (namespace primcache::cache_internal).
//
// Buckets are a power of two; an entry's bucket is picked by the top bits of
// its hash times 2^64/phi (Fibonacci hashing), which spreads identity-like
// hashes (std::hash<int>) as well as good ones. Each entry stores its full
// hash, so a lookup compares hashes before keys. The table grows (doubling)
// when it would hold more entries than buckets, and never shrinks.
//
// Concurrency: writers (one at a time, under the cache's exclusive lock)
// publish with release stores: an entry is linked at the head of its chain
// once its fields are written; an unlinked entry keeps its `bucket_next`, so
// a reader standing on it still reaches the rest of the chain. Unlinked
// entries are freed only after a grace period (read_mostly_lock::
// synchronize), so a reader's pointer never dangles. Growing relinks entries
// into a new bucket array; a reader that raced with it may miss an entry
// that is there (it then takes the cache's locked path, which finds it) but
// never finds a wrong one: find_concurrent compares hash and key, and gives
// up after kMaxSteps links. Replaced bucket arrays are kept until the table
// is destroyed (they sum to less than the current one).
//
// find_concurrent() is const and touches nothing but seq_cst loads (see
// read_mostly_lock.hpp for why seq_cst), so readers may run it at any time
// inside a shared section; everything else needs the exclusive lock.
// Neither find allocates.
//
// Thread-safety: as described (the cache's lock guards the writers).
// Exceptions: reserve_one_more may throw std::bad_alloc and then leaves the
// table as it was; the finds may throw what Eq throws; nothing else throws.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace primcache::cache_internal {

template <typename Entry>
class entry_table {
 public:
  // A chain longer than this is not searched further by a reader (it can
  // only be that long while growing relinks it); the locked path decides.
  static constexpr int kMaxSteps = 1024;

  entry_table() : current_(new bucket_array(1)) { buckets_.store(current_.get()); }
  entry_table(const entry_table&) = delete;
  entry_table& operator=(const entry_table&) = delete;

  // Under the exclusive lock.
  template <typename Key, typename Eq>
  Entry* find(std::uint64_t hash, const Key& key, const Eq& eq) const {
    const bucket_array& b = *current_;
    for (Entry* e = b.heads[b.index(hash)].load(std::memory_order_relaxed); e != nullptr;
         e = e->bucket_next.load(std::memory_order_relaxed)) {
      if (e->hash == hash && eq(e->key, key)) return e;
    }
    return nullptr;
  }

  // Inside a shared section, concurrently with a writer. nullptr means "not
  // seen": the key may still be there (see above).
  template <typename Key, typename Eq>
  Entry* find_concurrent(std::uint64_t hash, const Key& key, const Eq& eq) const {
    const bucket_array* b = buckets_.load(std::memory_order_seq_cst);
    int steps = 0;
    for (Entry* e = b->heads[b->index(hash)].load(std::memory_order_seq_cst); e != nullptr;
         e = e->bucket_next.load(std::memory_order_seq_cst)) {
      if (e->hash == hash && eq(e->key, key)) return e;
      if (++steps == kMaxSteps) return nullptr;
    }
    return nullptr;
  }

  // Makes room so that the next insert() does not allocate.
  void reserve_one_more() {
    if (size_ + 1 <= bucket_count()) return;
    retired_.reserve(retired_.size() + 1);
    auto grown = std::make_unique<bucket_array>(current_->bits + 1);
    // Nothing throws from here on.
    const bucket_array& old = *current_;
    const std::size_t old_count = old.count();
    for (std::size_t i = 0; i < old_count; ++i) {
      for (Entry* e = old.heads[i].load(std::memory_order_relaxed); e != nullptr;) {
        Entry* next = e->bucket_next.load(std::memory_order_relaxed);
        std::atomic<Entry*>& head = grown->heads[grown->index(e->hash)];
        e->bucket_next.store(head.load(std::memory_order_relaxed), std::memory_order_release);
        head.store(e, std::memory_order_relaxed);
        e = next;
      }
    }
    buckets_.store(grown.get(), std::memory_order_release);  // publishes the new heads
    retired_.push_back(std::move(current_));
    current_ = std::move(grown);
  }

  // Precondition: reserve_one_more() since the last insert; `e` not in the
  // table, its fields written.
  void insert(Entry* e) noexcept {
    std::atomic<Entry*>& head = current_->heads[current_->index(e->hash)];
    e->bucket_next.store(head.load(std::memory_order_relaxed), std::memory_order_relaxed);
    head.store(e, std::memory_order_release);
    ++size_;
  }

  // Precondition: `e` is in the table. `e` keeps its link to the rest of
  // the chain for readers standing on it.
  void remove(Entry* e) noexcept {
    std::atomic<Entry*>* link = &current_->heads[current_->index(e->hash)];
    while (link->load(std::memory_order_relaxed) != e) {
      link = &link->load(std::memory_order_relaxed)->bucket_next;
    }
    link->store(e->bucket_next.load(std::memory_order_relaxed), std::memory_order_release);
    --size_;
  }

  // Removes every entry, calling f(entry*) on each.
  template <typename F>
  void drain(F&& f) {
    const std::size_t count = current_->count();
    for (std::size_t i = 0; i < count; ++i) {
      Entry* e = current_->heads[i].load(std::memory_order_relaxed);
      current_->heads[i].store(nullptr, std::memory_order_release);
      while (e != nullptr) {
        Entry* next = e->bucket_next.load(std::memory_order_relaxed);
        f(e);
        e = next;
      }
    }
    size_ = 0;
  }

  std::size_t size() const noexcept { return size_; }
  std::size_t bucket_count() const noexcept { return current_->count(); }

 private:
  struct bucket_array {
    explicit bucket_array(unsigned b)
        : bits(b), heads(new std::atomic<Entry*>[std::size_t{1} << b]()) {}
    std::size_t count() const noexcept { return std::size_t{1} << bits; }
    std::size_t index(std::uint64_t hash) const noexcept {
      return static_cast<std::size_t>((hash * 0x9e3779b97f4a7c15ull) >> (64 - bits));
    }
    const unsigned bits;  // in [1, 63]
    const std::unique_ptr<std::atomic<Entry*>[]> heads;
  };

  std::unique_ptr<bucket_array> current_;              // writers' view
  std::atomic<const bucket_array*> buckets_{nullptr};  // readers' view
  std::vector<std::unique_ptr<bucket_array>> retired_;
  std::size_t size_ = 0;
};

}  // namespace primcache::cache_internal
