// primcache/autotune/tune_table.hpp — the lookup table of measured winners:
// for one problem (a primitive's descriptor key without its configuration)
// on one device, which implementation and configuration ran fastest, and how
// fast. Kept in memory, persisted as JSON, merged between processes.
//
//   primcache::tune_table table;
//   auto loaded = table.load_file("tune.json", "0.1.0", "cpu:avx512_core");
//   if (!loaded) report(loaded.why().message);      // corrupt: reported, table unchanged
//   if (auto e = table.find("cpu:avx512_core", pd.problem_key())) use(e->config);
//   table.put("cpu:avx512_core", pd.problem_key(),
//             {.implementation = "jit:matmul", .config = R"({"mr":6})", .time_ns = 812.0});
//   if (auto ok = table.save_file("tune.json", "0.1.0"); !ok) report(ok.why().message);
//
// Entries are keyed by (device, key bytes). The configuration is opaque
// here: the backend that made it serializes and validates it (the table
// never interprets it).
//
// Files (format_version 1):
//   {"format": "primcache-tune-table", "format_version": 1,
//    "library_version": "0.1.0",
//    "entries": [{"device": "cpu:avx512_core", "key": "<hex of the key bytes>",
//                 "implementation": "jit:matmul", "config": "{\"mr\":6,...}",
//                 "time_ns": 812.0, "default_time_ns": 990.5,
//                 "warm_time_ns": 401.0, "warm_default_time_ns": 415.5,
//                 "description": "matmul 64x64x64"}]}
// (default_time_ns, warm_time_ns, warm_default_time_ns and description are
// optional; merging compares time_ns alone.)
// A file of another library version is ignored as a whole (configurations
// may mean something else there) and reported in the load report, not as
// a failure. Entries of another device are skipped when the loader names
// its device. Anything else that is not exactly this form — not JSON, a
// missing or mistyped field, a key that is not hex, a time that is not a
// positive finite number, a (device, key) twice — makes the file corrupt:
// load_file returns corrupt_data naming the entry and leaves the table as
// it was. Nothing in this header throws on bad input.
//
// Only a regular file of at most max_file_bytes is read (a FIFO, a device
// or a larger file is refused with runtime_error, without reading it).
//
// Writes are atomic: save_file writes a temporary file beside the target
// (PATH.tmp.<16 random hex digits>, created exclusively: never another
// process's, even one of the same pid in another container), fsyncs it,
// renames it over the target and fsyncs the directory, so a reader (or a
// crash) sees the old file or the new one, never a mix. By default
// save_file first merges the entries already in the target file (same
// library version, faster wins), holding an exclusive flock on PATH.lock
// (created 0600 beside the target, never through a symbolic link, left in
// place) from that read to the rename: two processes or threads sharing
// one table path, or tables of several devices in one file, lose nothing
// when they save at once.
//
// Merging keeps, for each (device, key), the entry with the smaller
// time_ns (ties keep the entry already present).
//
// Thread-safety: every member function may be called from any thread at
// once (one shared_mutex per table; none is held during file I/O except to
// copy the entries). Exceptions: only std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/base/result.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/keyhash/key.hpp"

namespace primcache {

// One measured winner.
struct tune_entry {
  std::string implementation;  // the registered implementation name
  std::string config;          // the configuration, serialized by its backend
  double time_ns = 0;          // the winner's minimum time over its runs
  double default_time_ns = 0;  // the default configuration's, same measurement; 0 if unknown
  std::string description;     // what the problem is, for people reading the file
  // The winner's and the default's minimums in the tuner's warm
  // confirmation (tuner.hpp); 0 when none ran (the default stood cold).
  double warm_time_ns = 0;
  double warm_default_time_ns = 0;
  friend bool operator==(const tune_entry&, const tune_entry&) = default;
};

// One (device, key) -> entry row, as rows() lists them.
struct tune_row {
  std::string device;
  std::vector<std::byte> key;
  tune_entry entry;
};

// What load_file / merge_json took from a file.
struct tune_load_report {
  std::size_t entries = 0;       // entries in the file
  std::size_t taken = 0;         // entries added or that replaced a slower one
  std::size_t kept_faster = 0;   // entries the table already had faster (or as fast)
  std::size_t other_device = 0;  // skipped: another device than the loader's
  bool other_version = false;    // the whole file is of another library version: nothing taken
  std::string file_version;      // the file's library_version
};

class PRIMCACHE_API tune_table {
 public:
  static constexpr int format_version = 1;
  // The largest file load_file reads and save_file writes: 64 MiB, some
  // 150,000 entries.
  static constexpr std::size_t max_file_bytes = std::size_t{64} << 20;

