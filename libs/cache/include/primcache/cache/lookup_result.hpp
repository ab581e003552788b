// primcache/cache/lookup_result.hpp — what concurrent_cache::get_or_add returns.
//
// A lookup yields the value and how it was obtained: found ready in the cache
// (hit), made by this caller's creator (miss), or made by another caller's
// creator that this caller waited for (waited).
//
//   auto r = cache.get_or_add(k, [&] { return make_impl(k); });
//   if (r.outcome == primcache::lookup_outcome::miss) log_creation(k);
//   use(r.value);
//
// Thread-safety: plain values. Exceptions: to_string never throws.
#pragma once

#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache {

enum class lookup_outcome : unsigned char {
  hit,     // the value was in the cache, ready
  miss,    // this caller ran the creator (whether or not the cache kept the value)
  waited,  // another caller was creating the value; this caller waited for it
};

// "hit", "miss", "waited"; "unknown" for values outside the enum.
PRIMCACHE_API std::string_view to_string(lookup_outcome outcome) noexcept;

template <typename Value>
struct lookup_result {
  Value value;
  lookup_outcome outcome;
};

}  // namespace primcache
