// primcache/persist/archive.hpp — a directory store's entries packed into
// one file, to ship a warmed cache to a fleet (`primcache cache export` and
// `import`): the archive is checked as a whole and entry by entry before
// anything from it is published.
//
//   primcache::archive_report r = primcache::export_archive(*store, "warm.pcar");
//   // ... copy warm.pcar to another host ...
//   primcache::import_archive("warm.pcar", *other_store);   // throws if anything is off
//
// Format (version 1, integers little-endian):
//   magic        8 bytes  "PCARCHV\n"
//   version      u32      archive_format_version
//   flags        u32      0
//   entries, each:
//     key        u32 length, then the bytes
//     entry      u64 length, then the bytes: the stored entry (entry.hpp),
//                with its own checksum and, when signed, its signature
//   trailer:
//     magic      8 bytes  "PCAREND\n"
//     count      u64      the number of entries
//     checksum   16 bytes XXH3-128 of every byte before it, high half first
//
// Contract:
// - export_archive packs every good entry (bad ones are left out and listed
//   in the report), writing beside the target, fsyncing and renaming, so a
//   reader never sees half an archive. The store may be read-only.
// - import_archive first reads the whole archive: structure, trailer,
//   checksum, and every entry decoded against the store's format (library
//   version, fleet key) and its key. Any problem: error(corrupt_data) naming
//   the entry and the reason, and nothing is published. Then it reads the
//   archive again, checking each entry again, and puts it; an entry the
//   store already has counts as already_present. A put that fails (disk
//   full) stops the import with error(runtime_error); what was put stays
//   (each entry is whole and valid).
// - Progress, if given, is called with (done, total) entries as the work
//   goes (import: through both passes, total = 2 × count).
//
// Thread-safety: as the store's members; one archive file per call.
// Exceptions: error(runtime_error) for I/O failures (the path and strerror),
// error(corrupt_data) for a bad archive, error(permission_denied) for an
// import into a read-only store.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "primcache/base/export.hpp"
#include "primcache/persist/directory_store.hpp"

namespace primcache {

inline constexpr std::uint32_t archive_format_version = 1;

struct archive_report {
  std::uint64_t entries = 0;            // packed (export), or in the archive (import)
  std::uint64_t bytes = 0;              // their keys' and entries' bytes
  std::uint64_t stored = 0;             // import: put into the store
  std::uint64_t already_present = 0;    // import: the store had the key already
  std::vector<verify_problem> skipped;  // export: bad entries left out
};

using archive_progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

PRIMCACHE_API archive_report export_archive(directory_store& store, const std::string& file,
                                            const archive_progress& progress = {});

PRIMCACHE_API archive_report import_archive(const std::string& file, directory_store& store,
                                            const archive_progress& progress = {});

}  // namespace primcache
