// primcache/persist/directory_store.hpp — the persistent cache as a
// directory: the persistent-cache RFC's layout, crash-safe, shared by
// threads and processes, refusing directories others could plant code in.
//
//   primcache::directory_store_options o;
//   o.path = "/var/cache/primcache";
//   o.capacity_mb = 1024;
//   o.format.library_version = primcache_version_and_build_id;
//   std::unique_ptr<primcache::directory_store> s = primcache::directory_store::open(o);
//   s->put(id, blob);
//   std::optional<std::vector<std::byte>> b = s->get(id);
//   primcache::verify_report r = s->verify(/*fix=*/true);   // what `cache verify` runs
//
// Layout:
//   DIR/size.txt              bytes the entries occupy, in decimal, one line
//   DIR/.lock                 the file lock around size accounting and eviction
//   DIR/.tmp/                 entries being written, and removed ones being deleted
//   DIR/<bucket>/<n>/key.bin  the key's bytes (collisions are told apart by it)
//   DIR/<bucket>/<n>/kernel.bin  the entry (entry.hpp), holding the key again
// <bucket> is the key's XXH3-64 hash (keyhash's key::hash()) in 16 lowercase
// hex digits; <n> is 0, 1, ... — the lowest free number in the bucket.
//
// Contract:
// - Publishing is atomic: both files are written and fsynced in a directory
//   under .tmp, which is renamed into its bucket (never replacing another),
//   and the bucket is fsynced. Readers see a whole entry or none; a process
//   killed while writing leaves at most a directory under .tmp, removed later
//   (by open() and by verify(true)) once its writer is gone, or after an hour
//   when the writer's pid means nothing here (another PID namespace).
// - Reads take no lock: an entry's files are never changed after
//   publication; removal renames the entry under .tmp before deleting it.
// - put(), erase(), eviction, clear() and size.txt are serialized across
//   threads (a mutex) and processes (flock on DIR/.lock). When a put would
//   pass the capacity, the entries with the oldest kernel.bin modification
//   time (their creation) are removed until the new one fits.
// - size.txt is updated under the lock with each change: it grows before an
//   entry is published and shrinks after one is removed, so a process killed
//   in between leaves it too high by that entry, never too low; the next
//   eviction walks the entries and corrects it, as does verify(true).
// - A bad entry (entry.hpp's faults, a missing kernel.bin, key.bin not
//   matching the entry's key, a file that is not a regular one or is larger
//   than any entry, 1 GB) is never returned, nor waited on: get() counts it in
//   corrupt_entries and removes it (unless read-only).
// - Security: open() refuses a directory that is not owned by this process's
//   effective user (or root), or that group or others can write, with a
//   message saying which and why, since the store's contents are loaded as
//   code; and one inside a directory that another user owns, or that group
//   or others can write without the sticky bit (they could put another
//   directory in its place). It resolves symlinks once, and uses the
//   resolved path (path()) from then on. It creates missing directories
//   (and its own) with mode 0700, and its files with 0600.
// - Read-only (options.read_only, or PRIMCACHE_PERSISTENT_CACHE_READONLY=1
//   through readonly_from_env()): nothing is ever written, created, evicted
//   or removed; put() returns read_only, erase() false, clear() throws; a bad
//   entry is counted and skipped. It works on a read-only file system.
//
// Thread-safety: every member may be called from any thread at once.
// Exceptions: open() throws error(permission_denied) for a refused
// directory, error(runtime_error) when it cannot be created or opened;
// clear() as blob_store says; the rest report failures as values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/persist/blob_store.hpp"
#include "primcache/persist/entry.hpp"
#include "primcache/persist/file_ops.hpp"

namespace primcache {

struct directory_store_options {
  std::string path;
  std::uint64_t capacity_mb = 1024;
  bool read_only = false;
  // Library version and fleet key (borrowed: keep it alive as long as the
  // store) of the entries written and accepted.
  entry_format format;
  // The file layer (fault injection in tests); null: system_file_ops().
  std::shared_ptr<file_ops> files;
  // The bucket a key goes to; null: key::hash(). A seam for tests that need
  // collisions.
  std::function<std::uint64_t(std::span<const std::byte>)> bucket_hash;
};

// One bad entry verify() found.
struct verify_problem {
  std::string path;     // DIR/<bucket>/<n>, or the stray file or directory
  std::string message;  // why it is bad
};

struct verify_report {
  std::uint64_t entries = 0;            // entries looked at
  std::uint64_t good = 0;               // of which whole and valid
  std::uint64_t bytes = 0;              // bytes the good entries occupy
  std::uint64_t recorded_bytes = 0;     // what size.txt said
  std::uint64_t stale_temporaries = 0;  // leftovers under .tmp with no live writer
  std::vector<verify_problem> bad;      // entries (and strays) that fail
  bool fixed = false;  // verify(true): bad ones and leftovers removed, size.txt rewritten
  bool ok() const noexcept { return bad.empty(); }
};

// What verify() does besides checking, for the command line.
struct verify_options {
  // Remove bad entries and leftovers, rewrite size.txt (not when read-only).
  bool fix = false;
  // Called after each entry with (entries looked at, entries in the store);
  // with it set, verify() counts the entries first. Both callbacks run on
  // the caller's thread, under the store's lock when fixing: they must not
  // call the store.
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;
  // Called for each good entry with its key and its stored bytes (the entry
  // format, signature included): what `primcache cache export` packs.
  std::function<void(std::span<const std::byte> key, std::span<const std::byte> entry)> on_good;
};

class PRIMCACHE_API directory_store final : public blob_store {
 public:
  // Creates the directory (0700) if missing; checks ownership and mode.
  static std::unique_ptr<directory_store> open(directory_store_options options);
  ~directory_store() override;

  std::optional<std::vector<std::byte>> get(std::span<const std::byte> key) override;
  put_result put(std::span<const std::byte> key, std::span<const std::byte> payload) override;
  bool erase(std::span<const std::byte> key) override;
  std::uint64_t size() const override;
  std::uint64_t capacity() const override;
  void set_capacity(std::uint64_t megabytes) override;
  void clear() override;
  blob_store_stats stats() const override;
  bool read_only() const noexcept override;
  std::string describe() const override;

  // Checks every entry against the store's format (and fleet key). With fix
  // (not when read-only): removes bad entries and leftovers, rewrites size.txt.
  verify_report verify(bool fix);
  verify_report verify(const verify_options& options);

  // The directory, symlinks resolved when the store opened.
  const std::string& path() const noexcept;
  // The library version and fleet key entries are written and checked with.
  const entry_format& format() const noexcept;

 private:
  struct state;
  explicit directory_store(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

// The name of the variable readonly_from_env reads.
inline constexpr const char* persistent_cache_readonly_env = "PRIMCACHE_PERSISTENT_CACHE_READONLY";

// PRIMCACHE_PERSISTENT_CACHE_READONLY as a boolean (0/1, true/false, on/off,
// yes/no); unset: fallback; malformed: reported once on stderr, fallback.
PRIMCACHE_API bool readonly_from_env(bool fallback = false);

}  // namespace primcache
