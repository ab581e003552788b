#include "primcache/autotune/search.hpp"

#include <catch2/catch.hpp>
#include <vector>

using namespace primcache;

namespace {
const search_keep keep_all = [](std::size_t) { return true; };
}

TEST_CASE("the exhaustive search takes candidates in order", "[autotune][search]") {
  const search_strategy s = exhaustive_search();
  CHECK(s(5, 10, keep_all) == std::vector<std::size_t>{1, 2, 3, 4});
  CHECK(s(100, 3, keep_all) == std::vector<std::size_t>{1, 2, 3});
  CHECK(s(1, 10, keep_all).empty());
  CHECK(s(10, 0, keep_all).empty());
  SECTION("skipping pruned ones without spending the budget on them") {
    std::vector<std::size_t> asked;
    const search_keep odd = [&](std::size_t i) {
      asked.push_back(i);
      return i % 2 == 1;
    };
    CHECK(s(100, 3, odd) == std::vector<std::size_t>{1, 3, 5});
    CHECK(asked == std::vector<std::size_t>{1, 2, 3, 4, 5});
  }
}

TEST_CASE("the spread search covers the space evenly", "[autotune][search]") {
  const search_strategy s = spread_search();
  CHECK(s(101, 4, keep_all) == std::vector<std::size_t>{1, 26, 51, 76});
  CHECK(s(4, 10, keep_all) == std::vector<std::size_t>{1, 2, 3});
  CHECK(s(1, 4, keep_all).empty());
  CHECK(s(50, 0, keep_all).empty());
  SECTION("a pruned pick is replaced by the next in its segment") {
    const search_keep not26 = [](std::size_t i) { return i != 26 && i != 1; };
    CHECK(s(101, 4, not26) == std::vector<std::size_t>{2, 27, 51, 76});
  }
  SECTION("a segment pruned whole gives nothing") {
    const search_keep low = [](std::size_t i) { return i < 26; };
    CHECK(s(101, 4, low) == std::vector<std::size_t>{1});
  }
}
