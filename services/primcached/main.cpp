// primcached — the primcache daemon: applies cache capacities from its
// configuration, runs a workload of primitives on N threads through the
// primitive cache (and graphs, each by one executor the threads share),
// serves the admin API and console, prints a summary line every few
// seconds, and stops cleanly on SIGINT or SIGTERM; in tune mode its
// primitives tune on their first execution and the tune table is written at
// stop. At stop it names each entry that failed, and exits 3 when one failed
// every time it ran (docs/primcached.md).
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "config.hpp"
#include "default_paths.hpp"
#include "embedded_defaults.hpp"
#include "input_file.hpp"
#include "primcache/admin/admin_server.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/runtime/runtime.hpp"
#include "runner.hpp"
#include "token_file.hpp"
#include "tune_mode.hpp"
#include "workload.hpp"

namespace {

using namespace primcache;
using namespace primcache::primcached;
using clock_type = std::chrono::steady_clock;

constexpr std::string_view usage =
    "usage: primcached [--config FILE] [--workload FILE] [--admin HOST:PORT]\n"
    "                  [--token-file PATH] [--threads N] [--duration SECONDS]\n"
    "                  [--tune | --no-tune] [--tune-table PATH] [--tune-max-nconfigs N]\n"
    "With no arguments: the embedded configs/primcached.json and configs/workloads/default.json.\n";

// Exit statuses (docs/primcached.md, "Exit status"). 1 is any other
// failure, 2 a command line, config or workload refused while loading.
constexpr int exit_ok = 0;
constexpr int exit_failed = 1;
constexpr int exit_refused = 2;
// The workload ran, and an entry of it failed every time it ran: a script
// that runs primcached as a smoke test must not read that as success.
constexpr int exit_entry_never_succeeded = 3;

struct command_line {
  std::optional<std::string> config, workload, admin, token_file;
  std::optional<int> threads;
  std::optional<double> duration;
  tune_flags tune;
};

struct usage_error {
  std::string message;
};

command_line parse_command_line(int argc, char** argv) {
  command_line cl;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage.data(), stdout);
      std::exit(exit_ok);
    }
    // Switches: no value.
    if (arg == "--tune" || arg == "--no-tune") {
      cl.tune.enabled = arg == "--tune";
      continue;
    }
    std::string value;
    const std::size_t eq = arg.find('=');
    if (arg.starts_with("--") && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (arg.starts_with("--") && i + 1 < argc) {
      value = argv[++i];
    } else if (arg.starts_with("--")) {
      throw usage_error{arg + ": missing value"};
    } else {
      throw usage_error{"unexpected argument " + arg};
    }
    if (arg == "--tune" || arg == "--no-tune") {
      throw usage_error{arg + " takes no value"};
    } else if (arg == "--config") {
      cl.config = value;
    } else if (arg == "--workload") {
      cl.workload = value;
    } else if (arg == "--admin") {
      std::string host;
      std::uint16_t port = 0;
      if (!services::parse_host_port(value, host, port)) {
        throw usage_error{"--admin " + value + ": expected HOST:PORT (port 0: any free port)"};
      }
      if (!services::is_ip_address(host)) {
        throw usage_error{"--admin " + value + ": '" + host +
                          "' is not an IP address (such as 127.0.0.1 or ::1; "
                          "primcached resolves no names)"};
      }
      cl.admin = value;
    } else if (arg == "--token-file") {
      if (value.empty()) throw usage_error{"--token-file: expected a path"};
      cl.token_file = value;
    } else if (arg == "--threads") {
      char* end = nullptr;
      const long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 1 || n > 1024) {
        throw usage_error{"--threads " + value + ": expected an integer in [1, 1024]"};
      }
      cl.threads = static_cast<int>(n);
    } else if (arg == "--duration") {
      char* end = nullptr;
      const double s = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(s > 0) || s > 1e9) {
        throw usage_error{"--duration " + value +
                          ": expected a number of seconds, > 0 and at most 1e9"};
      }
      cl.duration = s;
    } else if (arg == "--tune-table") {
      if (value.empty()) throw usage_error{"--tune-table: expected a path"};
      cl.tune.table = value;
    } else if (arg == "--tune-max-nconfigs") {
      char* end = nullptr;
      const long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 1 || n > 1000) {
        throw usage_error{"--tune-max-nconfigs " + value + ": expected an integer in [1, 1000]"};
      }
      cl.tune.max_nconfigs = static_cast<std::size_t>(n);
    } else {
      throw usage_error{"unknown option " + arg};
    }
  }
  return cl;
}

