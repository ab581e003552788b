// Single-thread semantics of concurrent_cache: lookups, LRU order, capacity
// changes, weights, no_evict refusals, erase and clear, failures, a creator
// that asks for its own key, the eviction listener and the counters.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "primcache/base/error.hpp"
#include "primcache/cache/concurrent_cache.hpp"
#include "support/child_process.hpp"

using primcache::cache_policy;
using primcache::cache_unit;
using primcache::eviction_reason;
using primcache::lookup_outcome;

namespace {

using string_cache = primcache::concurrent_cache<int, std::string>;
using options = string_cache::options_type;

std::string value_of(int key) {
  return "v" + std::to_string(key);
}

// Records what the eviction listener hears.
struct eviction_log {
  struct event {
    int key;
    std::optional<std::string> value;
    eviction_reason reason;
  };
  std::vector<event> events;

  auto listener() {
    return [this](const int& key, const std::string* value, eviction_reason reason) {
      events.push_back({key, value ? std::optional(*value) : std::nullopt, reason});
    };
  }
  std::vector<int> keys() const {
    std::vector<int> out;
    for (const auto& e : events) out.push_back(e.key);
    return out;
  }
  std::vector<int> sorted_keys() const {
    auto out = keys();
    std::sort(out.begin(), out.end());
    return out;
  }
};

lookup_outcome add(string_cache& cache, int key) {
  return cache.get_or_add(key, [key] { return value_of(key); }).outcome;
}

lookup_outcome add(string_cache& cache, int key, std::string value) {
  return cache.get_or_add(key, [&] { return value; }).outcome;
}

std::size_t string_weight(const int&, const std::string& v) {
  return v.size();
}

}  // namespace

TEST_CASE("get_or_add runs the creator on a miss and returns the kept value on a hit",
          "[cache][lookup]") {
  string_cache cache(4);
  int runs = 0;
  auto make = [&] {
    ++runs;
    return std::string("one");
  };

  auto first = cache.get_or_add(1, make);
  CHECK(first.outcome == lookup_outcome::miss);
  CHECK(first.value == "one");

  auto second = cache.get_or_add(1, make);
  CHECK(second.outcome == lookup_outcome::hit);
  CHECK(second.value == "one");

  CHECK(runs == 1);
  CHECK(cache.size() == 1);
  CHECK(cache.weight() == 1);
  CHECK(cache.contains(1));
  CHECK_FALSE(cache.contains(2));
  CHECK(cache.capacity() == 4);
  CHECK(cache.unit() == cache_unit::entries);
  CHECK(cache.policy() == cache_policy::lru);

  auto s = cache.stats();
  CHECK(s.hits == 1);
  CHECK(s.misses == 1);
  CHECK(s.waits == 0);
  CHECK(s.evictions == 0);
  CHECK(s.refusals == 0);
  CHECK(s.failures == 0);
}

TEST_CASE("a creator's result converts to the value type", "[cache][lookup]") {
  string_cache cache(2);
  auto r = cache.get_or_add(1, [] { return "literal"; });
  CHECK(r.value == "literal");
  CHECK(cache.get_or_add(1, [] { return "other"; }).value == "literal");
}

TEST_CASE("the lru policy evicts untouched entries before a touched one", "[cache][lru]") {
  const int capacity = GENERATE(2, 3, 8, 100);
  eviction_log log;
  string_cache cache(
      options{.capacity = static_cast<std::size_t>(capacity), .on_evict = log.listener()});
  for (int k = 0; k < capacity; ++k) REQUIRE(add(cache, k) == lookup_outcome::miss);
  REQUIRE(add(cache, 0) == lookup_outcome::hit);  // touch the oldest

  REQUIRE(add(cache, capacity) == lookup_outcome::miss);
  CHECK(log.keys() == std::vector<int>{1});
  CHECK(log.events[0].value == value_of(1));
  CHECK(log.events[0].reason == eviction_reason::capacity);
  CHECK(cache.contains(0));
  CHECK(cache.size() == static_cast<std::size_t>(capacity));

  SECTION("and then in least-recently-used order, the touched entry last") {
    // 0 was touched before `capacity` arrived: it goes after 2..capacity-1.
    for (int k = capacity + 1; k < 2 * capacity - 1; ++k) add(cache, k);
    std::vector<int> expected;
    for (int k = 1; k < capacity; ++k) expected.push_back(k);
    CHECK(log.keys() == expected);
    CHECK(cache.contains(0));
    add(cache, 2 * capacity - 1);
    expected.push_back(0);
    CHECK(log.keys() == expected);
    CHECK(cache.stats().evictions == static_cast<std::uint64_t>(capacity));
  }
}

TEST_CASE("a capacity of one keeps the newest entry", "[cache][lru]") {
  eviction_log log;
  string_cache cache(options{.capacity = 1, .on_evict = log.listener()});
  add(cache, 1);
  add(cache, 1);
  add(cache, 2);
  CHECK(log.keys() == std::vector<int>{1});
  CHECK(cache.contains(2));
  CHECK(cache.size() == 1);
}

