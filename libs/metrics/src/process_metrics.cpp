#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "primcache/metrics/control_collector.hpp"

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
      in >> t;
      return t;
    }
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

}  // namespace

std::vector<prometheus::MetricFamily> collect_process_metrics() {
  std::vector<prometheus::MetricFamily> out;
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // Fields after the command name, which is in parentheses and may hold spaces.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream fields(stat.substr(close + 2));
  std::string f[25];
  for (auto& s : f) fields >> s;
  // f[0] is field 3 (state): utime 14, stime 15, starttime 22, vsize 23, rss 24.
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const double utime = std::stod(f[11]);
  const double stime = std::stod(f[12]);
  const double start = std::stod(f[19]);
  const double vsize = std::stod(f[20]);
  const double rss = std::stod(f[21]);
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
