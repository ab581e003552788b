#include "cache_command.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>

#include "human_bytes.hpp"
#include "primcache/base/env.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/capacity_unit.hpp"
#include "primcache/persist/archive.hpp"
#include "primcache/persist/directory_store.hpp"
#include "primcache/persist/fleet_key.hpp"
#include "primcache/runtime/version.hpp"

namespace primcache::cli {
namespace {

constexpr const char* cache_usage =
    "usage: primcache cache COMMAND [OPTIONS]\n"
    "commands:\n"
    "  stats DIR              entries, bytes, bad entries and leftovers of a cache directory\n"
    "  verify DIR [--fix]     check every entry (exit 1 if any is bad); --fix removes bad ones\n"
    "  clear DIR              drop every entry\n"
    "  export DIR FILE        pack every good entry into one archive file\n"
    "  import FILE DIR        check the whole archive, then add its entries to DIR\n"
    "options:\n"
    "  --library-version V    the version entries must carry (default: this build's)\n"
    "  --capacity MB          import: the directory's capacity (default: unlimited)\n"
    "  --progress, --no-progress   force the progress bar on stderr, or off\n"
    "environment: PRIMCACHE_PERSISTENT_CACHE_KEY_FILE, the fleet key entries are signed with\n";

struct usage_error {
  std::string message;
};
struct failure {
  std::string message;
};

struct settings {
  std::string library_version;
  std::optional<std::uint64_t> capacity_mb;
  std::optional<bool> progress;  // unset: when stderr is a terminal
  bool fix = false;
};

using primcache::services::human_bytes;

// A progress bar on stderr, redrawn at most ten times a second. In the
// automatic mode (a terminal) it appears only once a run has lasted 200 ms,
// so quick runs print nothing; forced, it also draws the final count.
class progress_bar {
 public:
  progress_bar(std::FILE* err, const settings& s, std::string label)
      : err_(err),
        forced_(s.progress.value_or(false)),
        enabled_(s.progress ? *s.progress : ::isatty(::fileno(err)) == 1),
        label_(std::move(label)),
        start_(clock::now()) {}
  ~progress_bar() { finish(); }
  progress_bar(const progress_bar&) = delete;
  progress_bar& operator=(const progress_bar&) = delete;

  archive_progress callback() {
    if (!enabled_) return {};
    return [this](std::uint64_t done, std::uint64_t total) { update(done, total); };
  }

  void finish() {
    if (!enabled_) return;
    if (forced_ && last_total_ > 0 && last_done_ != last_drawn_) draw(last_done_, last_total_);
    if (drawn_) std::fputs(forced_ ? "\n" : "\r\033[K", err_);
    std::fflush(err_);
    enabled_ = false;
  }

 private:
  using clock = std::chrono::steady_clock;

  void update(std::uint64_t done, std::uint64_t total) {
    last_done_ = done;
    last_total_ = total;
    const auto now = clock::now();
    if (!forced_ && now - start_ < std::chrono::milliseconds(200)) return;
    if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && done != total) return;
    draw(done, total);
    last_draw_ = now;
  }

  void draw(std::uint64_t done, std::uint64_t total) {
    constexpr int width = 30;
    const double f = total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
    const int filled = static_cast<int>(f * width);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.append(static_cast<std::size_t>(width - filled), '.');
    std::fprintf(err_, "\r%s [%s] %3d%% %llu/%llu", label_.c_str(), bar.c_str(),
                 static_cast<int>(f * 100), static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(total));
    std::fflush(err_);
    drawn_ = true;
    last_drawn_ = done;
  }

  std::FILE* err_;
  bool forced_;
  bool enabled_;
  std::string label_;
  clock::time_point start_, last_draw_{};
  bool drawn_ = false;
  std::uint64_t last_done_ = 0, last_total_ = 0, last_drawn_ = UINT64_MAX;
};

// The fleet key of the environment; owned here, borrowed by the store.
struct opened_store {
  std::unique_ptr<fleet_key> key;          // a stable address while opened_store moves
  std::unique_ptr<directory_store> store;  // destroyed before the key
};

enum class mode { read_only, writable_existing, writable_create };

opened_store open_dir(const std::string& dir, const settings& s, mode m) {
  if (m == mode::writable_existing) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
      throw failure{"persistent cache dir " + dir + " does not exist"};
    }
  }
  opened_store o;
  result<std::optional<fleet_key>> k = fleet_key_from_env();
  if (!k) throw failure{k.why().message};
  if (k.value()) o.key = std::make_unique<fleet_key>(std::move(*k.value()));
  directory_store_options opt;
  opt.path = dir;
  opt.read_only = m == mode::read_only;
  opt.capacity_mb = s.capacity_mb.value_or(unlimited_capacity >> 20);
  opt.format.library_version = s.library_version;
  opt.format.key = o.key.get();
  try {
    o.store = directory_store::open(std::move(opt));
  } catch (const error& e) {
    throw failure{e.message()};
  }
  return o;
}

