// primcache/persist/blob_store.hpp — the interface of a persistent store of
// opaque byte blobs under opaque byte keys (the persistent kernel cache).
//
// A store keeps each blob in the entry format (entry.hpp): whatever get()
// returns was checked — whole, same format and library version, same key,
// checksum and (with a fleet key) signature. A bad entry is never returned:
// it is counted (stats().corrupt_entries) and, where the store may write,
// removed.
//
//   std::unique_ptr<primcache::blob_store> s = primcache::directory_store::open(options);
//   if (auto blob = s->get(id)) return load(*blob);       // hit
//   auto code = compile();
//   primcache::put_result r = s->put(id, code);            // miss: write it
//   if (r.status == primcache::put_status::failed) log(r.message);
//
// Units: size() is in bytes; capacity() and set_capacity() are in MB
// (2^20 bytes), as the persistent cache's capacity knob is given.
//
// Contract: expected failures are values, never exceptions: get() turns a
// missing, unreadable or bad entry into nullopt (counted), put() reports a
// refused or failed write in its put_result (counted) and leaves nothing
// half-written. Broken contracts and operator actions that cannot be done
// (clear() on a read-only store) throw primcache::error.
//
// Thread-safety: every member may be called from any thread at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/export.hpp"

namespace primcache {

// Counters since the store object was made (per process), except `bytes`,
// which is the store's current size.
struct blob_store_stats {
  std::uint64_t hits = 0;             // get() found a good entry
  std::uint64_t misses = 0;           // get() found none (or only a bad one)
  std::uint64_t writes = 0;           // put() stored an entry
  std::uint64_t bytes = 0;            // current size in bytes (size())
  std::uint64_t bytes_read = 0;       // payload bytes get() returned
  std::uint64_t bytes_written = 0;    // entry bytes put() stored
  std::uint64_t evictions = 0;        // entries removed to respect the capacity
  std::uint64_t corrupt_entries = 0;  // bad entries found (and removed when writable)
  std::uint64_t errors = 0;           // I/O failures (reads and writes)
  std::uint64_t refusals = 0;         // puts refused: read-only, larger than the capacity
  // Remote stores (redis_store, and tiered_store for its remote tier); zero
  // for the directory store.
  std::uint64_t remote_hits = 0;    // tiered: gets the remote tier answered (local missed)
  std::uint64_t remote_errors = 0;  // failed remote calls: refused, reset, timed out, error replies
  std::uint64_t timeouts = 0;       // of which ran out of time (connect or command)
  std::uint64_t breaker_state =
      0;  // circuit_breaker.hpp's breaker_state: 0 closed, 1 open, 2 half-open
  std::uint64_t breaker_opens = 0;       // times the breaker opened
  std::uint64_t breaker_rejections = 0;  // calls not made because the breaker was open
  std::uint64_t dropped_writes = 0;      // tiered: background writes dropped, the queue being full
};

// One server of a sharded store (sharded_redis_store), as stats() of the
// shard alone: what control shows per shard (registration.hpp).
struct blob_store_shard {
  std::string name;  // the shard's describe(): "redis HOST:PORT/PREFIX"
  blob_store_stats stats;
};

enum class put_status : int {
  stored = 0,  // the entry is in the store
  exists,      // an entry for this key was already there; nothing written
  read_only,   // the store is read-only; nothing written
  too_large,   // the entry alone exceeds the capacity (or the store's largest entry); nothing
               // written
  failed,      // an I/O error (disk full, ...); nothing written, counted in errors
};

// "stored", "exists", "read_only", "too_large", "failed".
PRIMCACHE_API std::string_view to_string(put_status s) noexcept;

struct put_result {
  put_status status = put_status::stored;
  // Empty for stored and exists; the reason otherwise.
  std::string message;
};

class PRIMCACHE_API blob_store {
 public:
  virtual ~blob_store();

  // The payload stored under `key`, or nullopt.
  virtual std::optional<std::vector<std::byte>> get(std::span<const std::byte> key) = 0;
  // Stores `payload` under `key` unless an entry for it exists; evicts the
  // oldest entries first if the store would pass its capacity.
  virtual put_result put(std::span<const std::byte> key, std::span<const std::byte> payload) = 0;
  // Removes the entry for `key`; false when there was none (or the store is
  // read-only).
  virtual bool erase(std::span<const std::byte> key) = 0;
  // Bytes the entries occupy (their files, for the directory store).
  virtual std::uint64_t size() const = 0;
  // MB; unlimited_capacity from control (2^64 - 1) would mean no limit.
  virtual std::uint64_t capacity() const = 0;
  // Evicts at once, oldest first, down to the new capacity (unless read-only).
  virtual void set_capacity(std::uint64_t megabytes) = 0;
  // Drops every entry. Throws error(permission_denied) when read-only.
  virtual void clear() = 0;
  virtual blob_store_stats stats() const = 0;
  // True when the store is never written.
  virtual bool read_only() const noexcept = 0;
  // What the store is, for messages and the console: "directory /var/cache/x".
  virtual std::string describe() const = 0;
  // The shards of a sharded store, in configuration order (a tiered store:
  // its remote tier's); empty for a store that is not sharded.
  virtual std::vector<blob_store_shard> shards() const { return {}; }
};

}  // namespace primcache
