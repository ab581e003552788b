// primcache/cache/cache_policy.hpp — which entry a full cache gives up.
//
//   lru       the default. Recency is kept by CLOCK (second chance): a hit
//             sets the entry's reference bit, which costs the hit path one
//             relaxed load (and a store the first time); eviction sweeps a
//             ring, clearing set bits and evicting the first entry whose bit
//             is clear. An entry touched since the sweep last passed it is
//             never evicted while an untouched entry remains. Eviction is
//             amortized O(1): each sweep step clears a bit some hit set.
//   no_evict  a full cache refuses new entries: the caller still runs its
//             creator and gets its value, which the cache does not keep (a
//             refusal). Shrinking the capacity still evicts, oldest first.
//   cost      keeps the entries that cost most to create per unit of weight
//             (the creator's time over the entry's weight, or its time alone
//             without a weigher): to make room it evicts the entry with the
//             lowest time per unit, the oldest of equals. A new entry is
//             always admitted (its cost is known only once it is created);
//             an entry in flight is given up last. Recency plays no part,
//             so the hit path costs the same as under lru.
//
// When the capacity is a weight, no policy evicts an entry in flight to
// make room: it weighs nothing until its value exists, so evicting it would
// free nothing and throw its creation's value away.
//
// The policy is chosen at construction and only ever consulted with the
// cache's exclusive lock held; the lookup path never calls it, so further
// policies (SIEVE, S3-FIFO) fit behind the same seam.
//
//   primcache::cache_options<K, V> o;
//   o.policy = primcache::cache_policy::no_evict;
//
// Thread-safety: plain values. Exceptions: to_string never throws.
#pragma once

#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache {

enum class cache_policy : unsigned char { lru, no_evict, cost };

// "lru", "no_evict", "cost"; "unknown" for values outside the enum.
PRIMCACHE_API std::string_view to_string(cache_policy policy) noexcept;

}  // namespace primcache