// A config or workload file: a regular file of at most 16 MiB (input_file.hpp).
std::string read_file(const std::string& path) {
  return read_input_file(path, "cannot read " + path);
}

std::string dir_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The primitive cache's counters, read through control as an operator would.
cache_info primitive_cache_info() {
  return control().find_cache("primitive").info();
}

// The transforms the workload's graphs have run, over all of them.
struct graph_totals {
  std::uint64_t transforms = 0, bytes = 0;
};
graph_totals graph_totals_of(const workload& w) {
  graph_totals t;
  for (const graph_entry& g : w.graphs) {
    const executor_stats s = g.exec->stats();
    t.transforms += s.transforms_executed;
    t.bytes += s.bytes_transformed;
  }
  return t;
}

// What a summary line reports: one interval's, or the whole run's.
struct summary_window {
  clock_type::time_point since;
  cache_counters counters_since;
  std::uint64_t executions = 0, creations = 0, failures = 0;
  std::vector<double> creation_ms;  // a uniform sample of at most 100000
  std::uint64_t samples_seen = 0;   // creations offered to creation_ms
  std::uint64_t graph_runs = 0;
  graph_totals graphs_since;  // the graphs' transforms at `since`
};

// Adds creation samples to a window, keeping at most `cap` (a uniform
// reservoir) so that neither a long run nor a long interval grows without
// bound.
void add_samples(summary_window& w, const std::vector<double>& samples, std::mt19937_64& rng) {
  constexpr std::size_t cap = 100000;
  for (double v : samples) offer_sample(w.creation_ms, w.samples_seen, cap, v, rng);
}

void print_summary(summary_window& w, const char* label, const workload& wl) {
  const clock_type::time_point now = clock_type::now();
  const double seconds = std::chrono::duration<double>(now - w.since).count();
  const cache_info info = primitive_cache_info();
  const std::uint64_t hits = info.stats.hits - w.counters_since.hits;
  const std::uint64_t misses = info.stats.misses - w.counters_since.misses;
  const std::uint64_t waits = info.stats.waits - w.counters_since.waits;
  const std::uint64_t evictions = info.stats.evictions - w.counters_since.evictions;
  const std::uint64_t lookups = hits + misses + waits;
  char hit_rate[32];
  if (lookups == 0) {
    std::snprintf(hit_rate, sizeof hit_rate, "-");
  } else {
    std::snprintf(hit_rate, sizeof hit_rate, "%.1f%%",
                  100.0 * static_cast<double>(hits) / static_cast<double>(lookups));
  }
  const double p50 = quantile(w.creation_ms, 0.50);
  const double p99 = quantile(w.creation_ms, 0.99);
  // ", N failures" and the graphs' figures, after the primitives'.
  std::string tail = w.failures ? ", " + std::to_string(w.failures) + " failures" : std::string();
  if (!wl.graphs.empty()) {
    const graph_totals now_totals = graph_totals_of(wl);
    char text[160];
    std::snprintf(
        text, sizeof text, "; graphs %.1f runs/s, %llu transforms (%.1f MB)",
        static_cast<double>(w.graph_runs) / seconds,
        static_cast<unsigned long long>(now_totals.transforms - w.graphs_since.transforms),
        static_cast<double>(now_totals.bytes - w.graphs_since.bytes) / 1e6);
    tail += text;
  }
  std::printf(
      "primcached: %s %.1fs: %.1f executions/s, %.1f creations/s, hit rate %s "
      "(%llu hits, %llu misses, %llu evictions; primitive cache %llu/%llu), "
      "creation p50 %.3f ms p99 %.3f ms%s\n",
      label, seconds, static_cast<double>(w.executions) / seconds,
      static_cast<double>(w.creations) / seconds, hit_rate, static_cast<unsigned long long>(hits),
      static_cast<unsigned long long>(misses), static_cast<unsigned long long>(evictions),
      static_cast<unsigned long long>(info.size), static_cast<unsigned long long>(info.capacity),
      p50, p99, tail.c_str());
  std::fflush(stdout);
}