  tune_table() = default;
  tune_table(const tune_table&) = delete;
  tune_table& operator=(const tune_table&) = delete;

  // The entry for `key` on `device`, or nullopt.
  std::optional<tune_entry> find(std::string_view device, const key& k) const
      PRIMCACHE_EXCLUDES(mu_);
  std::optional<tune_entry> find(std::string_view device,
                                 std::span<const std::byte> key_bytes) const
      PRIMCACHE_EXCLUDES(mu_);
  // Sets the entry, replacing any (a fresh measurement wins over an old one).
  void put(std::string_view device, const key& k, tune_entry entry) PRIMCACHE_EXCLUDES(mu_);
  void put(std::string_view device, std::span<const std::byte> key_bytes, tune_entry entry)
      PRIMCACHE_EXCLUDES(mu_);
  // Sets the entry unless the table has one at least as fast; true if set.
  bool put_if_faster(std::string_view device, std::span<const std::byte> key_bytes,
                     tune_entry entry) PRIMCACHE_EXCLUDES(mu_);
  // Takes every entry of `other` that is new or faster; returns how many.
  // Merging a table into itself changes nothing.
  std::size_t merge(const tune_table& other) PRIMCACHE_EXCLUDES(mu_);
  bool erase(std::string_view device, std::span<const std::byte> key_bytes) PRIMCACHE_EXCLUDES(mu_);
  std::size_t size() const PRIMCACHE_EXCLUDES(mu_);
  void clear() PRIMCACHE_EXCLUDES(mu_);
  // Every entry, sorted by device then key bytes (a stable order for files).
  std::vector<tune_row> rows() const PRIMCACHE_EXCLUDES(mu_);

  // The table as a file's text (see above), entries in rows() order.
  std::string to_json(std::string_view library_version) const PRIMCACHE_EXCLUDES(mu_);
  // Merges a file's text into the table (faster wins). `device` empty:
  // entries of every device; else only that device's. corrupt_data (nothing
  // taken) for anything but the documented form.
  result<tune_load_report> merge_json(std::string_view text, std::string_view library_version,
                                      std::string_view device = {}) PRIMCACHE_EXCLUDES(mu_);
  // merge_json of a file's contents. not_found when the file does not
  // exist, runtime_error when it cannot be read or is not a regular file
  // of at most max_file_bytes, else what merge_json says; messages name
  // the path.
  result<tune_load_report> load_file(const std::string& path, std::string_view library_version,
                                     std::string_view device = {}) PRIMCACHE_EXCLUDES(mu_);
  // Writes the table to `path` atomically (see above), first merging the
  // entries of the file already there when `merge_existing` (a missing,
  // corrupt, unreadable or other-version file is replaced). Returns how
  // many entries the file holds; runtime_error naming the path and the
  // system's reason when it cannot be locked or written, or the text would
  // exceed max_file_bytes (the old file is left as it was). Waits while
  // another save of the path holds its lock.
  result<std::size_t> save_file(const std::string& path, std::string_view library_version,
                                bool merge_existing = true) const PRIMCACHE_EXCLUDES(mu_);

 private:
  // device, a NUL, then the key bytes: one flat map key.
  static std::string slot(std::string_view device, std::span<const std::byte> key_bytes);
  bool put_if_faster_locked(std::string slot, tune_entry entry) PRIMCACHE_REQUIRES(mu_);

  mutable shared_mutex mu_;
  std::unordered_map<std::string, tune_entry> entries_ PRIMCACHE_GUARDED_BY(mu_);
};

}  // namespace primcache
