// to_string for the cache's enumerations.
#include "primcache/cache/cache_options.hpp"
#include "primcache/cache/cache_policy.hpp"
#include "primcache/cache/lookup_result.hpp"

namespace primcache {

std::string_view to_string(lookup_outcome outcome) noexcept {
  switch (outcome) {
    case lookup_outcome::hit: return "hit";
    case lookup_outcome::miss: return "miss";
    case lookup_outcome::waited: return "waited";
  }
  return "unknown";
}

std::string_view to_string(cache_policy policy) noexcept {
  switch (policy) {
    case cache_policy::lru: return "lru";
    case cache_policy::no_evict: return "no_evict";
    case cache_policy::cost: return "cost";
  }
  return "unknown";
}

std::string_view to_string(eviction_reason reason) noexcept {
  switch (reason) {
    case eviction_reason::capacity: return "capacity";
    case eviction_reason::erased: return "erased";
    case eviction_reason::cleared: return "cleared";
  }
  return "unknown";
}

std::string_view to_string(cache_unit unit) noexcept {
  switch (unit) {
    case cache_unit::entries: return "entries";
    case cache_unit::bytes: return "bytes";
  }
  return "unknown";
}

}  // namespace primcache
