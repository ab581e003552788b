// primcache/autotune/search.hpp — which candidates a tuning measures.
//
// A search strategy picks, from the candidates 1 .. count-1 (candidate 0,
// the default, is always measured, first), at most `budget` to measure, in
// order. It asks `keep(i)` about each candidate it considers: keep runs the
// tuning's pruning hook (a cheap model or heuristic that drops
// configurations before they are built) and records the ones it drops, so a
// strategy never measures a pruned candidate and the report lists them.
//
//   primcache::tune_options o;
//   o.search = primcache::spread_search();                 // evenly over a large space
//   o.prune = [&](std::size_t i) { return too_big(i); };   // true: drop i unmeasured
//
// Thread-safety: the strategies made here are stateless and may be shared
// between threads. Exceptions: none but std::bad_alloc.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "primcache/base/export.hpp"

namespace primcache {

// true: measure candidate i; false: it was pruned.
using search_keep = std::function<bool(std::size_t index)>;
using search_strategy = std::function<std::vector<std::size_t>(
    std::size_t count, std::size_t budget, const search_keep& keep)>;
// true: drop candidate i before measuring it.
using prune_hook = std::function<bool(std::size_t index)>;

// 1, 2, 3, ... in order, skipping pruned ones, until `budget` are chosen or
// the candidates run out (the default: candidate lists are ordered best
// guess first by their makers).
PRIMCACHE_API search_strategy exhaustive_search();
// 1 .. count-1 cut into `budget` equal segments, and from each its first
// candidate not pruned (candidate 1 first). For spaces far larger than the
// budget, whose first `budget` candidates would be near-copies of one
// another.
PRIMCACHE_API search_strategy spread_search();

}  // namespace primcache