TEST_CASE("contains does not count as a use", "[cache][lru]") {
  eviction_log log;
  string_cache cache(options{.capacity = 2, .on_evict = log.listener()});
  add(cache, 1);
  add(cache, 2);
  CHECK(cache.contains(1));
  add(cache, 3);
  CHECK(log.keys() == std::vector<int>{1});
}

TEST_CASE("set_capacity evicts the excess at once in policy order", "[cache][capacity]") {
  eviction_log log;
  string_cache cache(options{.capacity = 8, .on_evict = log.listener()});
  for (int k = 0; k < 8; ++k) add(cache, k);
  add(cache, 2);
  add(cache, 5);

  SECTION("shrinking keeps the recently used") {
    cache.set_capacity(3);
    CHECK(cache.capacity() == 3);
    CHECK(cache.size() == 3);
    CHECK(log.keys() == std::vector<int>{0, 1, 3, 4, 6});
    CHECK(cache.contains(2));
    CHECK(cache.contains(5));
    CHECK(cache.contains(7));
    CHECK(cache.stats().evictions == 5);
  }
  SECTION("growing evicts nothing, and the room is used") {
    cache.set_capacity(12);
    CHECK(log.events.empty());
    for (int k = 8; k < 12; ++k) add(cache, k);
    CHECK(log.events.empty());
    CHECK(cache.size() == 12);
    add(cache, 12);
    CHECK(log.keys() == std::vector<int>{0});
  }
  SECTION("setting the same capacity changes nothing") {
    cache.set_capacity(8);
    CHECK(log.events.empty());
    CHECK(cache.size() == 8);
  }
}

TEST_CASE("capacity 0 keeps nothing and de-duplicates nothing", "[cache][capacity]") {
  eviction_log log;
  SECTION("from construction") {
    string_cache cache(options{.capacity = 0, .on_evict = log.listener()});
    int runs = 0;
    auto make = [&] {
      ++runs;
      return std::string("x");
    };
    CHECK(cache.get_or_add(1, make).outcome == lookup_outcome::miss);
    CHECK(cache.get_or_add(1, make).outcome == lookup_outcome::miss);
    CHECK(runs == 2);
    CHECK(cache.size() == 0);
    CHECK_FALSE(cache.contains(1));
    CHECK(cache.stats().misses == 2);
    CHECK(cache.stats().refusals == 2);
    CHECK(log.events.empty());
  }
  SECTION("set later, evicting everything") {
    string_cache cache(options{.capacity = 4, .on_evict = log.listener()});
    for (int k = 0; k < 3; ++k) add(cache, k);
    cache.set_capacity(0);
    CHECK(log.sorted_keys() == std::vector<int>{0, 1, 2});
    CHECK(cache.size() == 0);
    CHECK(cache.weight() == 0);
    CHECK(add(cache, 0) == lookup_outcome::miss);
    CHECK(add(cache, 0) == lookup_outcome::miss);
    CHECK(cache.size() == 0);
  }
}

TEST_CASE("without a weigher every created entry weighs one and in-flight ones nothing",
          "[cache][weight]") {
  string_cache cache(4);
  add(cache, 1);
  add(cache, 2);
  std::size_t size_inside = 0;
  std::size_t weight_inside = 0;
  cache.get_or_add(3, [&] {
    size_inside = cache.size();
    weight_inside = cache.weight();
    return std::string("v3");
  });
  CHECK(size_inside == 3);
  CHECK(weight_inside == 2);
  CHECK(cache.weight() == 3);
}

