// primcache/cache/internal/eviction_order.hpp — the policy seam: the order in
// which a cache's entries are given up.
//
// Private to the cache library (namespace primcache::cache_internal).
//
// Every entry embeds an entry_hook. The cache calls its eviction_order only
// with its exclusive lock held, so an order owns the hooks' links without
// synchronization of its own. The one field touched elsewhere is
// `referenced`, which hits set under the shared lock (relaxed: it is a hint,
// and the exclusive lock that the order runs under orders it with every
// hit). That is the whole interface between the lookup path and a policy:
// a new policy (cost-aware, SIEVE, S3-FIFO) is a new eviction_order and
// leaves the lookup path alone.
//
// Thread-safety: none of its own; see above. Exceptions: none.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "primcache/base/export.hpp"
#include "primcache/cache/cache_policy.hpp"

namespace primcache::cache_internal {

struct entry_hook {
  entry_hook* order_prev = nullptr;
  entry_hook* order_next = nullptr;
  // Set by hits (shared lock); read and cleared by the order (exclusive lock).
  std::atomic<bool> referenced{false};
  std::size_t weight = 0;     // 0 while in flight; at least 1 once created
  std::uint64_t cost_ns = 0;  // creation time, for cost-aware orders

  // The hit path's recency mark: a store only when the bit is clear, so
  // repeated hits on a hot entry only read its line.
  void touch() noexcept {
    if (!referenced.load(std::memory_order_relaxed)) {
      referenced.store(true, std::memory_order_relaxed);
    }
  }
};

class PRIMCACHE_API eviction_order {
 public:
  virtual ~eviction_order();

  // `e` becomes the newest entry (on insertion, and again when its value is
  // created). Precondition: `e` is not in the order.
  virtual void insert(entry_hook& e) noexcept = 0;
  // Precondition: `e` is in the order.
  virtual void remove(entry_hook& e) noexcept = 0;
  // The entry to evict next, left in the order (the caller removes it);
  // nullptr when there is none. May update recency state (CLOCK's hand).
  // With `weighed_only` (a cache whose capacity is a weight), entries of
  // weight 0 are never chosen: they are in flight, and evicting them would
  // free nothing while their creations' values were thrown away.
  virtual entry_hook* victim(bool weighed_only) noexcept = 0;
  // Whether admitting an entry into a full cache evicts another (lru) or is
  // refused (no_evict).
  virtual bool evicts_to_admit() const noexcept = 0;
};

PRIMCACHE_API std::unique_ptr<eviction_order> make_eviction_order(cache_policy policy);

}  // namespace primcache::cache_internal
