#include "primcache/autotune/search.hpp"

namespace primcache {

search_strategy exhaustive_search() {
  return [](std::size_t count, std::size_t budget, const search_keep& keep) {
    std::vector<std::size_t> out;
    for (std::size_t i = 1; i < count && out.size() < budget; ++i) {
      if (keep(i)) out.push_back(i);
    }
    return out;
  };
}

search_strategy spread_search() {
  return [](std::size_t count, std::size_t budget, const search_keep& keep) {
    std::vector<std::size_t> out;
    if (count <= 1 || budget == 0) return out;
    const std::size_t n = count - 1;  // candidates 1 .. count-1
    const std::size_t picks = budget < n ? budget : n;
    // `picks` equal segments; from each, its first candidate not pruned.
    for (std::size_t k = 0; k < picks; ++k) {
      const std::size_t lo = 1 + k * n / picks, hi = 1 + (k + 1) * n / picks;
      for (std::size_t i = lo; i < hi; ++i) {
        if (keep(i)) {
          out.push_back(i);
          break;
        }
      }
    }
    return out;
  };
}

}  // namespace primcache
