#include "primcache/const_cache/constant_key.hpp"

namespace primcache {
namespace {

// splitmix64's finalizer: spreads the backend id over every bit before it is
// mixed with the bytes' hash, so backend ids 1 and 2 with equal bytes land
// far apart.
std::uint64_t mix(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

constant_key::constant_key(std::uint64_t backend_id, std::string_view bytes)
    : backend_id_(backend_id),
      bytes_(bytes),
      hash_(static_cast<std::size_t>(
          mix(static_cast<std::uint64_t>(std::hash<std::string_view>{}(bytes_)) ^
              mix(backend_id + 0x9e3779b97f4a7c15ULL)))) {}

}  // namespace primcache
