#include "primcache/autotune/cold_cache.hpp"

#include <catch2/catch.hpp>

using namespace primcache;

TEST_CASE("the cold cache is larger than the last-level cache", "[autotune][cold_cache]") {
  const std::size_t llc = last_level_cache_bytes();
  CHECK(llc >= 64 * 1024);
  cold_cache c;
  CHECK(c.bytes() >= std::min<std::size_t>(2 * llc, std::size_t{512} << 20));
  CHECK(c.flushes() == 0);
  c.flush();
  c.flush();
  CHECK(c.flushes() == 2);
}

TEST_CASE("a cold cache of a chosen size", "[autotune][cold_cache]") {
  cold_cache c(1 << 20);
  CHECK(c.bytes() == (1u << 20));
  c.flush();
  CHECK(c.flushes() == 1);
  cold_cache tiny(1);
  CHECK(tiny.bytes() == 64);  // at least one line
  tiny.flush();
}