TEST_CASE("a weigher makes the capacity a weight", "[cache][weight]") {
  eviction_log log;
  string_cache cache(options{.capacity = 10, .weigher = string_weight, .on_evict = log.listener()});
  CHECK(cache.unit() == cache_unit::bytes);
  add(cache, 1, "aaaa");
  add(cache, 2, "bbbb");
  CHECK(cache.weight() == 8);
  CHECK(cache.size() == 2);

  add(cache, 3, "ccc");  // 11 > 10: the least recently used goes
  CHECK(log.keys() == std::vector<int>{1});
  CHECK(log.events[0].value == "aaaa");
  CHECK(cache.weight() == 7);
  CHECK(cache.size() == 2);

  SECTION("a touched entry outlives an untouched one") {
    add(cache, 2, "unused");
    add(cache, 4, "dddd");  // 11 > 10
    CHECK(log.keys() == std::vector<int>{1, 3});
    CHECK(cache.weight() == 8);
  }
  SECTION("a value heavier than the capacity reaches its caller and is not kept") {
    auto r = cache.get_or_add(9, [] { return std::string(11, 'x'); });
    CHECK(r.outcome == lookup_outcome::miss);
    CHECK(r.value.size() == 11);
    CHECK_FALSE(cache.contains(9));
    CHECK(cache.weight() == 7);
    CHECK(cache.contains(2));
    CHECK(cache.contains(3));
    REQUIRE(log.events.size() == 2);
    CHECK(log.events[1].key == 9);
    CHECK(log.events[1].value == std::string(11, 'x'));
    CHECK(log.events[1].reason == eviction_reason::capacity);
  }
  SECTION("shrinking evicts until the weight fits") {
    cache.set_capacity(4);
    CHECK(log.keys() == std::vector<int>{1, 2});
    CHECK(cache.weight() == 3);
    CHECK(cache.occupancy().weight <= cache.occupancy().capacity);
  }
  SECTION("erase and clear give the weight back") {
    CHECK(cache.erase(2));
    CHECK(cache.weight() == 3);
    cache.clear();
    CHECK(cache.weight() == 0);
    CHECK(cache.size() == 0);
  }
  SECTION("an in-flight entry counts toward size but weighs nothing until created") {
    std::size_t size_inside = 0;
    std::size_t weight_inside = 0;
    cache.get_or_add(5, [&] {
      size_inside = cache.size();
      weight_inside = cache.weight();
      return std::string("ee");
    });
    CHECK(size_inside == 3);
    CHECK(weight_inside == 7);
    CHECK(cache.weight() == 9);
  }
}

TEST_CASE("a kept value of weight 0 counts as 1, so capacity bounds the entries",
          "[cache][weight]") {
  eviction_log log;
  string_cache cache(options{.capacity = 10, .weigher = string_weight, .on_evict = log.listener()});
  for (int k = 0; k < 100; ++k) add(cache, k, "");
  CHECK(cache.size() == 10);
  CHECK(cache.weight() == 10);
  CHECK(cache.stats().evictions == 90);
  CHECK(log.events.size() == 90);
  CHECK(cache.contains(99));
  CHECK_FALSE(cache.contains(0));

  SECTION("and capacity 0 keeps none of them") {
    cache.set_capacity(0);
    CHECK(cache.size() == 0);
    CHECK(cache.weight() == 0);
    CHECK_FALSE(cache.contains(99));
    CHECK(add(cache, 99, "") == lookup_outcome::miss);
    CHECK(add(cache, 99, "") == lookup_outcome::miss);
    CHECK(cache.size() == 0);
  }
  SECTION("and no_evict is full when they fill it") {
    string_cache full(
        options{.capacity = 2, .policy = cache_policy::no_evict, .weigher = string_weight});
    add(full, 1, "a");
    add(full, 2, "");
    CHECK(full.weight() == 2);
    CHECK_FALSE(full.would_admit(0));
    CHECK(add(full, 3, "") == lookup_outcome::miss);
    CHECK_FALSE(full.contains(3));
    CHECK(full.stats().refusals == 1);
  }
}

TEST_CASE("a creation that finishes under capacity 0 is not kept", "[cache][weight][capacity]") {
  const bool weighed = GENERATE(false, true);
  const std::string value = GENERATE(std::string(), std::string("abc"));
  INFO((weighed ? "bytes" : "entries") << ", value \"" << value << "\"");
  eviction_log log;
  string_cache cache(options{.capacity = 10,
                             .weigher = weighed ? string_weight : options{}.weigher,
                             .on_evict = log.listener()});
  auto r = cache.get_or_add(1, [&] {
    cache.set_capacity(0);
    return value;
  });
  CHECK(r.value == value);
  CHECK(r.outcome == lookup_outcome::miss);
  CHECK_FALSE(cache.contains(1));
  CHECK(cache.size() == 0);
  CHECK(cache.weight() == 0);
  CHECK(add(cache, 1, value) == lookup_outcome::miss);
}

