// primcache/const_cache/constant_tensor_cache.hpp — one constant tensor
// cache: the prepacked weights (and other constant tensors) of one engine
// kind on one device, shared by every backend, with a capacity in MB.
//
//   primcache::constant_tensor_cache& cache = primcache::constant_caches().device("cpu");
//   primcache::constant_key key(kMyBackendId, packing_bytes);   // built once
//   auto r = cache.get_or_add(key, bytes, [&] {
//     auto buf = primcache::make_constant_buffer(bytes, my_alloc, my_free);
//     pack(weights, buf->data());
//     return buf;
//   });
//   use(r.value->data());        // r.outcome: hit, miss or waited
//
// get_or_add(key, size, creator): a hit returns the cached buffer. On a miss
// with room, an in-flight entry goes in and this caller runs `creator` (no
// lock held) while other callers of the same key wait for it and receive
// the same buffer. A creator fails by throwing, or by returning a null
// buffer or one whose size() is not `size` (error(invalid_arguments)); the
// failure reaches this caller and every waiter and leaves nothing behind.
// When the cache is full, policy no_evict keeps what it has: the caller still
// runs its creator and gets its buffer, which the cache does not keep (a
// refusal, counted). Policy lru evicts the least recently used tensors to
// make room; policy cost the cheapest to recompute per byte. A value is
// judged when its creation ends: an entry weighs 0 bytes while in flight.
// The tensor cache is a primcache::concurrent_cache underneath
// (docs/cache.md), weighed in bytes.
//
// Buffers are shared: one handed out stays valid for its holder even after
// it is evicted, erased or flushed. on_eviction() tells subscribers that the
// cache let a tensor go.
//
// Capacity, in MB (2^20 bytes), default unlimited (`unlimited`), follows the
// constant-tensor-cache capacity RFC: the first explicit setting and any
// decrease flush the cache; an increase keeps its contents; 0 flushes and
// disables it (every call runs its creator and keeps nothing). A change of
// policy flushes too. preview_capacity() says what a setting would drop.
//
// Thread-safety: every member may be called from any thread at once, except
// the destructor, which must not race with anything. get_size(), capacity()
// and the hit path take no lock and never wait for a creation in flight.
// Capacity changes and flushes are serialized among themselves. Eviction
// callbacks run with no lock of the cache held (nor one per subscription),
// on the thread that caused the eviction — for a capacity change or a
// flush, once the change is made, before the call returns. A callback may
// look up, add, remove, flush, preview, read the counters and settings,
// subscribe and unsubscribe (its own subscription too); it must not change
// this cache's capacity or policy (see docs/const_cache.md, Notifications).
// Exceptions: get_or_add rethrows what the creator throws (to every waiter);
// set_capacity throws error(invalid_arguments) for a capacity whose bytes do
// not fit in std::size_t; std::bad_alloc may pass through.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/cache/cache_options.hpp"
#include "primcache/cache/cache_policy.hpp"
#include "primcache/cache/cache_stats.hpp"
#include "primcache/cache/concurrent_cache.hpp"
#include "primcache/cache/lookup_result.hpp"
#include "primcache/const_cache/constant_buffer.hpp"
#include "primcache/const_cache/constant_key.hpp"
#include "primcache/const_cache/eviction_subscription.hpp"
#include "primcache/control/capacity_unit.hpp"

namespace primcache {

namespace const_cache_internal {
class fork_handlers;
class listener_list;
}  // namespace const_cache_internal

// What a capacity setting would do to a cache's current contents.
struct capacity_change_effect {
  bool flushes = false;     // the setting empties the cache
  std::size_t tensors = 0;  // entries it would drop (in-flight ones included)
  std::uint64_t bytes = 0;  // bytes of created tensors it would drop
};

class PRIMCACHE_API constant_tensor_cache {
 public:
  using buffer_ptr = std::shared_ptr<const constant_buffer>;
  // (key, the buffer or nullptr when it left while still being created,
  // why). Must not throw (a throw terminates the process).
  using eviction_callback =
      std::function<void(const constant_key&, const constant_buffer*, eviction_reason)>;

  // The capacity of a cache with no limit (control's unlimited_capacity).
  static constexpr std::uint64_t unlimited = unlimited_capacity;
  // The largest limited capacity: its bytes must fit in std::size_t.
  static constexpr std::uint64_t max_megabytes = static_cast<std::uint64_t>(SIZE_MAX) >> 20;

  // An empty cache named after its device ("cpu", "gpu.0"): unlimited,
  // no_evict, capacity not yet set.
  explicit constant_tensor_cache(std::string device);
  ~constant_tensor_cache();
  constant_tensor_cache(const constant_tensor_cache&) = delete;
  constant_tensor_cache& operator=(const constant_tensor_cache&) = delete;

  const std::string& device() const noexcept { return device_; }

  // The tensor for `key` (see above). `creator()` returns something
  // convertible to std::shared_ptr<const constant_buffer> holding `size`
  // bytes.
  template <typename Creator>
    requires std::invocable<Creator&> &&
             std::convertible_to<std::invoke_result_t<Creator&>, buffer_ptr>
  lookup_result<buffer_ptr> get_or_add(const constant_key& key, std::size_t size,
                                       Creator&& creator) {
    // Acquire: pairs with the release store of a policy change, which
    // publishes a freshly built backing cache. Every backing cache lives as
    // long as this object, so a caller holding a replaced one is safe (it
    // was set to capacity 0: the caller's creator runs, nothing is kept).
    backing_cache* c = active_.load(std::memory_order_acquire);
    return c->get_or_add(key, [&]() -> buffer_ptr {
      buffer_ptr made(std::invoke(creator));
      check_created(key, size, made.get());
      return made;
    });
  }
  // The same with a key built for this call (it copies and hashes the
  // bytes; keep a constant_key where lookups are hot).
  template <typename Creator>
    requires std::invocable<Creator&> &&
             std::convertible_to<std::invoke_result_t<Creator&>, buffer_ptr>
  lookup_result<buffer_ptr> get_or_add(std::uint64_t backend_id, std::string_view key_bytes,
                                       std::size_t size, Creator&& creator) {
    return get_or_add(constant_key(backend_id, key_bytes), size, creator);
  }

