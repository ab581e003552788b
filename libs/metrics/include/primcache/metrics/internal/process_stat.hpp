// primcache/metrics/internal/process_stat.hpp — the fields of
// /proc/<pid>/stat that the process metrics report, parsed from the file's
// text (proc(5)); separate from reading the file so that it can be tested
// with any text.
//
//   std::optional<process_stat> s = parse_process_stat(text);
//   if (s) cpu_seconds = double(s->utime_ticks + s->stime_ticks) / ticks_per_second;
//
// Thread-safety: a function of its argument. Exceptions: none.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache::metrics_internal {

struct process_stat {
  std::uint64_t utime_ticks = 0;  // field 14: user CPU time, in clock ticks
  std::uint64_t stime_ticks = 0;  // field 15: system CPU time, in clock ticks
  std::uint64_t start_ticks = 0;  // field 22: start time after boot, in clock ticks
  std::uint64_t vsize_bytes = 0;  // field 23: virtual memory size
  std::uint64_t rss_pages = 0;    // field 24: resident set size, in pages
};

// The fields of a /proc/<pid>/stat line: "pid (comm) state ppid ...", where
// comm may hold spaces and parentheses (the last ')' ends it). Fields 3 to
// 24 must be there, one space apart; the five above must be unsigned
// decimal integers that fit 64 bits. Anything else gives nullopt.
PRIMCACHE_API std::optional<process_stat> parse_process_stat(std::string_view text) noexcept;

}  // namespace primcache::metrics_internal