TEST_CASE("a cache whose capacity is a weight never evicts entries in flight for room",
          "[cache][weight][in_flight]") {
  // Entries in flight weigh 0: evicting one frees nothing and throws its
  // creation's value away. Nested creators keep entries in flight on one
  // thread.
  eviction_log log;

  SECTION("lru: a creation that finishes over capacity evicts ready entries only") {
    string_cache cache(
        options{.capacity = 100, .weigher = string_weight, .on_evict = log.listener()});
    for (int k = 0; k < 4; ++k) add(cache, k, std::string(20, 'a'));
    for (int k = 0; k < 4; ++k) REQUIRE(add(cache, k) == lookup_outcome::hit);  // all hot
    std::vector<int> heard_inside;
    std::vector<bool> in_flight_kept;
    // 101's creator asks for 102, whose creator asks for 103, whose creator
    // adds 200: 120 bytes in a capacity of 100.
    auto r = cache.get_or_add(101, [&] {
      cache.get_or_add(102, [&] {
        cache.get_or_add(103, [&] {
          add(cache, 200, std::string(40, 'z'));
          heard_inside = log.keys();
          for (int k : {101, 102, 103}) in_flight_kept.push_back(cache.contains(k));
          return std::string("y");
        });
        return std::string("y");
      });
      return std::string("y");
    });
    CHECK(r.value == "y");
    CHECK(heard_inside == std::vector<int>{0});  // the hand passes 101..103 by
    CHECK(in_flight_kept == std::vector<bool>{true, true, true});
    for (int k : {101, 102, 103, 200}) CHECK(cache.contains(k));
    for (const auto& e : log.events) CHECK(e.value.has_value());  // none left in flight
    CHECK(cache.weight() <= cache.capacity());
    CHECK(cache.stats().evictions == log.events.size());
  }

  SECTION("every policy: shrinking the capacity passes entries in flight by") {
    const cache_policy policy =
        GENERATE(cache_policy::lru, cache_policy::no_evict, cache_policy::cost);
    INFO("policy " << primcache::to_string(policy));
    string_cache cache(options{
        .capacity = 100, .policy = policy, .weigher = string_weight, .on_evict = log.listener()});
    // 101 goes in first (the oldest entry), 0 while it is in flight.
    auto r = cache.get_or_add(101, [&] {
      add(cache, 0, std::string(50, 'a'));
      cache.set_capacity(10);
      CHECK(cache.contains(101));
      return std::string("y");
    });
    CHECK(r.value == "y");
    CHECK(log.keys() == std::vector<int>{0});
    CHECK(cache.contains(101));
    CHECK(cache.weight() == 1);
    CHECK(cache.stats().evictions == 1);
  }
}

TEST_CASE("no_evict refuses new entries when full, and the caller still gets its value",
          "[cache][no_evict]") {
  eviction_log log;
  string_cache cache(
      options{.capacity = 2, .policy = cache_policy::no_evict, .on_evict = log.listener()});
  CHECK(cache.policy() == cache_policy::no_evict);
  add(cache, 1);
  add(cache, 2);
  add(cache, 1);  // a touch changes nothing for no_evict

  auto r = cache.get_or_add(3, [] { return value_of(3); });
  CHECK(r.outcome == lookup_outcome::miss);
  CHECK(r.value == "v3");
  CHECK_FALSE(cache.contains(3));
  CHECK(cache.contains(1));
  CHECK(cache.contains(2));
  CHECK(cache.stats().refusals == 1);
  CHECK(cache.stats().evictions == 0);
  CHECK(log.events.empty());
  CHECK(add(cache, 3) == lookup_outcome::miss);  // refused again: nothing de-duplicated
  CHECK(cache.stats().refusals == 2);

  SECTION("shrinking the capacity still evicts, oldest first") {
    cache.set_capacity(1);
    CHECK(log.keys() == std::vector<int>{1});
    CHECK(cache.contains(2));
  }
  SECTION("erasing makes room") {
    CHECK(cache.erase(1));
    CHECK(add(cache, 3) == lookup_outcome::miss);
    CHECK(add(cache, 3) == lookup_outcome::hit);
  }
}

TEST_CASE("no_evict with a weigher refuses values that do not fit", "[cache][no_evict]") {
  eviction_log log;
  string_cache cache(options{.capacity = 6,
                             .policy = cache_policy::no_evict,
                             .weigher = string_weight,
                             .on_evict = log.listener()});
  add(cache, 1, "aaaa");
  CHECK(cache.weight() == 4);
  auto r = cache.get_or_add(2, [] { return std::string("bbb"); });  // 7 > 6
  CHECK(r.value == "bbb");
  CHECK_FALSE(cache.contains(2));
  add(cache, 3, "cc");  // exactly full
  CHECK(cache.contains(3));
  CHECK(cache.weight() == 6);
  CHECK(add(cache, 4, "") == lookup_outcome::miss);  // full: refused before creating
  CHECK_FALSE(cache.contains(4));
  CHECK(cache.stats().refusals == 2);
  CHECK(log.events.empty());
}

TEST_CASE("would_admit predicts a refusal before the value is made", "[cache][no_evict]") {
  SECTION("entries under no_evict") {
    string_cache cache(options{.capacity = 2, .policy = cache_policy::no_evict});
    CHECK(cache.would_admit(1));
    add(cache, 1);
    CHECK(cache.would_admit(1));
    add(cache, 2);
    CHECK_FALSE(cache.would_admit(1));  // full
    CHECK_FALSE(cache.would_admit(0));  // an entry counts one whatever the weight asked
    CHECK(cache.erase(1));
    CHECK(cache.would_admit(1));
  }
  SECTION("weights under no_evict: the value must fit beside the others") {
    string_cache cache(
        options{.capacity = 6, .policy = cache_policy::no_evict, .weigher = string_weight});
    CHECK(cache.would_admit(6));
    CHECK_FALSE(cache.would_admit(7));  // heavier than the capacity
    add(cache, 1, "aaaa");
    CHECK(cache.would_admit(2));
    CHECK_FALSE(cache.would_admit(3));
    // What it predicts is what get_or_add does.
    CHECK(add(cache, 2, "bbb") == lookup_outcome::miss);
    CHECK_FALSE(cache.contains(2));
    CHECK(add(cache, 3, "cc") == lookup_outcome::miss);
    CHECK(cache.contains(3));
  }
  SECTION("lru evicts to admit anything that fits the capacity") {
    string_cache cache(options{.capacity = 6, .weigher = string_weight});
    add(cache, 1, "aaaaaa");
    CHECK(cache.would_admit(6));
    CHECK_FALSE(cache.would_admit(7));
  }
  SECTION("capacity 0 admits nothing") {
    string_cache cache(options{.capacity = 0});
    CHECK_FALSE(cache.would_admit(1));
  }
}

