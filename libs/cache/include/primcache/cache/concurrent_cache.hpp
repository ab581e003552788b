// primcache/cache/concurrent_cache.hpp — the generic concurrent cache that
// the primitive cache, the constant tensor cache and users' own caches are
// built from.
//
//   primcache::concurrent_cache<primcache::key, std::shared_ptr<const impl>> cache(1024);
//   auto r = cache.get_or_add(k, [&] { return std::make_shared<const impl>(compile(k)); });
//   r.value->run();           // r.outcome: hit, miss or waited
//
// get_or_add(key, creator): a hit returns a copy of the cached value. On a
// miss exactly one caller runs `creator` — with no lock held, so creators may
// themselves use the cache — while concurrent callers for the same key wait
// on a std::shared_future (made when the first of them arrives, so that an
// uncontended miss pays for no shared state) and then copy the same value
// out. A creator that asks for its own key on its own thread (directly, or
// through the creators of other keys) would wait for itself: that call
// throws primcache::error (invalid_arguments) instead. A cycle across
// threads — A's creator waits for B while B's creator, on another thread,
// waits for A — still deadlocks, as in any memoizing cache; creators must
// not wait for each other's keys in a cycle. A creator fails by
// throwing (or by returning a value options.is_failure recognizes); the
// failure reaches the creator's caller and every waiter (rethrown, or
// returned as that value), nothing is left in the cache, and the next call
// creates afresh.
//
// Capacity counts entries, or weight when options.weigher is set (unit()
// says which; a kept entry then weighs max(weigher(key, value), 1), so that
// the capacity bounds the entry count too). An entry counts toward size()
// from the moment its creation starts; in-flight entries may be evicted
// like any other when capacity counts entries (in a bytes cache they weigh
// nothing and are never evicted for room), and their waiters still receive
// the value (which the cache then does not keep). So a key's creator runs
// at most 1 + evictions + erasures + failures times. Capacity 0 keeps
// nothing and de-duplicates nothing: every call runs its creator, and a
// creation that finishes under capacity 0 is not kept. set_capacity evicts
// any excess at once, in policy order (cache_policy.hpp);
// clear_and_set_capacity removes everything and sets the capacity in one
// step. Every call leaves size() <= capacity() (entries) or weight() <=
// capacity() (bytes); occupancy() reads the three consistently.
//
// Thread-safety: every member function may be called concurrently from any
// thread, except the destructor, which must not race with anything (in-flight
// creators included). No lock is held while the creator, the weigher,
// is_failure or the eviction listener runs, and keys and values that leave
// the cache are destroyed outside the locks. Hash runs before any lock or
// section is entered. Eq runs inside a shared section (the lock-free
// lookup) and under the exclusive lock (the locked path, erase, contains).
// Value's copy constructor runs inside a shared section on a hit (a slow
// copy there delays writers' grace periods), and under the exclusive lock on
// the rare hit that the locked path serves — a lookup that a concurrent
// table growth hid, or whose entry became ready between the two looks — so
// a slow copy there stalls every writer; waiters copy the value out with no
// lock held. Eq and Value's copy constructor must not call back into the
// same cache.
//
// The hit path takes no lock at all, never waits for a writer and allocates
// nothing: misses, inserts, evictions and capacity changes running at the
// same time on other threads do not delay it (beyond sharing cache lines).
// It enters a shared section through the calling thread's own slot of a
// read_mostly_lock (internal/read_mostly_lock.hpp: one RMW on a line the
// thread owns), finds the entry with loads only while writers may be
// changing the table (internal/entry_table.hpp), checks the entry's `ready`
// flag (acquire), sets its reference bit if it is clear (a relaxed store
// the first time, a relaxed load after), copies the value, and leaves the
// section with one RMW that also counts the hit. Everything else — waiting
// for an in-flight creation, inserting, evicting, erasing, resizing, and a
// hit that a concurrent table growth hid from the lock-free lookup — goes
// through the exclusive lock, which only writers take.
//
// Memory ordering: the table's links and an entry's `ready` flag are written
// only under the exclusive lock, with release stores; `value` is written by
// the creating caller just before it takes the lock to set `ready`, and
// never again while the entry exists; a reader reads `value` only after
// seeing `ready`, a waiter only after the creator fulfils the waiters'
// promise. An entry (or anything else) unlinked by a writer is freed
// only after a grace period — the writer, after letting go of the lock,
// waits until every reader that was inside a shared section has left — so
// a reader never touches freed memory, and a reader that found an entry an
// instant before it was evicted returns its value (a hit ordered before the
// eviction). The reference bit and the counters are relaxed atomics: hints
// and sums with no ordering duties (the bit is cleared only under the
// exclusive lock).
//
// Exceptions: a creation fails, for its caller and every waiter alike, when
// the creator, the weigher, or the copy of the value into the cache throws:
// get_or_add rethrows that exception to all of them and keeps nothing. It
// may throw std::bad_alloc on a miss (before anything changes), and
// primcache::error (invalid_arguments) when a creator asks for its own key
// on its own thread (above). Copying the value out to a caller — a hit, a
// waiter, or the creator's caller when Value cannot be moved — comes after
// the creation is over: a throw there reaches that caller alone, and the
// cache keeps the value (a failure value's one copy for its waiters is the
// exception: if it throws, every waiter gets that exception). erase and
// contains throw what Hash or Eq throw. The eviction listener must not throw.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/cache/cache_options.hpp"
#include "primcache/cache/cache_policy.hpp"
#include "primcache/cache/cache_stats.hpp"
#include "primcache/cache/internal/entry.hpp"
#include "primcache/cache/internal/entry_table.hpp"
#include "primcache/cache/internal/eviction_order.hpp"
#include "primcache/cache/internal/read_mostly_lock.hpp"
#include "primcache/cache/lookup_result.hpp"

