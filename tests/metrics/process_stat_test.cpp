#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "primcache/metrics/internal/process_stat.hpp"

using primcache::metrics_internal::parse_process_stat;
using primcache::metrics_internal::process_stat;

namespace {

// A line as Linux writes it (fields 1..52): utime 14 = 7, stime 15 = 3,
// starttime 22 = 81153, vsize 23 = 3133440, rss 24 = 379.
const std::string linux_line =
    "17340 (cat) R 17338 17338 15411 0 -1 4194304 98 0 0 0 7 3 0 0 20 0 1 0 81153 3133440 379 "
    "18446744073709551615 93884532277248 93884532297129 140734445889184 0 0 0 0 0 0 0 0 0 17 0 "
    "0 0 0 0 0 93884532313136 93884532314752 93884724539392 140734445889991 140734445890011 "
    "140734445890011 140734445891563 0\n";

// `linux_line` with its command name replaced.
std::string with_command(const std::string& comm) {
  return "17340 (" + comm + linux_line.substr(linux_line.find(')'));
}

// `linux_line` with field `n` (1-based; n >= 3) replaced by `value`.
std::string with_field(int n, const std::string& value) {
  std::string s = linux_line;
  std::size_t begin = s.find(')') + 2;
  for (int i = 3; i < n; ++i) begin = s.find(' ', begin) + 1;
  const std::size_t end = s.find_first_of(" \n", begin);
  return s.replace(begin, end - begin, value);
}

}  // namespace

TEST_CASE("a /proc/self/stat line gives CPU ticks, start ticks, virtual size and resident pages",
          "[metrics][process]") {
  const std::optional<process_stat> s = parse_process_stat(linux_line);
  REQUIRE(s.has_value());
  CHECK(s->utime_ticks == 7);
  CHECK(s->stime_ticks == 3);
  CHECK(s->start_ticks == 81153);
  CHECK(s->vsize_bytes == 3133440);
  CHECK(s->rss_pages == 379);
}

TEST_CASE("a command name with spaces and parentheses does not shift the fields",
          "[metrics][process]") {
  const std::string comm = GENERATE(as<std::string>{}, "a b", "x) R 1 2 3", "((", ")", "");
  INFO(comm);
  const std::optional<process_stat> s = parse_process_stat(with_command(comm));
  REQUIRE(s.has_value());
  CHECK(s->utime_ticks == 7);
  CHECK(s->rss_pages == 379);
}

TEST_CASE("this process's own /proc/self/stat parses", "[metrics][process]") {
  std::ifstream in("/proc/self/stat");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::optional<process_stat> s = parse_process_stat(text);
  REQUIRE(s.has_value());
  CHECK(s->rss_pages > 0);
  CHECK(s->vsize_bytes > 0);
}

TEST_CASE("anything unexpected in /proc/self/stat gives no sample and throws nothing",
          "[metrics][process]") {
  const std::string text = GENERATE(
      as<std::string>{},
      // empty, or no command name
      "", "\n", "17340", "17340 (cat", "17340 cat R 1 2 3",
      // nothing, or too little, after the ')'
      "17340 (cat)", "17340 (cat) ", "17340 (cat)R",
      "17340 (cat) R 17338 17338 15411 0 -1 4194304 98 0 0 0 7 3",
      linux_line.substr(0, linux_line.find(" 3133440")),
      linux_line.substr(0, linux_line.find(" 379 ")),
      // non-numeric, partly numeric, signed or out of range
      with_field(14, "abc"), with_field(15, "3x"), with_field(22, ""), with_field(23, "-1"),
      with_field(24, "-379"), with_field(24, "+379"), with_field(24, "3.5"), with_field(14, "0x10"),
      with_field(14, "99999999999999999999999"), with_field(22, "nan"), with_field(23, "inf"));
  INFO("text: " << text);
  std::optional<process_stat> s;
  CHECK_NOTHROW(s = parse_process_stat(text));
  CHECK_FALSE(s.has_value());
}
