// primcache/runtime/persistent_cache.hpp — the built-in persistent kernel
// cache: a persist::blob_store the runtime reads on a primitive-cache miss
// before compiling, and writes fresh compilations to in the background.
//
//   // attach a directory (or any blob_store: Redis, tiered, your own)
//   primcache::set_persistent_cache(primcache::open_persistent_cache_dir("/var/cache/pc", 1024));
//   primcache::matmul prim(pd);       // miss: read from the store, else compile + write
//   primcache::flush_persistent_cache_writes();   // wait for the background writes
//   primcache::set_persistent_cache(nullptr);     // detach (flushes first)
//
// Without a call, the environment decides, read once on first use:
// PRIMCACHE_PERSISTENT_CACHE_DIR (a directory store; unset or empty: none),
// PRIMCACHE_PERSISTENT_CACHE_CAPACITY (MB, default 1024),
// PRIMCACHE_PERSISTENT_CACHE_REDIS (redis://host:port/prefix: a Redis
// store, behind the directory when both are set; a comma-separated list of
// such URLs: a sharded_redis_store over those servers), and the persist
// library's PRIMCACHE_PERSISTENT_CACHE_KEY_FILE and _READONLY. A malformed
// value, or a directory that cannot be opened, is reported once on stderr
// with the reason and ignored. Any set_persistent_cache call wins over the
// environment (made before first use, the environment is never read).
//
// On a miss of the in-memory primitive cache the store is asked for the
// descriptor's cache_blob_id(): a blob that loads is the primitive (no
// compilation; creation source "persistent"); a blob that fails to load
// because it is bad (the failure's status is corrupt_data,
// invalid_arguments, unimplemented, not_found or permission_denied) is
// counted (rejected; corrupt_entries), erased from the store and compiled
// afresh; one that fails for a reason outside it (out_of_memory, also
// std::bad_alloc, runtime_error: a driver or JIT failure) is counted
// (load_failed) and compiled, and its entry kept, with no write queued over
// it (other processes sharing the store may load it);
// none: the primitive is compiled and handed to a bounded write-behind
// queue — the creator pays only for the hand-off; when the queue is full the
// write is dropped and counted. One background thread serializes and puts
// queued primitives. Nested primitives take the same path.
//
// Detaching and process exit (an atexit handler, at most 10 s) finish the
// queued writes. The attached store is registered in control as cache
// "persistent" (do not register it yourself).
//
// Thread-safety: every function may be called from any thread. fork(): the
// child gets its own writer thread on its first write; a store attached from
// the environment is reopened by the child on first use, one attached by a
// call stays attached (a child should attach its own directory store: the
// store's file lock is shared with the parent's).
// Exceptions: set_persistent_cache throws error(already_exists) when another
// object is registered as cache "persistent" in control (nothing is attached
// then); open_persistent_cache[_dir] throws what persist's open_store throws
// (permission_denied for a directory others could write, runtime_error,
// invalid_arguments for a malformed URL or no dir and no URL) and the fleet
// key's failure when PRIMCACHE_PERSISTENT_CACHE_KEY_FILE is set but
// unusable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "primcache/base/export.hpp"

namespace primcache {

class blob_store;

// Attaches `store` (null: detaches). The previous store, if any, is
// unregistered from control, its queued writes are finished, and it is
// released. The new one is registered in control as cache "persistent".
PRIMCACHE_API void set_persistent_cache(std::shared_ptr<blob_store> store);
// The attached store (the environment's, if no call attached one), or null.
PRIMCACHE_API std::shared_ptr<blob_store> get_persistent_cache();
// set_persistent_cache(nullptr).
PRIMCACHE_API void detach_persistent_cache();
// Returns once every write queued so far has been done (or failed),
// including the attached store's own background writes (a tiered store's
// Redis writes); process exit does the same, for at most 10 s.
PRIMCACHE_API void flush_persistent_cache_writes();
// Bound of the write-behind queue, in primitives (default 256; 0 drops
// every write). Writes beyond it are dropped and counted.
PRIMCACHE_API void set_persistent_cache_write_queue_capacity(std::size_t primitives);

// A store as the environment would open it (persist's open_store): `dir`
// alone a directory store of capacity_mb MB, `redis_url` alone
// (redis://host:port/prefix; a comma-separated list of URLs: a sharded
// Redis store) a Redis store, both the tiered store (the
// directory in front of Redis); with the fleet key of
// PRIMCACHE_PERSISTENT_CACHE_KEY_FILE (if set), read-only per
// PRIMCACHE_PERSISTENT_CACHE_READONLY, and entries stamped with this
// library's version and build identity. Throws error(invalid_arguments)
// when both are empty or the URL is malformed.
PRIMCACHE_API std::shared_ptr<blob_store> open_persistent_cache(const std::string& dir,
                                                                std::uint64_t capacity_mb,
                                                                const std::string& redis_url);
// open_persistent_cache(dir, capacity_mb, "") for a non-empty dir.
PRIMCACHE_API std::shared_ptr<blob_store> open_persistent_cache_dir(const std::string& dir,
                                                                    std::uint64_t capacity_mb);

// The runtime's side of the persistent cache, since the process started.
// The store's own counters are its stats() (and control's "persistent").
struct persistent_cache_stats {
  std::uint64_t hits = 0;            // misses served by the store (no compilation)
  std::uint64_t misses = 0;          // store asked, nothing usable there: compiled
  std::uint64_t rejected = 0;        // of misses: the store's blob was bad: compiled, erased
  std::uint64_t load_failed = 0;     // of misses: the store's blob failed to load for a reason
                                     // outside it (out of memory, a driver or JIT failure):
                                     // kept, compiled, nothing written over it
  std::uint64_t writes_queued = 0;   // compilations handed to the write-behind queue
  std::uint64_t writes_stored = 0;   // put() stored them
  std::uint64_t writes_exists = 0;   // put() found an entry already there
  std::uint64_t writes_refused = 0;  // put() refused them (read-only, too large)
  std::uint64_t writes_failed = 0;   // put() failed (I/O) or threw
  std::uint64_t writes_dropped = 0;  // the queue was full (or the store detached meanwhile)
  std::uint64_t unserializable = 0;  // the implementation cannot be serialized
  std::uint64_t queue_depth = 0;     // writes waiting now
};
PRIMCACHE_API persistent_cache_stats get_persistent_cache_stats();

// The variables read on first use.
inline constexpr const char* persistent_cache_dir_env = "PRIMCACHE_PERSISTENT_CACHE_DIR";
inline constexpr const char* persistent_cache_capacity_env = "PRIMCACHE_PERSISTENT_CACHE_CAPACITY";
inline constexpr const char* persistent_cache_redis_env = "PRIMCACHE_PERSISTENT_CACHE_REDIS";

}  // namespace primcache
