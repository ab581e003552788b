// Uses primcache::cache and primcache::keyhash alone, from an installed tree:
// a concurrent cache of strings keyed by byte-stable keys.
#include <cstdio>
#include <string>

#include <primcache/cache/concurrent_cache.hpp>
#include <primcache/keyhash/key.hpp>

int main() {
  primcache::concurrent_cache<primcache::key, std::string> cache(16);
  const primcache::key k = primcache::key_writer().u32(1).str("matmul").finish();
  auto first = cache.get_or_add(k, [] { return std::string("compiled"); });
  auto second = cache.get_or_add(primcache::key_writer().u32(1).str("matmul").finish(),
                                 [] { return std::string("compiled again"); });
  const bool ok = first.outcome == primcache::lookup_outcome::miss &&
                  second.outcome == primcache::lookup_outcome::hit && second.value == "compiled" &&
                  cache.size() == 1;
  std::printf("consumer: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