TEST_CASE("get_if_ready returns a kept value and never creates or waits", "[cache][lookup]") {
  string_cache cache(options{.capacity = 2});
  CHECK_FALSE(cache.get_if_ready(1).has_value());
  CHECK(cache.stats().misses == 0);  // absence is not a miss
  add(cache, 1);
  const auto hits = cache.stats().hits;
  const auto got = cache.get_if_ready(1);
  REQUIRE(got.has_value());
  CHECK(*got == "v1");
  CHECK(cache.stats().hits == hits + 1);
  // A lookup is a use, as a hit is: the untouched 2 goes first.
  add(cache, 2);
  CHECK(cache.get_if_ready(1).has_value());
  add(cache, 3);
  CHECK(cache.contains(1));
  CHECK_FALSE(cache.contains(2));
  // An entry in flight is not waited for.
  std::optional<std::string> during;
  cache.get_or_add(4, [&] {
    during = cache.get_if_ready(4).value_or("absent");
    return value_of(4);
  });
  CHECK(during == "absent");
}

TEST_CASE("count_refused_miss counts a miss and a refusal", "[cache][stats]") {
  string_cache cache(options{.capacity = 0});
  cache.count_refused_miss();
  CHECK(cache.stats().misses == 1);
  CHECK(cache.stats().refusals == 1);
  CHECK(cache.size() == 0);
}

TEST_CASE("cost evicts the entry cheapest to create per unit of weight", "[cache][cost]") {
  eviction_log log;
  string_cache cache(options{.capacity = 30,
                             .policy = cache_policy::cost,
                             .weigher = string_weight,
                             .on_evict = log.listener()});
  CHECK(cache.policy() == cache_policy::cost);
  // Slow creators take 50 ms; fast ones a few hundred nanoseconds. Every
  // value weighs 10.
  auto slow = [](char c) {
    return [c] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return std::string(10, c);
    };
  };
  auto fast = [](char c) { return [c] { return std::string(10, c); }; };
  cache.get_or_add(1, slow('a'));
  cache.get_or_add(2, fast('b'));
  cache.get_or_add(3, slow('c'));
  for (int i = 0; i < 3; ++i) cache.get_or_add(2, fast('x'));  // hits: recency plays no part
  cache.get_or_add(4, fast('d'));                              // evicts the cheapest, 2
  CHECK(log.keys() == std::vector<int>{2});
  CHECK(cache.stats().evictions == 1);
  cache.get_or_add(5, fast('e'));  // evicts 4, not the slow 1 or 3
  CHECK(log.keys() == std::vector<int>{2, 4});
  CHECK(cache.contains(1));
  CHECK(cache.contains(3));

  SECTION("shrinking evicts the cheapest first") {
    cache.set_capacity(20);
    CHECK(log.keys() == std::vector<int>{2, 4, 5});
    CHECK(cache.contains(1));
    CHECK(cache.contains(3));
  }
}

TEST_CASE("cost compares time per unit of weight, not time alone", "[cache][cost]") {
  eviction_log log;
  string_cache cache(options{.capacity = 25,
                             .policy = cache_policy::cost,
                             .weigher = string_weight,
                             .on_evict = log.listener()});
  auto slow = [](std::size_t weight) {
    return [weight] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return std::string(weight, 's');
    };
  };
  cache.get_or_add(1, slow(20));                            // 50 ms over 20: 2.5 ms per unit
  cache.get_or_add(2, slow(5));                             // 50 ms over 5: 10 ms per unit
  cache.get_or_add(3, [] { return std::string(5, 'f'); });  // needs room: 1 goes
  CHECK(log.keys() == std::vector<int>{1});
  CHECK(cache.contains(2));
  CHECK(cache.weight() == 10);
}

TEST_CASE("cost without a weigher ranks entries by creation time", "[cache][cost]") {
  eviction_log log;
  string_cache cache(
      options{.capacity = 2, .policy = cache_policy::cost, .on_evict = log.listener()});
  cache.get_or_add(1, [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return std::string("slow");
  });
  add(cache, 2);
  add(cache, 3);  // evicts 2, the cheaper
  CHECK(log.keys() == std::vector<int>{2});
  add(cache, 4);  // evicts 3
  CHECK(log.keys() == std::vector<int>{2, 3});
  CHECK(cache.contains(1));
}