namespace primcache {

template <typename Key, typename Value, typename Hash = std::hash<Key>,
          typename Eq = std::equal_to<Key>>
class concurrent_cache {
  static_assert(std::is_copy_constructible_v<Key>, "keys are copied into the cache");
  static_assert(std::is_copy_constructible_v<Value>,
                "values are copied out to every caller (use a shared_ptr for heavy values)");

 public:
  using key_type = Key;
  using value_type = Value;
  using options_type = cache_options<Key, Value>;

  // An LRU cache of `capacity` entries.
  explicit concurrent_cache(std::size_t capacity)
      : concurrent_cache(options_type{.capacity = capacity}) {}
  // Throws primcache::error (invalid_arguments) for a policy outside the enum.
  explicit concurrent_cache(options_type options = {}, Hash hash = Hash(), Eq eq = Eq())
      : options_(std::move(options)),
        hash_(std::move(hash)),
        eq_(std::move(eq)),
        unit_(options_.weigher ? cache_unit::bytes : cache_unit::entries),
        order_(cache_internal::make_eviction_order(options_.policy)),
        evicts_to_admit_(order_->evicts_to_admit()) {
    counters_.capacity.store(options_.capacity, std::memory_order_relaxed);
  }

  concurrent_cache(const concurrent_cache&) = delete;
  concurrent_cache& operator=(const concurrent_cache&) = delete;

  // Releases every entry without calling the eviction listener.
  ~concurrent_cache() {
    table_.drain([](entry_type* e) { cache_internal::release(e); });
  }

  // The cached value for `key`, or the value `creator()` makes (see above).
  template <typename Creator>
    requires std::invocable<Creator&> && std::convertible_to<std::invoke_result_t<Creator&>, Value>
  lookup_result<Value> get_or_add(const Key& key, Creator&& creator) {
    const std::uint64_t hash = static_cast<std::uint64_t>(hash_(key));
    cache_internal::reader_slot& slot = lock_.slot_for_this_thread();
    {
      cache_internal::shared_section section(lock_, slot);
      if (entry_type* e = table_.find_concurrent(hash, key, eq_)) {
        if (e->ready.load(std::memory_order_acquire)) {
          e->touch();
          section.count_hit();
          return {*e->value, lookup_outcome::hit};
        }
        // In flight: waiting is the locked path's business (add()).
      }
    }
    return add(key, hash, slot, creator);
  }