void print_problems(std::FILE* out, const std::vector<verify_problem>& bad) {
  for (const verify_problem& p : bad) {
    std::fprintf(out, "bad: %s: %s\n", p.path.c_str(), p.message.c_str());
  }
}

int stats(const std::string& dir, const settings& s, std::FILE* out, std::FILE* err) {
  opened_store o = open_dir(dir, s, mode::read_only);
  progress_bar bar(err, s, "stats");
  verify_options vo;
  vo.progress = bar.callback();
  verify_report r = o.store->verify(vo);
  bar.finish();
  std::fprintf(out, "persistent cache dir %s\n", o.store->path().c_str());
  std::fprintf(out, "entries:           %llu (%llu good, %zu bad)\n",
               static_cast<unsigned long long>(r.entries), static_cast<unsigned long long>(r.good),
               r.bad.size());
  std::fprintf(out, "bytes:             %s (%llu; size.txt says %llu)\n",
               human_bytes(r.bytes).c_str(), static_cast<unsigned long long>(r.bytes),
               static_cast<unsigned long long>(r.recorded_bytes));
  std::fprintf(out, "stale temporaries: %llu\n",
               static_cast<unsigned long long>(r.stale_temporaries));
  std::fprintf(out, "library version:   %s\n", s.library_version.c_str());
  if (!r.bad.empty()) {
    std::fprintf(out, "%zu bad entries: run `primcache cache verify %s` to list them\n",
                 r.bad.size(), dir.c_str());
  }
  return 0;
}

int verify(const std::string& dir, const settings& s, std::FILE* out, std::FILE* err) {
  opened_store o = open_dir(dir, s, s.fix ? mode::writable_existing : mode::read_only);
  progress_bar bar(err, s, "verify");
  verify_options vo;
  vo.fix = s.fix;
  vo.progress = bar.callback();
  verify_report r = o.store->verify(vo);
  bar.finish();
  print_problems(out, r.bad);
  std::fprintf(out, "checked %llu entries in %s: %llu good (%s), %zu bad\n",
               static_cast<unsigned long long>(r.entries), o.store->path().c_str(),
               static_cast<unsigned long long>(r.good), human_bytes(r.bytes).c_str(), r.bad.size());
  if (!s.fix) {
    if (r.bad.empty()) return 0;
    std::fprintf(err, "primcache: %zu bad entries in %s (remove them with --fix)\n", r.bad.size(),
                 dir.c_str());
    return 1;
  }
  std::fprintf(out, "fixed: removed %zu bad entries and %llu stale temporaries; size.txt is %llu\n",
               r.bad.size(), static_cast<unsigned long long>(r.stale_temporaries),
               static_cast<unsigned long long>(r.bytes));
  // What --fix left must check clean.
  verify_report again = o.store->verify(false);
  if (!again.ok()) {
    print_problems(out, again.bad);
    std::fprintf(err, "primcache: %zu bad entries remain in %s after --fix\n", again.bad.size(),
                 dir.c_str());
    return 1;
  }
  // Removed, but a script (a deploy check, a cron job) must still learn
  // that the cache held bad entries: a disk or a writer is misbehaving.
  if (!r.bad.empty()) {
    std::fprintf(err, "primcache: %zu bad entries were in %s (removed)\n", r.bad.size(),
                 dir.c_str());
    return 1;
  }
  return 0;
}

int clear(const std::string& dir, const settings& s, std::FILE* out) {
  opened_store o = open_dir(dir, s, mode::writable_existing);
  const std::uint64_t before = o.store->size();
  try {
    o.store->clear();
  } catch (const error& e) {
    throw failure{e.message()};
  }
  std::fprintf(out, "cleared %s (%s)\n", o.store->path().c_str(), human_bytes(before).c_str());
  return 0;
}