TEST_CASE("erase and clear remove entries and tell the listener why", "[cache][erase]") {
  eviction_log log;
  string_cache cache(options{.capacity = 8, .on_evict = log.listener()});
  for (int k = 1; k <= 3; ++k) add(cache, k);

  SECTION("erase") {
    CHECK(cache.erase(2));
    CHECK_FALSE(cache.erase(2));
    CHECK_FALSE(cache.erase(42));
    CHECK_FALSE(cache.contains(2));
    CHECK(cache.size() == 2);
    REQUIRE(log.events.size() == 1);
    CHECK(log.events[0].key == 2);
    CHECK(log.events[0].value == "v2");
    CHECK(log.events[0].reason == eviction_reason::erased);
    CHECK(add(cache, 2) == lookup_outcome::miss);
    CHECK(cache.stats().evictions == 0);
  }
  SECTION("clear") {
    cache.clear();
    CHECK(cache.size() == 0);
    CHECK(cache.weight() == 0);
    CHECK(log.sorted_keys() == std::vector<int>{1, 2, 3});
    for (const auto& e : log.events) CHECK(e.reason == eviction_reason::cleared);
    CHECK(add(cache, 1) == lookup_outcome::miss);
    cache.clear();
    cache.clear();  // clearing an empty cache is harmless
    CHECK(cache.size() == 0);
  }
  SECTION("erasing an entry while its creator runs") {
    bool erased = false;
    auto r = cache.get_or_add(5, [&] {
      erased = cache.erase(5);
      return value_of(5);
    });
    CHECK(erased);
    CHECK(r.value == "v5");
    CHECK(r.outcome == lookup_outcome::miss);
    CHECK_FALSE(cache.contains(5));
    REQUIRE(log.events.size() == 1);
    CHECK(log.events[0].key == 5);
    CHECK_FALSE(log.events[0].value.has_value());  // it left in flight
    CHECK(add(cache, 5) == lookup_outcome::miss);
  }
  SECTION("clearing while a creator runs") {
    auto r = cache.get_or_add(5, [&] {
      cache.clear();
      return value_of(5);
    });
    CHECK(r.value == "v5");
    CHECK(cache.size() == 0);
    CHECK(log.sorted_keys() == std::vector<int>{1, 2, 3, 5});
  }
}

TEST_CASE("clear_and_set_capacity empties the cache and sets the capacity in one step",
          "[cache][capacity][erase]") {
  const bool weighed = GENERATE(false, true);
  INFO((weighed ? "bytes" : "entries"));
  eviction_log log;
  string_cache cache(options{.capacity = 8,
                             .weigher = weighed ? string_weight : options{}.weigher,
                             .on_evict = log.listener()});
  for (int k = 1; k <= 3; ++k) add(cache, k);

  SECTION("ready entries go as cleared, and the new capacity holds") {
    cache.clear_and_set_capacity(weighed ? 4 : 2);
    CHECK(cache.capacity() == (weighed ? 4u : 2u));
    CHECK(cache.size() == 0);
    CHECK(cache.weight() == 0);
    CHECK(log.sorted_keys() == std::vector<int>{1, 2, 3});
    for (const auto& e : log.events) CHECK(e.reason == eviction_reason::cleared);
    CHECK(cache.stats().evictions == 0);
    for (int k = 4; k <= 6; ++k) add(cache, k);
    CHECK(cache.size() == 2);
    CHECK(cache.occupancy().weight <= cache.occupancy().capacity);
  }
  SECTION("entries in flight go too; their callers still get their values") {
    std::size_t size_inside = 99;
    auto r = cache.get_or_add(5, [&] {
      cache.clear_and_set_capacity(0);
      size_inside = cache.size();
      return value_of(5);
    });
    CHECK(size_inside == 0);  // set_capacity(0) leaves a weighed entry in flight
    CHECK(r.value == "v5");
    CHECK(r.outcome == lookup_outcome::miss);
    CHECK(cache.size() == 0);
    CHECK_FALSE(cache.contains(5));
    CHECK(log.sorted_keys() == std::vector<int>{1, 2, 3, 5});
    for (const auto& e : log.events) CHECK(e.value.has_value() == (e.key != 5));  // 5 in flight
    CHECK(add(cache, 5) == lookup_outcome::miss);  // capacity 0: nothing kept
    CHECK(cache.size() == 0);
  }
}