  // The cached value for `key` when it is ready, else nothing: the hit path
  // of get_or_add alone (a hit counts as one; an absent or in-flight entry
  // counts nothing and is not waited for). Rarely, a table growth running
  // at the same time hides a present entry: the answer is then nothing.
  // For callers that serve a miss themselves when would_admit() says the
  // cache would not keep their value. (The same lines as get_or_add's hit
  // path, on purpose: sharing them through a helper that returns
  // std::optional<Value> made BM_CacheHit 15.7 -> 25 ns.)
  std::optional<Value> get_if_ready(const Key& key) {
    const std::uint64_t hash = static_cast<std::uint64_t>(hash_(key));
    cache_internal::reader_slot& slot = lock_.slot_for_this_thread();
    cache_internal::shared_section section(lock_, slot);
    if (entry_type* e = table_.find_concurrent(hash, key, eq_)) {
      if (e->ready.load(std::memory_order_acquire)) {
        e->touch();
        section.count_hit();
        return *e->value;
      }
    }
    return std::nullopt;
  }

  // Whether a new entry of `weight` (1 when capacity counts entries; at
  // least 1 when it is a weight) would be kept if its creation finished
  // now: false at capacity 0, when it is heavier than the capacity, or when
  // a policy that never evicts to admit (no_evict) has no room left for it.
  // A hint without a lock: the cache may change before the caller acts on
  // it.
  bool would_admit(std::size_t weight) const noexcept {
    const std::size_t cap = capacity();
    if (cap == 0) return false;
    // Every kept entry counts at least 1 (see create()).
    weight = unit_ == cache_unit::entries ? 1 : std::max<std::size_t>(weight, 1);
    if (weight > cap) return false;
    if (evicts_to_admit_) return true;
    return (unit_ == cache_unit::entries ? size() : this->weight()) <= cap - weight;
  }

  // Counts a miss that the caller served outside the cache because
  // would_admit() said it would not be kept: a miss and a refusal, as if
  // get_or_add had run the creator and refused its value.
  void count_refused_miss() noexcept {
    bump(counters_.misses);
    bump(counters_.refusals);
  }

  // Removes `key`'s entry (ready or in flight); false when there was none.
  // The listener hears eviction_reason::erased.
  bool erase(const Key& key) PRIMCACHE_EXCLUDES(lock_) {
    const std::uint64_t hash = static_cast<std::uint64_t>(hash_(key));
    const flush_deferred_on_exit flush{*this};
    graveyard_type dead(options_.on_evict, lock_);
    lock_guard<cache_internal::read_mostly_lock> guard(lock_);
    entry_type* e = table_.find(hash, key, eq_);
    if (e == nullptr) return false;
    table_.remove(e);
    retire(e, eviction_reason::erased, /*notify=*/true, dead);
    return true;
  }

  // Removes every entry, ready or in flight. The listener hears
  // eviction_reason::cleared.
  void clear() PRIMCACHE_EXCLUDES(lock_) {
    const flush_deferred_on_exit flush{*this};
    graveyard_type dead(options_.on_evict, lock_);
    lock_guard<cache_internal::read_mostly_lock> guard(lock_);
    remove_all(dead);
  }

  // clear() and set_capacity(capacity) as one step, under one hold of the
  // exclusive lock, so that no entry can be added between the two: every
  // entry is removed, ready or in flight (the listener hears
  // eviction_reason::cleared; an in-flight entry's creator and waiters
  // still get its value, which is not kept), and the new capacity holds for
  // every insertion after it. With capacity 0, size() is 0 when it returns
  // and stays 0 until the capacity changes again.
  void clear_and_set_capacity(std::size_t capacity) PRIMCACHE_EXCLUDES(lock_) {
    const flush_deferred_on_exit flush{*this};
    graveyard_type dead(options_.on_evict, lock_);
    lock_guard<cache_internal::read_mostly_lock> guard(lock_);
    counters_.capacity.store(capacity, std::memory_order_relaxed);
    remove_all(dead);
  }

