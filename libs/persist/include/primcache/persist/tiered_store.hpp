// primcache/persist/tiered_store.hpp — a local store in front of a remote
// one: the persistent cache of a fleet member, reading its own directory
// first, the fleet's Redis second, and writing both.
//
//   auto local = primcache::directory_store::open(dir_options);
//   auto remote = primcache::redis_store::open(primcache::parse_redis_url(url));
//   std::unique_ptr<primcache::tiered_store> s =
//       primcache::tiered_store::open(std::move(local), std::move(remote));
//   s->get(id);    // local hit; else remote hit (copied into local); else miss
//   s->put(id, b); // local now; remote in the background
//   s->flush();    // waits for the background writes (tests, shutdown)
//
// Contract:
// - get(): the local store, then the remote one. A remote hit is returned at
//   once and copied into the local store by the background writer, so the
//   next get (and the next process on this host) reads it locally.
// - put(): the local put, whose put_result is returned; unless the local
//   store already had the key (`exists`), the entry is also queued for the
//   remote store. The caller never waits for the remote store: the
//   background writer does. When the queue holds max_queued_writes entries
//   or max_queued_bytes bytes, the write is dropped and counted
//   (dropped_writes) — the remote tier is a cache, losing a write costs one
//   compilation elsewhere.
// - erase() and clear() reach both stores (clear() on a shared Redis drops
//   the entries of the whole fleet under its prefix) and the queue: the
//   writes queued for the key (for clear(), all of them) are discarded and
//   one in progress is waited for, so nothing erased comes back from the
//   background writer (say the local copy of a remote hit that the caller
//   then found bad and erased). size(), capacity(),
//   set_capacity() and read_only() are the local store's.
// - shards() is the remote store's (per-shard stats of a sharded Redis tier).
// - stats(): hits (either tier), misses (both missed), remote_hits,
//   writes/bytes/evictions/refusals/bytes_written of the local store,
//   corrupt_entries of both, errors of both, and the remote store's
//   remote_errors, timeouts and breaker; dropped_writes of the queue.
// - The destructor finishes the queued writes (each bounded by the remote
//   store's timeouts, or skipped at once while its breaker is open).
//
// Thread-safety: every member may be called from any thread at once; one
// background thread per store. A forked child must open its own store.
// Exceptions: open() throws error(invalid_arguments) for a null store;
// clear() throws what the stores' clear() throws; the rest report failures
// as values.
#pragma once

#include <cstddef>
#include <memory>

#include "primcache/base/export.hpp"
#include "primcache/persist/blob_store.hpp"

namespace primcache {

struct tiered_store_options {
  // Bounds of the background writer's queue.
  std::size_t max_queued_writes = 64;
  std::size_t max_queued_bytes = std::size_t{64} << 20;
};

class PRIMCACHE_API tiered_store final : public blob_store {
 public:
  static std::unique_ptr<tiered_store> open(std::unique_ptr<blob_store> local,
                                            std::unique_ptr<blob_store> remote,
                                            tiered_store_options options = {});
  ~tiered_store() override;

  std::optional<std::vector<std::byte>> get(std::span<const std::byte> key) override;
  put_result put(std::span<const std::byte> key, std::span<const std::byte> payload) override;
  bool erase(std::span<const std::byte> key) override;
  std::uint64_t size() const override;
  std::uint64_t capacity() const override;
  void set_capacity(std::uint64_t megabytes) override;
  void clear() override;
  blob_store_stats stats() const override;
  bool read_only() const noexcept override;
  // "directory /x, then redis h:p/prefix".
  std::string describe() const override;
  // The remote store's shards (a sharded_redis_store's; else none).
  std::vector<blob_store_shard> shards() const override;

  // Returns once every write queued before the call is done (or failed).
  void flush();
  // Writes waiting in the queue now.
  std::size_t queued_writes() const;

  blob_store& local() noexcept;
  blob_store& remote() noexcept;

 private:
  struct state;
  explicit tiered_store(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

}  // namespace primcache
