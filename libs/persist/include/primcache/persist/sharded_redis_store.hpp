// primcache/persist/sharded_redis_store.hpp — the persistent cache spread
// over several Redis servers by key, on the client: more memory and
// bandwidth than one server has, and a dead server costs only its share of
// the keys.
//
//   std::vector<primcache::redis_store_options> shards = primcache::parse_redis_url_list(
//       "redis://cache-a:6379/pc,redis://cache-b:6379/pc,redis://cache-c:6379/pc");
//   for (auto& o : shards) o.format = format;   // library version, fleet key
//   std::unique_ptr<primcache::sharded_redis_store> s =
//       primcache::sharded_redis_store::open(std::move(shards));
//   s->put(id, blob);   // to the one shard rendezvous hashing picks for id
//   s->get(id);         // from that shard only
//
// URL list (parse_redis_url_list): URLs separated by ',' (spaces around
// one are ignored), each a complete redis_store URL (redis_store.hpp) with
// its own credentials, prefix and parameters. A value holding a single URL
// is that URL, parsed exactly as parse_redis_url does (so a ',' inside its
// password still works); in a list write a ',' in a password as %2C. An
// empty element, an element that is not a valid URL, and two elements that
// name one server (the same HOST:PORT, the host compared without case) are
// refused with error(invalid_arguments) naming the element (passwords
// redacted).
//
// Contract:
// - Placement: rendezvous (highest random weight) hashing. A key's weight
//   on a shard is XXH3-64 of the key's XXH3-128 seeded with XXH3-64 of the
//   shard's server name "host:port" (lower-case host, as written in the URL;
//   IPv6 hosts in brackets); the key lives on the shard of highest weight.
//   So placement depends on the set of server names only — not on their
//   order, the prefixes, the parameters or the process — and removing a
//   server moves only the keys that lived on it, adding one moves only the
//   keys it now wins (about 1/N of them each way). Members of one fleet
//   must name the servers alike (not "cache-a" in one, its address in
//   another).
// - Each shard is a redis_store with its own connection pool, timeouts and
//   circuit breaker: a dead, stopped or slow server makes its keys miss
//   (and puts to them fail) within its timeouts, then at no cost once its
//   breaker opens; the other shards are not involved in those calls and
//   keep serving.
// - get/put/erase reach the key's shard only. size() is the sum of the
//   shards' size() (each bounded as redis_store's); clear() clears every
//   shard, and when some cannot be reached clears the others and then
//   throws error(runtime_error) naming the ones that failed.
// - stats(): the shards' counters summed; breaker_state is 0 (closed) when
//   every shard's breaker is closed, 1 (open) when every one is open, else
//   2 (partly open: some open or half-open). shards() has each shard's own
//   stats, in list order (control shows them as shard<i>_..., see
//   registration.hpp).
// - capacity() and set_capacity() apply to every shard (the largest entry).
//
// Thread-safety: every member may be called from any thread at once. A
// forked child must open its own store.
// Exceptions: parse_redis_url_list and open() throw error(invalid_arguments)
// for a malformed list or options (open(): fewer than one shard, two shards
// on one server — the same resolved address and port), and what
// redis_store::open throws; clear() as above; the rest report failures as
// values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/persist/blob_store.hpp"
#include "primcache/persist/redis_store.hpp"

namespace primcache {

// Every URL of a comma-separated list, each parsed over `base` (see above).
// A single URL gives one element.
PRIMCACHE_API std::vector<redis_store_options> parse_redis_url_list(std::string_view urls,
                                                                    redis_store_options base = {});

// A URL or a URL list as a message may show it: each URL's credentials
// replaced by "***" (redact_redis_url per URL; URLs are split where a ','
// is followed by a scheme, so a ',' in a password is hidden too).
PRIMCACHE_API std::string redact_redis_url_list(std::string_view urls);

// The name placement hashes for a shard: "host:port", the host in lower
// case ("[v6]:port" for an IPv6 address).
PRIMCACHE_API std::string redis_shard_name(const redis_store_options& o);

class PRIMCACHE_API sharded_redis_store final : public blob_store {
 public:
  // One redis_store per element (each opened as redis_store::open does:
  // resolved, not connected).
  static std::unique_ptr<sharded_redis_store> open(std::vector<redis_store_options> shards);
  ~sharded_redis_store() override;

  std::optional<std::vector<std::byte>> get(std::span<const std::byte> key) override;
  put_result put(std::span<const std::byte> key, std::span<const std::byte> payload) override;
  bool erase(std::span<const std::byte> key) override;
  std::uint64_t size() const override;
  std::uint64_t capacity() const override;
  void set_capacity(std::uint64_t megabytes) override;
  void clear() override;
  blob_store_stats stats() const override;
  bool read_only() const noexcept override;
  // "sharded redis [redis h1:p1/prefix, redis h2:p2/prefix, ...]".
  std::string describe() const override;
  std::vector<blob_store_shard> shards() const override;

  std::size_t shard_count() const noexcept;
  // The index (in list order) of the shard `key` lives on.
  std::size_t shard_of(std::span<const std::byte> key) const noexcept;
  // The shard's name (redis_shard_name) and store.
  const std::string& shard_name(std::size_t i) const;
  redis_store& shard(std::size_t i);

 private:
  struct state;
  explicit sharded_redis_store(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

}  // namespace primcache
