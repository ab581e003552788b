#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "primcache/metrics/control_collector.hpp"
#include "primcache/metrics/internal/process_stat.hpp"

namespace primcache {
namespace {

prometheus::MetricFamily one(const char* name, const char* help, prometheus::MetricType type,
                             double value) {
  prometheus::MetricFamily f{name, help, type, {}};
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(m);
  return f;
}

// Seconds since the epoch at boot, from /proc/stat's btime; -1 when unknown.
double boot_time() {
  std::ifstream in("/proc/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      double t = -1;
      return in >> t ? t : -1;
    }
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

}  // namespace

namespace metrics_internal {
namespace {

// `token` as an unsigned decimal integer, all of it (no sign, no blank).
bool parse_u64(std::string_view token, std::uint64_t& out) noexcept {
  const char* end = token.data() + token.size();
  const auto [ptr, ec] = std::from_chars(token.data(), end, out);
  return ec == std::errc() && ptr == end && !token.empty();
}

}  // namespace

std::optional<process_stat> parse_process_stat(std::string_view text) noexcept {
  // The command name is in parentheses and may hold spaces and ')': the
  // fields start after the last ')', one space apart.
  const std::size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  // fields[i] is field i + 3: state, ppid, ..., rss (24).
  std::string_view fields[22];
  for (std::string_view& field : fields) {
    if (rest.empty() || rest.front() != ' ') return std::nullopt;
    rest.remove_prefix(1);
    const std::size_t end = std::min(rest.find_first_of(" \n"), rest.size());
    field = rest.substr(0, end);
    if (field.empty()) return std::nullopt;
    rest.remove_prefix(end);
  }
  process_stat out;
  if (!parse_u64(fields[14 - 3], out.utime_ticks) || !parse_u64(fields[15 - 3], out.stime_ticks) ||
      !parse_u64(fields[22 - 3], out.start_ticks) || !parse_u64(fields[23 - 3], out.vsize_bytes) ||
      !parse_u64(fields[24 - 3], out.rss_pages)) {
    return std::nullopt;
  }
  return out;
}

}  // namespace metrics_internal

std::vector<prometheus::MetricFamily> collect_process_metrics() {
  std::vector<prometheus::MetricFamily> out;
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // Anything unexpected there (or in sysconf) gives no process samples: the
  // rest of the scrape goes on.
  const std::optional<metrics_internal::process_stat> ps =
      metrics_internal::parse_process_stat(stat);
  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (!ps || ticks_per_second <= 0 || page_size <= 0) return out;
  const double ticks = static_cast<double>(ticks_per_second);
  const double page = static_cast<double>(page_size);
  const double utime = static_cast<double>(ps->utime_ticks);
  const double stime = static_cast<double>(ps->stime_ticks);
  const double start = static_cast<double>(ps->start_ticks);
  const double vsize = static_cast<double>(ps->vsize_bytes);
  const double rss = static_cast<double>(ps->rss_pages);
  out.push_back(one("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                    prometheus::MetricType::Counter, (utime + stime) / ticks));
  out.push_back(one("process_resident_memory_bytes", "Resident memory size in bytes.",
                    prometheus::MetricType::Gauge, rss * page));
  out.push_back(one("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                    prometheus::MetricType::Gauge, vsize));
  if (const double boot = boot_time(); boot >= 0) {
    out.push_back(one("process_start_time_seconds",
                      "Start time of the process since unix epoch in seconds.",
                      prometheus::MetricType::Gauge, boot + start / ticks));
  }
  if (DIR* d = opendir("/proc/self/fd")) {
    double n = 0;
    while (const dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
    out.push_back(one("process_open_fds", "Number of open file descriptors.",
                      prometheus::MetricType::Gauge, n - 1));  // less the one reading the dir
  }
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    out.push_back(one("process_max_fds", "Maximum number of open file descriptors.",
                      prometheus::MetricType::Gauge, static_cast<double>(lim.rlim_cur)));
  }
  return out;
}

}  // namespace primcache