// Prints, on stderr, each entry that failed: how often, and whether it ever
// succeeded. Returns how many failed every time they ran.
std::size_t report_entry_failures(const std::vector<entry_outcome>& outcomes) {
  std::size_t never_succeeded = 0;
  for (const entry_outcome& o : outcomes) {
    if (o.failed == 0) continue;
    const auto failed = static_cast<unsigned long long>(o.failed);
    const auto runs = static_cast<unsigned long long>(o.failed + o.succeeded);
    if (o.never_succeeded()) {
      ++never_succeeded;
      std::fprintf(stderr, "primcached: %s failed every time it ran (%llu of %llu runs)\n",
                   o.label.c_str(), failed, runs);
    } else {
      std::fprintf(stderr, "primcached: %s failed %llu of its %llu runs\n", o.label.c_str(), failed,
                   runs);
    }
  }
  if (never_succeeded > 0) {
    std::fprintf(stderr, "primcached: %zu workload %s every time it ran: exit status %d\n",
                 never_succeeded, never_succeeded == 1 ? "entry failed" : "entries failed",
                 exit_entry_never_succeeded);
  }
  return never_succeeded;
}

int run(int argc, char** argv, int signal_fd) {
  const command_line cl = parse_command_line(argc, argv);

  daemon_config config = cl.config
                             ? load_config(read_file(*cl.config), *cl.config, dir_of(*cl.config))
                             : load_config(embedded_config(), "primcached.json (embedded)", "");
  if (cl.threads) config.threads = *cl.threads;
  if (cl.admin) services::parse_host_port(*cl.admin, config.admin_address, config.admin_port);
  if (cl.token_file) config.token_file = *cl.token_file;
  if (config.token_file.empty()) config.token_file = services::default_token_file();

  // Before the workload loads: its primitive descriptors (built while
  // loading, and cached) choose their configurations from the tune table.
  tune_session tuning(resolve_tune_settings(cl.tune, config), stdout, stderr);

  const std::string workload_path = cl.workload ? *cl.workload : config.workload;
  const workload w =
      workload_path.empty()
          ? load_workload(embedded_workload(), "default.json (embedded)")
          : load_workload(read_file(workload_path), workload_path, dir_of(workload_path));

  apply_capacities(config);
  // Before the workload's first creation, so its misses read the store.
  if (const std::string refused = attach_persistent_cache(config); !refused.empty()) {
    std::fprintf(stderr, "primcached: running without the persistent cache: %s\n", refused.c_str());
  }

  const std::string token = generate_token();
  admin_options options;
  options.address = config.admin_address;
  options.port = config.admin_port;
  options.token = token;
  options.threads = config.admin_threads;
  // The server first: a daemon that cannot listen must not replace the token
  // file of one that does.
  std::optional<admin_server> admin(admin_server::start(options));
  write_token_file(config.token_file, token);
  std::printf("primcached: console %s\n", admin->url().c_str());
  std::printf("primcached: token file %s\n", config.token_file.c_str());
  const std::string graphs = w.graphs.empty() ? std::string()
                                              : " and " + std::to_string(w.graphs.size()) +
                                                    (w.graphs.size() == 1 ? " graph" : " graphs");
  std::printf(
      "primcached: workload %s: %zu primitives%s on %d threads; capacities from %s\n",
      w.name.empty() ? (workload_path.empty() ? "default" : workload_path.c_str()) : w.name.c_str(),
      w.primitives.size(), graphs.c_str(), config.threads, config.file.c_str());
  tuning.describe(w);
  // What each graph runs: its ops and the transforms between them.
  for (const graph_entry& g : w.graphs) {
    std::printf("primcached: graph %s (%s):\n%s", g.name.c_str(), g.source.c_str(),
                g.exec->describe().c_str());
  }
  std::fflush(stdout);

  workload_runner runner(w, config.threads);
  const clock_type::time_point started = clock_type::now();
  summary_window total{started, primitive_cache_info().stats};
  total.graphs_since = graph_totals_of(w);
  summary_window interval_window = total;
  std::mt19937_64 sample_rng(1);
  // Moves what the threads counted since the last call into both windows.
  auto collect = [&] {
    interval_stats st = runner.take_interval();
    for (summary_window* w : {&total, &interval_window}) {
      w->executions += st.executions;
      w->graph_runs += st.graph_runs;
      w->creations += st.creations;
      w->failures += st.failures;
    }
    add_samples(total, st.creation_ms, sample_rng);
    add_samples(interval_window, st.creation_ms, sample_rng);
  };
  runner.start();

  const auto interval = std::chrono::duration_cast<clock_type::duration>(
      std::chrono::duration<double>(config.summary_interval_seconds));
  std::optional<clock_type::time_point> deadline;
  if (cl.duration) {
    deadline = started + std::chrono::duration_cast<clock_type::duration>(
                             std::chrono::duration<double>(*cl.duration));
  }
  clock_type::time_point next_summary = started + interval;
  std::string stopped_by = "duration";
  for (;;) {
    const clock_type::time_point now = clock_type::now();
    if (deadline && now >= *deadline) break;
    if (now >= next_summary) {
      collect();
      print_summary(interval_window, "last", w);
      interval_window = summary_window{clock_type::now(), primitive_cache_info().stats};
      interval_window.graphs_since = graph_totals_of(w);
      next_summary += interval;
      if (next_summary < now) next_summary = now + interval;
      continue;
    }
    // Collects at least every second, whatever the summary interval, so the
    // threads' sample buffers stay a second's worth.
    clock_type::time_point wake = std::min(next_summary, now + std::chrono::seconds(1));
    if (deadline && *deadline < wake) wake = *deadline;
    const auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    pollfd p{signal_fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(wait_ms));
    if (r == 0) collect();
    if (r > 0) {
      signalfd_siginfo info{};
      if (::read(signal_fd, &info, sizeof info) == sizeof info) {
        stopped_by = info.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM";
        break;
      }
    }
  }

  // In-flight creations and executions finish; then the server drains.
  runner.stop();
  collect();
  std::printf("primcached: stopping (%s)\n", stopped_by.c_str());
  print_summary(total, "total", w);
  const std::size_t never_succeeded = report_entry_failures(runner.outcomes());
  // The workload threads are done: no tuning is in flight.
  const bool table_written = tuning.finish();
  admin->stop();
  // The persistent cache's queued writes are finished before exit.
  if (config.persistent) detach_persistent_cache();
  remove_token_file(config.token_file, token);
  // The daemon's own failure first: both are on stderr.
  if (!table_written) return exit_failed;
  return never_succeeded > 0 ? exit_entry_never_succeeded : exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  // Block the stop signals before any thread starts, so that every thread
  // inherits the mask and they arrive only through the signalfd.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  const int signal_fd = ::signalfd(-1, &mask, SFD_CLOEXEC);
  if (signal_fd < 0) {
    std::perror("primcached: signalfd");
    return exit_failed;
  }
  try {
    return run(argc, argv, signal_fd);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "primcached: %s\n%s", e.message.c_str(), usage.data());
    return exit_refused;
  } catch (const primcache::error& e) {
    std::fprintf(stderr, "primcached: %s\n", e.message().c_str());
    return e.code() == primcache::status::invalid_arguments ? exit_refused : exit_failed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "primcached: %s\n", e.what());
    return exit_failed;
  }
}
