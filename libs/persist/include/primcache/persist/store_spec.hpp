// primcache/persist/store_spec.hpp — which persistent store to open, from
// the three settings a process is given (a directory, its capacity, a Redis
// URL): what the runtime calls with PRIMCACHE_PERSISTENT_CACHE_DIR,
// _CAPACITY and _REDIS, and primcached with its config.
//
//   primcache::store_spec spec;
//   spec.dir = "/var/cache/primcache";             // empty: no local tier
//   spec.capacity_mb = 1024;
//   spec.redis_url = "redis://cache:6379/pc";      // empty: no remote tier; a,b,c: sharded
//   spec.format.library_version = version_and_build_id;
//   spec.format.key = fleet_key;                    // borrowed, may be null
//   std::unique_ptr<primcache::blob_store> s = primcache::open_store(spec);
//
// dir only: a directory_store; redis_url only: a redis_store, or a
// sharded_redis_store when redis_url is a comma-separated list of URLs
// (sharded_redis_store.hpp); both: a tiered_store (the directory in front
// of Redis). read_only applies to every
// tier. The capacity is the directory's (for Redis only: the largest entry).
//
// Thread-safety: a plain function; the store it returns is thread-safe.
// Exceptions: error(invalid_arguments) when neither dir nor redis_url is
// set or the URL (list) is malformed (parse_redis_url_list's message); what
// directory_store::open, redis_store::open and sharded_redis_store::open
// throw.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "primcache/base/export.hpp"
#include "primcache/persist/blob_store.hpp"
#include "primcache/persist/entry.hpp"
#include "primcache/persist/tiered_store.hpp"

namespace primcache {

struct store_spec {
  std::string dir;
  std::uint64_t capacity_mb = 1024;
  std::string redis_url;
  bool read_only = false;
  // Library version and fleet key (borrowed: keep it alive as long as the store).
  entry_format format;
  // For the tiered store's background writer.
  tiered_store_options tiered;
};

PRIMCACHE_API std::unique_ptr<blob_store> open_store(const store_spec& spec);

}  // namespace primcache
