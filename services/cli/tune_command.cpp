#include "tune_command.hpp"

#include <exception>
#include <filesystem>
#include <optional>
#include <string_view>

#include "input_file.hpp"
#include "primcache/base/error.hpp"
#include "primcache/graph/graph_json.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/runtime/tuning.hpp"
#include "primcache/runtime/version.hpp"
#include "runner.hpp"
#include "workload.hpp"

namespace primcache::cli {
namespace {

constexpr const char* kUsage =
    "usage: primcache tune WORKLOAD.json -o TABLE.json [--max-nconfigs N]\n"
    "  tunes every matmul and convolution of a primcached workload file, on the\n"
    "  CPU and on the first OpenCL device (\"engine\": \"gpu\"), its graphs' too\n"
    "  (one run each), and writes the winners into TABLE.json (merged with what\n"
    "  it holds)\n";

struct usage_error {
  std::string message;
};

struct row {
  std::string name, status, config;
  double default_ms = 0, tuned_ms = 0;
};

}  // namespace

int run_tune_command(const std::vector<std::string>& args, std::FILE* out, std::FILE* err) {
  std::string workload_path, table_path;
  std::size_t max_nconfigs = get_tune_max_nconfigs();
  try {
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a == "--help" || a == "-h") {
        std::fputs(kUsage, out);
        return 0;
      }
      auto value = [&]() -> const std::string& {
        if (i + 1 >= args.size()) throw usage_error{a + ": missing value"};
        return args[++i];
      };
      if (a == "-o" || a == "--output") {
        table_path = value();
      } else if (a == "--max-nconfigs") {
        const std::string& v = value();
        char* end = nullptr;
        const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || v[0] == '-' || n < 1 || n > 1000) {
          throw usage_error{"--max-nconfigs " + v + ": expected an integer in 1..1000"};
        }
        max_nconfigs = static_cast<std::size_t>(n);
      } else if (a.starts_with("-")) {
        throw usage_error{"unknown option " + a};
      } else if (workload_path.empty()) {
        workload_path = a;
      } else {
        throw usage_error{"more than one workload file (" + workload_path + ", " + a + ")"};
      }
    }
    if (workload_path.empty()) throw usage_error{"missing the workload file"};
    if (table_path.empty()) throw usage_error{"missing -o TABLE.json"};
  } catch (const usage_error& e) {
    std::fprintf(err, "primcache tune: %s\n%s", e.message.c_str(), kUsage);
    return 2;
  }

  primcached::workload w;
  try {
    // As primcached reads it: a regular file of at most 16 MiB, anything
    // else (a FIFO, /dev/zero, a directory) refused before it is read.
    const std::string text =
        primcached::read_input_file(workload_path, "cannot read the workload " + workload_path,
                                    primcached::max_input_file_bytes, /*open_reason=*/true);
    // Graph files are relative to the workload's folder, as in primcached.
    w = primcached::load_workload(text, workload_path,
                                  std::filesystem::path(workload_path).parent_path().string());
  } catch (const error& e) {
    // The message alone, as primcached prints it (what() leads with the status).
    std::fprintf(err, "primcache tune: %s\n", e.message().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(err, "primcache tune: %s\n", e.what());
    return 1;
  }

  // Problems the table already holds are not tuned again.
  auto loaded = global_tune_table().load_file(table_path, version().version);
  if (!loaded && loaded.why().code != status::not_found) {
    std::fprintf(err, "primcache tune: %s; it will be replaced\n", loaded.why().message.c_str());
  } else if (loaded && loaded.value().other_version) {
    std::fprintf(err,
                 "primcache tune: %s was written by primcache %s: its entries are ignored and "
                 "will be replaced\n",
                 table_path.c_str(), loaded.value().file_version.c_str());
  }
  set_tune_max_nconfigs(max_nconfigs);
  set_tune(true);
  const std::size_t n = w.primitives.size() + w.graphs.size();
  std::size_t current = 0;
  set_tune_progress_listener([&](const tune_progress_event& p) {
    constexpr int kWidth = 24;
    const int filled = p.total ? static_cast<int>(kWidth * p.done / p.total) : kWidth;
    std::fprintf(err, "\r[%zu/%zu] [%.*s%.*s] %zu/%zu configurations, best %.4f ms (default %.4f)",
                 current + 1, n, filled, "########################", kWidth - filled,
                 "........................", p.done, p.total, p.best_ms, p.default_ms);
    std::fflush(err);
  });

  // Engines are made on first use: a workload without OpenCL primitives
  // needs no OpenCL device.
  std::optional<engine> cpu, gpu;
  auto engine_for = [&](engine_kind kind) -> const engine& {
    std::optional<engine>& e = kind == engine_kind::cpu ? cpu : gpu;
    if (!e) e.emplace(kind, 0);
    return *e;
  };
  std::vector<row> rows;
  for (current = 0; current < w.primitives.size(); ++current) {
    const primcached::primitive_spec& spec = w.primitives[current];
    row r;
    r.name = spec.name;
    if (spec.kind != primcached::primitive_kind::matmul &&
        spec.kind != primcached::primitive_kind::convolution) {
      r.status = "not tuned (matmul and convolution only)";
      rows.push_back(std::move(r));
      continue;
    }
    try {
      const engine& eng = engine_for(spec.engine);
      const primitive_desc pd = primcached::make_primitive_desc(spec, eng);
      const tune_stats before = get_tune_stats();
      // Tuning runs inside the first execution; on an OpenCL stream the
      // execution is asynchronous, so wait for it before reading the table.
      stream strm(eng);
      primcached::make_primitive(pd).execute(strm, primcached::make_zeroed_args(spec, pd));
      strm.wait();
      const tune_stats after = get_tune_stats();
      std::fputs("\r\033[K", err);
      auto entry =
          global_tune_table().find(tune_device_of(eng), backend::impl_of(pd).problem_key());
      if (!entry) {
        r.status = after.failed > before.failed ? "tuning failed (see above)"
                                                : "nothing to tune (no configurations)";
      } else {
        r.default_ms = entry->default_time_ns / 1e6;
        r.tuned_ms = entry->time_ns / 1e6;
        r.config = entry->config;
        r.status = after.tuned > before.tuned ? "tuned" : "in the table already";
      }
    } catch (const std::exception& e) {
      std::fputs("\r\033[K", err);
      r.status = std::string("failed: ") + e.what();
    }
    rows.push_back(std::move(r));
  }
  // A graph's matmuls and convolutions tune on their first execution: one
  // run of the graph on its "init" inputs tunes them all.
  for (const primcached::graph_entry& g : w.graphs) {
    row r;
    r.name = "graph " + g.name;
    try {
      const tune_stats before = get_tune_stats();
      g.exec->run(make_inputs(*g.graph));
      const tune_stats after = get_tune_stats();
      std::fputs("\r\033[K", err);
      const std::uint64_t tuned = after.tuned - before.tuned;
      const std::uint64_t failed = after.failed - before.failed;
      r.status = std::to_string(tuned) + (tuned == 1 ? " primitive" : " primitives") + " tuned";
      if (failed != 0) r.status += ", " + std::to_string(failed) + " failed (see above)";
      if (tuned == 0 && failed == 0) r.status += " (in the table already, or nothing to tune)";
    } catch (const std::exception& e) {
      std::fputs("\r\033[K", err);
      r.status = std::string("failed: ") + e.what();
    }
    rows.push_back(std::move(r));
    ++current;
  }
  set_tune_progress_listener({});
  set_tune(false);

  std::fprintf(out, "%-36s %12s %12s %9s  %s\n", "primitive", "default ms", "tuned ms", "speed-up",
               "status / configuration");
  for (const row& r : rows) {
    if (r.tuned_ms > 0) {
      std::fprintf(out, "%-36s %12.4f %12.4f %8.3fx  %s %s\n", r.name.c_str(), r.default_ms,
                   r.tuned_ms, r.default_ms > 0 ? r.default_ms / r.tuned_ms : 1.0, r.status.c_str(),
                   r.config.c_str());
    } else {
      std::fprintf(out, "%-36s %12s %12s %9s  %s\n", r.name.c_str(), "-", "-", "-",
                   r.status.c_str());
    }
  }
  try {
    const std::size_t written = save_tune_table(table_path);
    std::fprintf(out, "wrote %zu entries to %s\n", written, table_path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(err, "primcache tune: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace primcache::cli
