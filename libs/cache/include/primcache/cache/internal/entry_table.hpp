// primcache/cache/internal/entry_table.hpp — the cache's index: an intrusive
// chained hash table of entries.
//
// Private to the cache library (namespace primcache::cache_internal).
//
// Buckets are a power of two; an entry's bucket is picked by the top bits of
// its hash times 2^64/phi (Fibonacci hashing), which spreads identity-like
// hashes (std::hash<int>) as well as good ones. Each entry stores its full
// hash, so a lookup compares hashes before keys. The table grows (doubling)
// when it would hold more entries than buckets, and never shrinks.
//
// find() is const and touches nothing but loads, so readers may run it
// concurrently under the cache's shared lock; everything else needs the
// exclusive lock. find() allocates nothing.
//
// Thread-safety: none of its own (the cache's lock guards it). Exceptions:
// reserve_one_more may throw std::bad_alloc and then leaves the table as it
// was; find may throw what Eq throws; nothing else throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace primcache::cache_internal {

template <typename Entry>
class entry_table {
 public:
  entry_table() : buckets_(new Entry*[2]()), bucket_bits_(1) {}
  entry_table(const entry_table&) = delete;
  entry_table& operator=(const entry_table&) = delete;

  template <typename Key, typename Eq>
  Entry* find(std::uint64_t hash, const Key& key, const Eq& eq) const {
    for (Entry* e = buckets_[index(hash)]; e != nullptr; e = e->bucket_next) {
      if (e->hash == hash && eq(e->key, key)) return e;
    }
    return nullptr;
  }

  // Makes room so that the next insert() does not allocate.
  void reserve_one_more() {
    if (size_ + 1 <= bucket_count()) return;
    const unsigned bits = bucket_bits_ + 1;
    std::unique_ptr<Entry*[]> grown(new Entry*[std::size_t{1} << bits]());
    const std::size_t old_count = bucket_count();
    bucket_bits_ = bits;
    for (std::size_t i = 0; i < old_count; ++i) {
      for (Entry* e = buckets_[i]; e != nullptr;) {
        Entry* next = e->bucket_next;
        Entry*& head = grown[index(e->hash)];
        e->bucket_next = head;
        head = e;
        e = next;
      }
    }
    buckets_ = std::move(grown);
  }

  // Precondition: reserve_one_more() since the last insert; `e` not in the table.
  void insert(Entry* e) noexcept {
    Entry*& head = buckets_[index(e->hash)];
    e->bucket_next = head;
    head = e;
    ++size_;
  }

  // Precondition: `e` is in the table.
  void remove(Entry* e) noexcept {
    Entry** link = &buckets_[index(e->hash)];
    while (*link != e) link = &(*link)->bucket_next;
    *link = e->bucket_next;
    e->bucket_next = nullptr;
    --size_;
  }

  // Removes every entry, calling f(entry*) on each.
  template <typename F>
  void drain(F&& f) {
    for (std::size_t i = 0; i < bucket_count(); ++i) {
      for (Entry* e = buckets_[i]; e != nullptr;) {
        Entry* next = e->bucket_next;
        e->bucket_next = nullptr;
        f(e);
        e = next;
      }
      buckets_[i] = nullptr;
    }
    size_ = 0;
  }

  std::size_t size() const noexcept { return size_; }
  std::size_t bucket_count() const noexcept { return std::size_t{1} << bucket_bits_; }

 private:
  std::size_t index(std::uint64_t hash) const noexcept {
    return static_cast<std::size_t>((hash * 0x9e3779b97f4a7c15ull) >> (64 - bucket_bits_));
  }

  std::unique_ptr<Entry*[]> buckets_;
  unsigned bucket_bits_;  // in [1, 63]
  std::size_t size_ = 0;
};

}  // namespace primcache::cache_internal