TEST_CASE("a creator that asks for its own key gets an error instead of waiting for itself",
          "[cache][in_flight]") {
  // Before the cache refused it, such a call waited forever: the body runs in
  // a child killed at the deadline, and each way it can go wrong exits with
  // its own status.
  const int status = primcache_test::run_in_child(5, [] {
    string_cache cache(4);
    auto own_key = [&] { return cache.get_or_add(1, [] { return std::string("inner"); }).value; };
    try {
      cache.get_or_add(1, own_key);
      return 10;  // no error
    } catch (const primcache::error& e) {
      if (e.code() != primcache::status::invalid_arguments) return 11;
      if (e.message().find("own key") == std::string::npos) return 12;
    }
    // The outer creation failed with that error: nothing kept.
    if (cache.contains(1) || cache.size() != 0) return 13;
    if (cache.stats().failures != 1 || cache.stats().misses != 1) return 14;
    if (cache.stats().waits != 0 || cache.stats().hits != 0) return 15;

    // Through another key: 2's creator asks for 3, whose creator asks for 2.
    try {
      cache.get_or_add(2, [&] {
        return cache.get_or_add(3, [&] { return cache.get_or_add(2, own_key).value; }).value;
      });
      return 20;
    } catch (const primcache::error& e) {
      if (e.code() != primcache::status::invalid_arguments) return 21;
    }
    if (cache.contains(2) || cache.contains(3) || cache.stats().failures != 3) return 22;

    // A creator that catches the error may make its value another way.
    auto r = cache.get_or_add(1, [&] {
      try {
        return own_key();
      } catch (const primcache::error&) {
        return std::string("made anyway");
      }
    });
    if (r.value != "made anyway" || r.outcome != lookup_outcome::miss) return 30;
    if (cache.get_or_add(1, own_key).outcome != lookup_outcome::hit) return 31;
    return 0;
  });
  INFO("child: " << primcache_test::describe_child_status(status));
  CHECK(status == 0);
}

TEST_CASE("an entry evicted while its creator runs still delivers its value",
          "[cache][in_flight]") {
  eviction_log log;
  string_cache cache(options{.capacity = 1, .on_evict = log.listener()});
  // The creator uses the cache itself (no lock is held while it runs); the
  // nested miss evicts the outer in-flight entry.
  auto r = cache.get_or_add(1, [&] {
    CHECK(cache.get_or_add(2, [] { return value_of(2); }).outcome == lookup_outcome::miss);
    return value_of(1);
  });
  CHECK(r.outcome == lookup_outcome::miss);
  CHECK(r.value == "v1");
  CHECK_FALSE(cache.contains(1));
  CHECK(cache.contains(2));
  REQUIRE(log.events.size() == 1);
  CHECK(log.events[0].key == 1);
  CHECK_FALSE(log.events[0].value.has_value());
  CHECK(log.events[0].reason == eviction_reason::capacity);
  CHECK(cache.occupancy().size <= cache.occupancy().capacity);
}

TEST_CASE("a failed creation reaches its caller and leaves nothing behind", "[cache][failure]") {
  eviction_log log;
  int runs = 0;
  auto throwing = [&]() -> std::string {
    ++runs;
    throw std::runtime_error("compile failed");
  };

  SECTION("a creator that throws") {
    string_cache cache(options{.capacity = 4, .on_evict = log.listener()});
    add(cache, 7);
    CHECK_THROWS_WITH(cache.get_or_add(1, throwing), "compile failed");
    CHECK_FALSE(cache.contains(1));
    CHECK(cache.size() == 1);
    CHECK(cache.stats().failures == 1);
    CHECK(cache.stats().misses == 2);
    CHECK(log.events.empty());
    CHECK_THROWS_WITH(cache.get_or_add(1, throwing), "compile failed");  // not remembered
    CHECK(runs == 2);
    CHECK(add(cache, 1) == lookup_outcome::miss);
    CHECK(add(cache, 1) == lookup_outcome::hit);
  }
  SECTION("a value the failure hook recognizes") {
    string_cache cache(options{.capacity = 4,
                               .on_evict = log.listener(),
                               .is_failure = [](const std::string& v) { return v.empty(); }});
    auto r = cache.get_or_add(1, [] { return std::string(); });
    CHECK(r.outcome == lookup_outcome::miss);
    CHECK(r.value.empty());
    CHECK_FALSE(cache.contains(1));
    CHECK(cache.size() == 0);
    CHECK(cache.stats().failures == 1);
    CHECK(add(cache, 1) == lookup_outcome::miss);
    CHECK(add(cache, 1) == lookup_outcome::hit);
    CHECK(log.events.empty());
  }
  SECTION("a weigher that throws fails the creation") {
    string_cache cache(
        options{.capacity = 100, .weigher = [](const int&, const std::string&) -> std::size_t {
                  throw std::length_error("unweighable");
                }});
    CHECK_THROWS_AS(cache.get_or_add(1, [] { return std::string("x"); }), std::length_error);
    CHECK_FALSE(cache.contains(1));
    CHECK(cache.weight() == 0);
    CHECK(cache.stats().failures == 1);
  }
  SECTION("when the cache keeps nothing") {
    string_cache cache(
        options{.capacity = 0, .is_failure = [](const std::string& v) { return v.empty(); }});
    CHECK_THROWS_WITH(cache.get_or_add(1, throwing), "compile failed");
    CHECK(cache.get_or_add(1, [] { return std::string(); }).value.empty());
    CHECK(cache.stats().failures == 2);
    CHECK(cache.stats().refusals == 2);
  }
  SECTION("when its in-flight entry was already evicted") {
    string_cache cache(options{.capacity = 1, .on_evict = log.listener()});
    CHECK_THROWS_WITH(cache.get_or_add(1,
                                       [&]() -> std::string {
                                         add(cache, 2);
                                         throw std::runtime_error("late failure");
                                       }),
                      "late failure");
    CHECK(cache.contains(2));
    CHECK(cache.size() == 1);
    CHECK(cache.stats().failures == 1);
  }
}

