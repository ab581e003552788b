// services/primcached/input_file.hpp — reading the files primcached is
// given (its config, its workload, the workload's graph files) whole, and
// only those that can be read whole: a regular file of at most
// max_input_file_bytes.
//
//   std::string text = primcache::primcached::read_input_file(
//       "w.json", "cannot read w.json");
//
// Anything else is refused before its text is read: a directory (which
// would read as empty text), a character device such as /dev/zero or a FIFO
// (which would be read until memory runs out, or wait for a writer), a file
// over the limit; a file that grows past the limit while it is read is
// refused too (no more than the limit and one byte is ever read).
//
// Thread-safety: a free function over its arguments. Exceptions:
// primcache::error whose message is `cannot_read` alone when the file cannot
// be opened ("cannot read w.json"; with open_reason, and why: "cannot read
// w.json: No such file or directory"), else `cannot_read` and why ("cannot read
// /dev/zero: a character device, not a regular file"); codes: not_found (it
// cannot be opened, or is not a regular file), permission_denied (larger than
// the limit), runtime_error (a read that failed).
#pragma once

#include <cstddef>
#include <string>

namespace primcache::primcached {

// The largest config, workload or graph file primcached reads (docs/primcached.md).
inline constexpr std::size_t max_input_file_bytes = std::size_t{16} << 20;

std::string read_input_file(const std::string& path, const std::string& cannot_read,
                            std::size_t max_bytes = max_input_file_bytes, bool open_reason = false);

}  // namespace primcache::primcached
