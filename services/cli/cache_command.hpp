// primcache cache ... — the command line for a persistent cache directory
// (docs/persist.md), as opposed to the rest of `primcache`, which talks to a
// running primcached:
//
//   primcache cache stats DIR             entries, bytes, bad entries, leftovers
//   primcache cache verify DIR [--fix]    check every entry; --fix removes bad ones
//   primcache cache clear DIR             drop every entry
//   primcache cache export DIR FILE       pack every good entry into one archive
//   primcache cache import FILE DIR       check the whole archive, then add its entries
//
// Options: --library-version V (default: this build's version+build identity,
// what its runtime writes), --capacity MB (import; default unlimited),
// --progress / --no-progress (default: a progress bar on stderr when it is
// a terminal). Entries are checked with the fleet key of
// PRIMCACHE_PERSISTENT_CACHE_KEY_FILE when it is set.
//
// Exit status: 0 done; 1 a failure (missing or refused directory, bad
// archive, I/O error) or, for verify without --fix, bad entries found; 2 a
// usage error. Messages are one line on stderr, "primcache: ...".
//
// Thread-safety: run from main(), once. Exceptions: none escape.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace primcache::cli {

// `args` are the words after "cache". Writes results to `out`, errors and the
// progress bar to `err`; returns the exit status.
int run_cache_command(const std::vector<std::string>& args, std::FILE* out, std::FILE* err);

}  // namespace primcache::cli