namespace {
// A value whose copies throw while `copies_fail` is set.
struct fragile {
  static inline bool copies_fail = false;
  int v = 0;
  explicit fragile(int x) : v(x) {}
  fragile(fragile&&) noexcept = default;
  fragile(const fragile& other) : v(other.v) {
    if (copies_fail) throw std::runtime_error("copy failed");
  }
  fragile& operator=(const fragile&) = default;
};
}  // namespace

TEST_CASE("a value whose copy into the cache throws fails the creation", "[cache][failure]") {
  primcache::concurrent_cache<int, fragile> cache(4);
  CHECK_THROWS_WITH(cache.get_or_add(1,
                                     [] {
                                       fragile::copies_fail = true;  // the creator's own
                                       return fragile(1);            // value is moved
                                     }),
                    "copy failed");
  fragile::copies_fail = false;
  CHECK_FALSE(cache.contains(1));
  CHECK(cache.size() == 0);
  CHECK(cache.stats().failures == 1);
  CHECK(cache.get_or_add(1, [] { return fragile(2); }).value.v == 2);
  CHECK(cache.get_or_add(1, [] { return fragile(3); }).value.v == 2);
}

TEST_CASE("occupancy reads size, weight and capacity together", "[cache][stats]") {
  string_cache cache(3);
  add(cache, 1);
  add(cache, 2);
  auto o = cache.occupancy();
  CHECK(o.size == 2);
  CHECK(o.weight == 2);
  CHECK(o.capacity == 3);
}

TEST_CASE("stats count creation time", "[cache][stats]") {
  string_cache cache(3);
  cache.get_or_add(1, [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return std::string("slow");
  });
  CHECK(cache.stats().creation_time >= std::chrono::milliseconds(2));
}

TEST_CASE("an unknown policy is refused at construction", "[cache][policy]") {
  try {
    string_cache cache(options{.policy = static_cast<cache_policy>(42)});
    FAIL("constructed a cache with policy 42");
  } catch (const primcache::error& e) {
    CHECK(e.code() == primcache::status::invalid_arguments);
    CHECK(e.message().find("42") != std::string::npos);
  }
}

TEST_CASE("every enumeration has names, and values outside say unknown", "[cache][names]") {
  using primcache::to_string;
  CHECK(to_string(lookup_outcome::hit) == "hit");
  CHECK(to_string(lookup_outcome::miss) == "miss");
  CHECK(to_string(lookup_outcome::waited) == "waited");
  CHECK(to_string(static_cast<lookup_outcome>(9)) == "unknown");
  CHECK(to_string(cache_policy::lru) == "lru");
  CHECK(to_string(cache_policy::no_evict) == "no_evict");
  CHECK(to_string(cache_policy::cost) == "cost");
  CHECK(to_string(static_cast<cache_policy>(9)) == "unknown");
  CHECK(to_string(eviction_reason::capacity) == "capacity");
  CHECK(to_string(eviction_reason::erased) == "erased");
  CHECK(to_string(eviction_reason::cleared) == "cleared");
  CHECK(to_string(static_cast<eviction_reason>(9)) == "unknown");
  CHECK(to_string(cache_unit::entries) == "entries");
  CHECK(to_string(cache_unit::bytes) == "bytes");
  CHECK(to_string(static_cast<cache_unit>(9)) == "unknown");
}

TEST_CASE("keys that collide in the table stay distinct", "[cache][table]") {
  // A hash that sends every key to one bucket chain.
  struct constant_hash {
    std::size_t operator()(int) const { return 7; }
  };
  primcache::concurrent_cache<int, int, constant_hash> cache(64);
  for (int k = 0; k < 40; ++k) cache.get_or_add(k, [k] { return k * 10; });
  for (int k = 0; k < 40; ++k) {
    auto r = cache.get_or_add(k, [] { return -1; });
    CHECK(r.outcome == lookup_outcome::hit);
    CHECK(r.value == k * 10);
  }
  CHECK(cache.erase(17));
  CHECK_FALSE(cache.contains(17));
  CHECK(cache.contains(18));
  CHECK(cache.size() == 39);
}