  // Whether `key` has an entry, ready or in flight. Does not count as a use.
  // Takes the exclusive lock (an exact answer, not a hot path).
  bool contains(const Key& key) const PRIMCACHE_EXCLUDES(lock_) {
    const std::uint64_t hash = static_cast<std::uint64_t>(hash_(key));
    lock_guard<cache_internal::read_mostly_lock> guard(lock_);
    return table_.find(hash, key, eq_) != nullptr;
  }

  // Sets the capacity (in unit()) and evicts any excess before returning.
  void set_capacity(std::size_t capacity) PRIMCACHE_EXCLUDES(lock_) {
    const flush_deferred_on_exit flush{*this};
    graveyard_type dead(options_.on_evict, lock_);
    lock_guard<cache_internal::read_mostly_lock> guard(lock_);
    counters_.capacity.store(capacity, std::memory_order_relaxed);
    make_room(0, dead);
  }

  // Relaxed reads of values written under the lock; see occupancy() for a
  // consistent triple.
  std::size_t size() const noexcept { return counters_.size.load(std::memory_order_relaxed); }
  std::size_t weight() const noexcept { return counters_.weight.load(std::memory_order_relaxed); }
  // Whether entries are weighed (options.weigher); without a weigher each
  // entry weighs 1 and weight() is the entry count.
  bool weighed() const noexcept { return static_cast<bool>(options_.weigher); }
  std::size_t capacity() const noexcept {
    return counters_.capacity.load(std::memory_order_relaxed);
  }

  cache_occupancy occupancy() const PRIMCACHE_EXCLUDES(lock_) {
    lock_guard<cache_internal::read_mostly_lock> guard(lock_);
    return {size(), weight(), capacity()};
  }

  cache_unit unit() const noexcept { return unit_; }
  cache_policy policy() const noexcept { return options_.policy; }

  cache_stats stats() const noexcept {
    cache_stats s;
    s.hits = lock_.hits();
    s.waits = lock_.waits();
    s.misses = counters_.misses.load(std::memory_order_relaxed);
    s.evictions = counters_.evictions.load(std::memory_order_relaxed);
    s.refusals = counters_.refusals.load(std::memory_order_relaxed);
    s.failures = counters_.failures.load(std::memory_order_relaxed);
    s.creation_time =
        std::chrono::nanoseconds(counters_.creation_ns.load(std::memory_order_relaxed));
    return s;
  }

 private:
  using entry_type = cache_internal::entry<Key, Value>;
  using graveyard_type = cache_internal::graveyard<Key, Value>;
  using clock = std::chrono::steady_clock;

  // Drops the creating caller's reference when creation is over, or a
  // waiter's once it has copied the value out, on every path; outside the
  // lock, as all releases are.
  struct entry_reference {
    entry_type* e;
    ~entry_reference() { cache_internal::release(e); }
  };

  // Evictions made room for new entries release their entries in batches
  // (one grace period per batch, see internal/entry.hpp) when capacity
  // counts entries; a cache whose capacity is a weight releases each at once,
  // so that evicted weight never lingers.
  cache_internal::deferred_releases<Key, Value>* deferral() noexcept {
    return unit_ == cache_unit::entries ? &deferred_ : nullptr;
  }

  // erase, clear and set_capacity also release the batch waiting so far.
  struct flush_deferred_on_exit {
    concurrent_cache& c;
    ~flush_deferred_on_exit() { c.deferred_.flush(c.lock_); }
  };

  static void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by = 1) noexcept {
    counter.fetch_add(by, std::memory_order_relaxed);
  }

  // Waits for another caller's creation of `e`, then copies the value out
  // on this thread, outside any lock: a copy that throws reaches this
  // caller alone, as on a hit. Takes over the reference to `e` that add()
  // took for this waiter, which keeps `value` alive even if the entry has
  // left the cache.
  lookup_result<Value> wait_for(const std::shared_future<void>& pending, entry_type* e,
                                cache_internal::reader_slot& slot) {
    const entry_reference ours{e};
    slot.waits.fetch_add(1, std::memory_order_relaxed);
    pending.get();  // rethrows the creation's exception
    return {*e->value, lookup_outcome::waited};
  }

