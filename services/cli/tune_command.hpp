// services/cli/tune_command.hpp — `primcache tune WORKLOAD.json -o TABLE.json`:
// tunes every CPU primitive of a primcached workload file in this process
// (tuning.hpp), with a progress bar on stderr (candidates tried, best time
// so far), prints a table of default against tuned time and speed-up per
// primitive, and writes the tune table (merging what the file holds,
// atomically).
//
//   primcache tune configs/workloads/default.json -o tune.json [--max-nconfigs N]
//
// Exit status: 0 done; 1 the workload cannot be read or parsed, or the table
// cannot be written (the message says which); 2 a usage error.
// Thread-safety: run once per process. Exceptions: none (statuses).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace primcache::cli {

int run_tune_command(const std::vector<std::string>& args, std::FILE* out, std::FILE* err);

}  // namespace primcache::cli
