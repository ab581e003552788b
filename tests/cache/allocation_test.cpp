// What the cache allocates: nothing on a hit; on a miss, allocations that
// fail leave the cache as it was.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "primcache/cache/concurrent_cache.hpp"
#include "primcache/keyhash/key.hpp"
#include "support/allocation_counter.hpp"

using primcache::lookup_outcome;

namespace {

// A 64-byte key, as the benchmark uses.
primcache::key make_key(std::uint64_t i) {
  primcache::key_writer w;
  for (std::uint64_t word = 0; word < 8; ++word) w.u64(i * 8 + word);
  return w.finish();
}

}  // namespace

TEST_CASE("a hit allocates nothing", "[cache][allocation]") {
  constexpr std::size_t kResident = 1000;
  constexpr std::size_t kHits = 1'000'000;
  primcache::concurrent_cache<primcache::key, std::shared_ptr<const int>> cache(kResident);
  std::vector<primcache::key> keys;
  for (std::size_t i = 0; i < kResident; ++i) keys.push_back(make_key(i));
  for (std::size_t i = 0; i < kResident; ++i) {
    cache.get_or_add(keys[i], [i] { return std::make_shared<const int>(static_cast<int>(i)); });
  }

  std::size_t allocations = 0;
  std::size_t hits = 0;
  std::size_t wrong = 0;
  {
    primcache_test::allocation_scope scope;
    for (std::size_t i = 0; i < kHits; ++i) {
      const std::size_t k = (i * 7) % kResident;
      auto r = cache.get_or_add(keys[k], [] { return std::make_shared<const int>(-1); });
      hits += r.outcome == lookup_outcome::hit ? 1 : 0;
      wrong += *r.value == static_cast<int>(k) ? 0 : 1;
    }
    allocations = scope.count();
  }
  REQUIRE(allocations == 0);
  REQUIRE(hits == kHits);
  REQUIRE(wrong == 0);
  CHECK(cache.stats().hits == kHits);
}

TEST_CASE("an allocation failing on the miss path leaves the cache as it was",
          "[cache][allocation]") {
  using cache_type = primcache::concurrent_cache<int, std::string>;
  std::vector<int> evicted;
  evicted.reserve(64);  // the listener must not allocate inside the scopes below
  std::size_t failures_injected = 0;
  // Fail the n-th allocation of one miss, for every n until a miss completes.
  for (std::size_t n = 0;; ++n) {
    INFO("failing allocation " << n);
    evicted.clear();
    cache_type cache(cache_type::options_type{
        .capacity = 2,
        .on_evict = [&](const int& k, const std::string*, primcache::eviction_reason) {
          evicted.push_back(k);
        }});
    cache.get_or_add(1, [] { return std::string("one"); });
    cache.get_or_add(2, [] { return std::string("two"); });

    bool threw = false;
    bool injected = false;
    lookup_outcome outcome = lookup_outcome::hit;
    {
      primcache_test::allocation_scope scope;
      scope.fail_after(n);
      try {
        outcome = cache.get_or_add(3, [] { return std::string("three"); }).outcome;
      } catch (const std::bad_alloc&) {
        threw = true;
      }
      injected = scope.failed();
    }
    if (!injected) {
      CHECK_FALSE(threw);
      CHECK(outcome == lookup_outcome::miss);
      CHECK(cache.contains(3));
      CHECK(cache.size() == 2);
      CHECK(evicted.size() == 1);
      break;
    }
    ++failures_injected;
    CHECK(threw);
    CHECK_FALSE(cache.contains(3));
    CHECK(cache.size() == 2);
    CHECK(cache.contains(1));
    CHECK(cache.contains(2));
    CHECK(evicted.empty());
    CHECK(cache.stats().misses == 2);  // the creator never ran
    // And the cache still works.
    CHECK(cache.get_or_add(3, [] { return std::string("three"); }).outcome == lookup_outcome::miss);
    CHECK(cache.get_or_add(3, [] { return std::string("three"); }).value == "three");
    REQUIRE(n < 16);
  }
  // This miss allocates the entry, then grows the table (a third entry in
  // two buckets): room in its list of retired bucket arrays, the doubled
  // array and its heads. One thread, so no waiter's promise is ever made.
  CHECK(failures_injected >= 2);
}