  // The miss path: a second look under the exclusive lock, then either wait,
  // refuse, or insert an in-flight entry and run the creator.
  template <typename Creator>
  lookup_result<Value> add(const Key& key, std::uint64_t hash, cache_internal::reader_slot& slot,
                           Creator& creator) PRIMCACHE_EXCLUDES(lock_) {
    if (capacity() == 0) return create_uncached(creator);
    // Allocated before the lock, so that the key's copy and the allocation
    // stay out of the critical section; freed after it when unused.
    auto fresh = std::make_unique<entry_type>(key, hash);
    fresh->creator_thread = std::this_thread::get_id();
    fresh->fork_generation = cache_internal::fork_generation();
    std::shared_future<void> pending;
    entry_type* awaited = nullptr;
    bool refused = false;
    {
      graveyard_type dead(options_.on_evict, lock_, deferral());
      lock_guard<cache_internal::read_mostly_lock> guard(lock_);
      entry_type* e = table_.find(hash, key, eq_);
      if (e != nullptr && !e->ready.load(std::memory_order_relaxed) &&
          cache_internal::orphaned_by_fork(e->fork_generation, e->creator_thread)) {
        // In a fork child: the creation was started by a thread of the
        // parent that this process does not have, and will never finish
        // (nor release its references: the entry is left to leak).
        // Replaced, unannounced, by this call's own.
        table_.remove(e);
        retire(e, eviction_reason::cleared, /*notify=*/false, dead);
        e = nullptr;
      }
      if (e != nullptr) {
        if (e->ready.load(std::memory_order_relaxed)) {
          // A hit that the lock-free lookup missed (a table growth hid the
          // entry, or its creation finished in between): Value's copy runs
          // under the exclusive lock here.
          e->touch();
          cache_internal::read_mostly_lock::count_hit(slot);
          return {*e->value, lookup_outcome::hit};
        }
        // This thread is running the entry's creator (get_or_add of the
        // key from inside its own creator, directly or through other
        // keys): waiting would never end.
        if (e->creator_thread == fresh->creator_thread) {
          throw error(status::invalid_arguments,
                      "concurrent_cache: a creator asked the cache for its own key, whose "
                      "creation it is running on this thread; waiting would never end");
        }
        // The first waiter makes the promise, so that a creation nobody
        // waits for costs no shared state. The creator takes it, under this
        // lock, when it finishes; no waiter can attach after that. Each
        // waiter holds a reference to the entry, to copy its value out.
        if (!e->future.valid()) {
          e->promise.emplace();
          e->future = e->promise->get_future().share();
        }
        pending = e->future;
        e->refs.fetch_add(1, std::memory_order_relaxed);
        awaited = e;
      } else if (!admits_new_entry()) {
        refused = true;
      } else {
        table_.reserve_one_more();  // may throw; nothing has changed yet
        if (unit_ == cache_unit::entries) make_room(1, dead);
        fresh->refs.store(2, std::memory_order_relaxed);  // the table's and ours
        fresh->linked = true;
        table_.insert(fresh.get());
        order_->insert(*fresh);
        counters_.size.store(size() + 1, std::memory_order_relaxed);
      }
    }
    if (awaited != nullptr) return wait_for(pending, awaited, slot);
    if (refused) return create_uncached(creator);
    return create(fresh.release(), creator);
  }