int export_cmd(const std::string& dir, const std::string& file, const settings& s, std::FILE* out,
               std::FILE* err) {
  opened_store o = open_dir(dir, s, mode::read_only);
  progress_bar bar(err, s, "export");
  archive_report r;
  try {
    r = export_archive(*o.store, file, bar.callback());
  } catch (const error& e) {
    throw failure{e.message()};
  }
  bar.finish();
  print_problems(out, r.skipped);
  std::fprintf(out, "exported %llu entries (%s) from %s to %s",
               static_cast<unsigned long long>(r.entries), human_bytes(r.bytes).c_str(),
               o.store->path().c_str(), file.c_str());
  if (!r.skipped.empty()) std::fprintf(out, "; left out %zu bad entries", r.skipped.size());
  std::fputs("\n", out);
  return 0;
}

int import_cmd(const std::string& file, const std::string& dir, const settings& s, std::FILE* out,
               std::FILE* err) {
  // A missing archive should not leave a new, empty directory behind.
  if (::access(file.c_str(), R_OK) != 0) {
    const int e = errno;
    throw failure{"import " + file + ": cannot open it: " + std::strerror(e)};
  }
  opened_store o = open_dir(dir, s, mode::writable_create);
  progress_bar bar(err, s, "import");
  archive_report r;
  try {
    r = import_archive(file, *o.store, bar.callback());
  } catch (const error& e) {
    bar.finish();
    throw failure{e.message()};
  }
  bar.finish();
  std::fprintf(out, "imported %llu entries (%s) from %s into %s; %llu were already there\n",
               static_cast<unsigned long long>(r.stored), human_bytes(r.bytes).c_str(),
               file.c_str(), o.store->path().c_str(),
               static_cast<unsigned long long>(r.already_present));
  return 0;
}

int dispatch(const std::vector<std::string>& args, std::FILE* out, std::FILE* err) {
  settings s;
  s.library_version = std::string(version().version) + "+" + version().build_identity;
  std::vector<std::string> words;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(cache_usage, out);
      return 0;
    }
    if (a == "--fix") {
      s.fix = true;
    } else if (a == "--progress") {
      s.progress = true;
    } else if (a == "--no-progress") {
      s.progress = false;
    } else if (a == "--library-version" || a == "--capacity") {
      if (i + 1 >= args.size()) throw usage_error{a + ": missing value"};
      const std::string& v = args[++i];
      if (a == "--library-version") {
        if (v.empty()) throw usage_error{"--library-version: empty"};
        s.library_version = v;
      } else {
        result<std::int64_t> mb = parse_int(v, 1, static_cast<std::int64_t>(1) << 40);
        if (!mb) throw usage_error{"--capacity " + v + ": expected a number of MB, at least 1"};
        s.capacity_mb = static_cast<std::uint64_t>(mb.value());
      }
    } else if (a.starts_with("--")) {
      throw usage_error{"unknown option " + a};
    } else {
      words.push_back(a);
    }
  }
  if (words.empty())
    throw usage_error{"cache: missing command (stats, verify, clear, export or import)"};
  const std::string& cmd = words[0];
  auto want = [&](std::size_t n, const char* form) {
    if (words.size() != n + 1) throw usage_error{"cache " + cmd + ": expected " + form};
  };
  if (s.fix && cmd != "verify") throw usage_error{"--fix is an option of cache verify"};
  if (s.capacity_mb && cmd != "import")
    throw usage_error{"--capacity is an option of cache import"};
  if (cmd == "stats") {
    want(1, "DIR");
    return stats(words[1], s, out, err);
  }
  if (cmd == "verify") {
    want(1, "DIR [--fix]");
    return verify(words[1], s, out, err);
  }
  if (cmd == "clear") {
    want(1, "DIR");
    return clear(words[1], s, out);
  }
  if (cmd == "export") {
    want(2, "DIR FILE");
    return export_cmd(words[1], words[2], s, out, err);
  }
  if (cmd == "import") {
    want(2, "FILE DIR");
    return import_cmd(words[1], words[2], s, out, err);
  }
  throw usage_error{"unknown cache command " + cmd};
}

}  // namespace

int run_cache_command(const std::vector<std::string>& args, std::FILE* out, std::FILE* err) {
  try {
    return dispatch(args, out, err);
  } catch (const usage_error& u) {
    std::fprintf(err, "primcache: %s\n%s", u.message.c_str(), cache_usage);
    return 2;
  } catch (const failure& f) {
    std::fprintf(err, "primcache: %s\n", f.message.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(err, "primcache: %s\n", e.what());
    return 1;
  }
}

}  // namespace primcache::cli