  // For callers that have a way to do without a constant tensor (compute
  // what they need per call instead): would_keep(bytes) says whether a new
  // tensor of that size would be kept now (false when disabled, full under
  // no_evict, or larger than the capacity; a lock-free hint). When it says
  // no, find() still returns a tensor the cache kept before (a hit, or
  // nullptr: absent or in flight, never waited for), and
  // count_refused_miss() counts the miss the caller then serves itself, as
  // get_or_add would have (a miss and a refusal).
  //
  //   if (!cache.would_keep(bytes)) {
  //     if (auto kept = cache.find(key)) return kept;
  //     cache.count_refused_miss();
  //     return compute_without_a_constant_tensor();
  //   }
  //   return cache.get_or_add(key, bytes, creator).value;
  bool would_keep(std::size_t bytes) const noexcept;
  buffer_ptr find(const constant_key& key);
  void count_refused_miss() noexcept;

  // Removes the key's tensor (ready or in flight); false when absent. Its
  // holders keep it; subscribers hear eviction_reason::erased.
  bool remove_if_exist(const constant_key& key);
  bool remove_if_exist(std::uint64_t backend_id, std::string_view key_bytes);

  // Bytes of the created tensors the cache holds (in-flight ones weigh 0).
  // A few relaxed loads: never blocks, never waits for a creation.
  std::uint64_t get_size() const noexcept;
  // Tensors held, in-flight ones included.
  std::size_t tensor_count() const noexcept;

  // Sets the capacity in MB (`unlimited` for none), keeping the policy, or
  // the capacity and the policy, by the flush rules above.
  void set_capacity(std::uint64_t megabytes);
  void set_capacity(std::uint64_t megabytes, cache_policy policy);
  // What set_capacity would drop now (the cache may change meanwhile).
  capacity_change_effect preview_capacity(std::uint64_t megabytes) const;
  capacity_change_effect preview_capacity(std::uint64_t megabytes, cache_policy policy) const;
  std::uint64_t capacity() const noexcept { return capacity_mb_.load(std::memory_order_relaxed); }
  cache_policy policy() const noexcept { return policy_.load(std::memory_order_relaxed); }
  // Whether set_capacity has been called (the first call flushes).
  bool capacity_set() const noexcept { return capacity_set_.load(std::memory_order_relaxed); }

  // Drops every tensor (subscribers hear eviction_reason::cleared, before it
  // returns); the capacity stays.
  void flush();

  // Counters since construction (concurrent_cache's): hits, misses (creator
  // runs), waits, evictions (for capacity), refusals (created but not kept:
  // full under no_evict, capacity 0), failures, creation_time (total time
  // creators took).
  cache_stats stats() const noexcept;

  // Calls `callback` for every tensor that leaves the cache (evicted,
  // removed or flushed) until the subscription is reset or destroyed.
  [[nodiscard]] eviction_subscription on_eviction(eviction_callback callback);

 private:
  friend class const_cache_internal::fork_handlers;  // holds config_ across fork()
  using backing_cache = concurrent_cache<constant_key, buffer_ptr>;

  static void check_created(const constant_key& key, std::size_t size, const constant_buffer* made);
  // Throws error(invalid_arguments) for a policy primcache::cache lacks.
  backing_cache& backing(cache_policy policy) const;
  void check_capacity(std::uint64_t megabytes) const;
  bool flushes(std::uint64_t megabytes, cache_policy policy) const PRIMCACHE_REQUIRES(config_);
  void set_capacity_locked(std::uint64_t megabytes, cache_policy policy)
      PRIMCACHE_REQUIRES(config_);
  capacity_change_effect preview_locked(std::uint64_t megabytes, cache_policy policy) const
      PRIMCACHE_REQUIRES(config_);

  const std::string device_;
  const std::shared_ptr<const_cache_internal::listener_list> listeners_;
  // Serializes capacity and policy changes and flushes. Never held while an
  // eviction callback runs: their notifications are delivered after it is
  // released (deferred_notifications, listener_list.hpp).
  mutable mutex config_;
  // The thread holding config_ in a capacity change or a flush, if any: a
  // fork made from under it (a callback heard under config_ for lack of
  // memory) neither waits for it nor releases it (src/fork_handlers.hpp).
  std::atomic<std::thread::id> config_holder_{};
  // One backing cache per policy primcache::cache offers, indexed by the
  // policy's value, all built at construction and kept until destruction;
  // all but the active one have capacity 0.
  std::vector<std::unique_ptr<backing_cache>> caches_;
  std::atomic<backing_cache*> active_{nullptr};
  // Written under config_; read anywhere.
  std::atomic<std::uint64_t> capacity_mb_{unlimited};
  std::atomic<cache_policy> policy_{cache_policy::no_evict};
  std::atomic<bool> capacity_set_{false};
};

}  // namespace primcache