  template <typename Creator>
  lookup_result<Value> create(entry_type* e, Creator& creator) PRIMCACHE_EXCLUDES(lock_) {
    const entry_reference ours{e};
    bump(counters_.misses);
    std::optional<Value> made;
    bool failed = false;
    std::size_t weight = 1;
    std::uint64_t cost_ns = 0;
    const clock::time_point start = clock::now();
    try {
      try {
        made.emplace(std::invoke(creator));
      } catch (...) {
        cost_ns = elapsed_ns(start);
        throw;
      }
      cost_ns = elapsed_ns(start);
      failed = options_.is_failure && options_.is_failure(*made);
      if (!failed) {
        // A weigher's 0 counts as 1, so that capacity bounds the number of
        // entries too (and capacity 0 keeps nothing).
        if (options_.weigher) weight = std::max<std::size_t>(options_.weigher(e->key, *made), 1);
        // Not yet visible: readers look at `value` only once `ready` is set
        // (release, under the exclusive lock), after this write; waiters
        // once the promise is fulfilled, after it too.
        e->value.emplace(*made);
      }
    } catch (...) {
      bump(counters_.failures);
      if (auto waiters = finish_failed(e)) waiters->set_exception(std::current_exception());
      throw;
    }
    std::optional<std::promise<void>> waiters;
    if (failed) {
      bump(counters_.failures);
      waiters = finish_failed(e);
      if (waiters) {
        // The waiters get the failure value too: one copy that they copy
        // out, written now that the entry is out of the table. If it
        // throws, they get that exception; the caller still gets its value.
        try {
          e->value.emplace(*made);
        } catch (...) {
          waiters->set_exception(std::current_exception());
          waiters.reset();
        }
      }
    } else {
      waiters = finish_ready(e, weight, cost_ns);
    }
    // Nothing is copied here: each waiter copies `value` out on its own
    // thread (wait_for), so a throwing copy cannot break the promise or
    // reach anyone but the caller whose copy it was.
    if (waiters) waiters->set_value();
    return {std::move(*made), lookup_outcome::miss};
  }

  // Capacity 0 or a refusal: run the creator, keep nothing.
  template <typename Creator>
  lookup_result<Value> create_uncached(Creator& creator) {
    bump(counters_.misses);
    bump(counters_.refusals);
    const clock::time_point start = clock::now();
    try {
      Value made(std::invoke(creator));
      elapsed_ns(start);
      if (options_.is_failure && options_.is_failure(made)) bump(counters_.failures);
      return {std::move(made), lookup_outcome::miss};
    } catch (...) {
      elapsed_ns(start);
      bump(counters_.failures);
      throw;
    }
  }

  // Adds the time since `start` to the creation-time counter; returns it.
  std::uint64_t elapsed_ns(clock::time_point start) noexcept {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - start);
    const auto count = static_cast<std::uint64_t>(ns.count());
    bump(counters_.creation_ns, count);
    return count;
  }

  // Removes a failed creation's entry if it is still linked. Returns the
  // waiters' promise, if any waited, for the caller to fulfil after the lock.
  std::optional<std::promise<void>> finish_failed(entry_type* e) PRIMCACHE_EXCLUDES(lock_) {
    graveyard_type dead(options_.on_evict, lock_, deferral());
    lock_guard<cache_internal::read_mostly_lock> guard(lock_);
    auto waiters = std::exchange(e->promise, std::nullopt);
    if (e->linked) {
      table_.remove(e);
      retire(e, eviction_reason::capacity, /*notify=*/false, dead);
    }
    return waiters;
  }

  // Makes a created entry ready (if it is still linked) and makes room for
  // its weight. Returns the waiters' promise, as finish_failed does.
  std::optional<std::promise<void>> finish_ready(entry_type* e, std::size_t weight,
                                                 std::uint64_t cost_ns) PRIMCACHE_EXCLUDES(lock_) {
    std::shared_future<void> drop;  // released after the lock
    graveyard_type dead(options_.on_evict, lock_, deferral());
    lock_guard<cache_internal::read_mostly_lock> guard(lock_);
    auto waiters = std::exchange(e->promise, std::nullopt);
    if (!e->linked) return waiters;  // evicted, erased or cleared while in flight
    drop = std::move(e->future);
    e->ready.store(true, std::memory_order_release);
    e->cost_ns = cost_ns;
    if (unit_ == cache_unit::bytes) {
      const std::size_t cap = capacity();
      if (order_->evicts_to_admit() ? weight > cap : this->weight() + weight > cap) {
        table_.remove(e);
        if (order_->evicts_to_admit()) {
          retire(e, eviction_reason::capacity, /*notify=*/true, dead);
          bump(counters_.evictions);
        } else {
          retire(e, eviction_reason::capacity, /*notify=*/false, dead);
          bump(counters_.refusals);
        }
        return waiters;
      }
    }
    e->weight = weight;
    counters_.weight.store(this->weight() + weight, std::memory_order_relaxed);
    // Out of the order while making room, so it is not its own victim; back
    // in as the newest entry.
    order_->remove(*e);
    make_room(0, dead);
    order_->insert(*e);
    return waiters;
  }

  bool admits_new_entry() const PRIMCACHE_REQUIRES(lock_) {
    const std::size_t cap = capacity();
    if (cap == 0) return false;
    if (order_->evicts_to_admit()) return true;
    return unit_ == cache_unit::entries ? size() < cap : weight() < cap;
  }

  // Evicts in policy order until `incoming` more entries fit (entries) or the
  // weight fits (bytes). In a bytes cache, entries in flight weigh 0 and are
  // never victims: evicting them would free nothing. They stay, and when
  // their creations finish, finish_ready makes room for their weights.
  void make_room(std::size_t incoming, graveyard_type& dead) PRIMCACHE_REQUIRES(lock_) {
    const std::size_t cap = capacity();
    const bool weighed = unit_ == cache_unit::bytes;
    while (weighed ? weight() > cap : size() + incoming > cap) {
      cache_internal::entry_hook* victim = order_->victim(weighed);
      if (victim == nullptr) break;
      entry_type* e = static_cast<entry_type*>(victim);
      table_.remove(e);
      retire(e, eviction_reason::capacity, /*notify=*/true, dead);
      bump(counters_.evictions);
    }
  }

  // Unlinks every entry, ready or in flight, as cleared.
  void remove_all(graveyard_type& dead) PRIMCACHE_REQUIRES(lock_) {
    table_.drain([&](entry_type* e) PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
      retire(e, eviction_reason::cleared, /*notify=*/true, dead);
    });
  }

  // Everything but the table unlink: out of the order, out of the counts,
  // the removal recorded, the table's reference handed to `dead`.
  void retire(entry_type* e, eviction_reason reason, bool notify, graveyard_type& dead)
      PRIMCACHE_REQUIRES(lock_) {
    order_->remove(*e);
    counters_.size.store(size() - 1, std::memory_order_relaxed);
    counters_.weight.store(weight() - e->weight, std::memory_order_relaxed);
    e->linked = false;
    e->ready_at_removal = e->ready.load(std::memory_order_relaxed);
    e->notify = notify;
    e->removal_reason = reason;
    dead.bury(e);
  }

  const options_type options_;
  [[no_unique_address]] const Hash hash_;
  [[no_unique_address]] const Eq eq_;
  const cache_unit unit_;
  mutable cache_internal::read_mostly_lock lock_;
  // Declared after lock_ and before table_: destroyed after the table drains.
  cache_internal::deferred_releases<Key, Value> deferred_;
  cache_internal::entry_table<entry_type> table_ PRIMCACHE_GUARDED_BY(lock_);
  const std::unique_ptr<cache_internal::eviction_order> order_ PRIMCACHE_PT_GUARDED_BY(lock_);
  // order_->evicts_to_admit(), fixed by the policy: would_admit reads it
  // without the lock.
  const bool evicts_to_admit_;

  // Written on miss paths only (size, weight and capacity under the
  // exclusive lock); a line of its own so that misses do not invalidate what
  // hits read.
  struct alignas(128) write_side_counters {
    std::atomic<std::size_t> size{0};
    std::atomic<std::size_t> weight{0};
    std::atomic<std::size_t> capacity{0};
    std::atomic<std::uint64_t> misses{0};
    std::atomic<std::uint64_t> evictions{0};
    std::atomic<std::uint64_t> refusals{0};
    std::atomic<std::uint64_t> failures{0};
    std::atomic<std::uint64_t> creation_ns{0};
  };
  write_side_counters counters_;
};

}  // namespace primcache
