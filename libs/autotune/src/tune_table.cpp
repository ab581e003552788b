#include "primcache/autotune/tune_table.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_set>
#include <utility>

#include "primcache/base/json_keys.hpp"
#include "primcache/base/regular_file.hpp"

namespace primcache {
namespace {

constexpr std::string_view kFormat = "primcache-tune-table";

std::string to_hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::byte b : bytes) {
    const auto v = static_cast<unsigned>(b);
    out.push_back(kDigits[v >> 4]);
    out.push_back(kDigits[v & 15]);
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase is not the form to_hex writes
}

std::optional<std::vector<std::byte>> from_hex(std::string_view hex) {
  if (hex.empty() || hex.size() % 2 != 0) return std::nullopt;
  std::vector<std::byte> out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<std::byte>(hi * 16 + lo);
  }
  return out;
}

failure corrupt(const std::string& what) {
  return failure{status::corrupt_data, "tune table: " + what};
}

// The system's reason for the last failed call.
std::string sys_reason() {
  return std::strerror(errno);
}

std::string parent_dir(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Where a key is given twice, as the other messages name places: "" for
// the top level, "entry 3: " for /entries/3, else the JSON pointer.
std::string duplicate_place(const std::string& pointer) {
  if (pointer.empty()) return "";
  constexpr std::string_view entries = "/entries/";
  if (pointer.starts_with(entries) && pointer.size() > entries.size() &&
      pointer.find_first_not_of("0123456789", entries.size()) == std::string::npos) {
    return "entry " + pointer.substr(entries.size()) + ": ";
  }
  return pointer + ": ";
}

struct parsed_entry {
  std::string device;
  std::vector<std::byte> key;
  tune_entry entry;
};

struct parsed_file {
  std::string version;
  std::vector<parsed_entry> entries;
};

// The documented form, strictly; anything else is corrupt_data naming where.
result<parsed_file> parse(std::string_view text) {
  boost::system::error_code ec;
  boost::json::value doc = boost::json::parse(text, ec);
  if (ec) return corrupt("not JSON (" + ec.message() + ")");
  // Boost.JSON would keep the last of a key given twice: corrupt too.
  if (const auto d = find_duplicate_json_key(text)) {
    return corrupt(duplicate_place(d->object_pointer) + "\"" + d->key + "\" is given twice");
  }
  const auto* root = doc.if_object();
  if (!root) return corrupt("the top level is not an object");
  const auto* format = root->if_contains("format");
  if (!format || !format->is_string() || format->get_string() != kFormat) {
    return corrupt("\"format\" is not \"" + std::string(kFormat) + "\"");
  }
  const auto* fv = root->if_contains("format_version");
  if (!fv || !fv->is_int64()) return corrupt("\"format_version\" is missing or not an integer");
  if (fv->get_int64() != tune_table::format_version) {
    return corrupt("format_version " + std::to_string(fv->get_int64()) + " is not " +
                   std::to_string(tune_table::format_version));
  }
  const auto* version = root->if_contains("library_version");
  if (!version || !version->is_string()) {
    return corrupt("\"library_version\" is missing or not a string");
  }
  const auto* entries = root->if_contains("entries");
  if (!entries || !entries->is_array()) return corrupt("\"entries\" is missing or not an array");
  parsed_file out;
  out.version = std::string(version->get_string());
  // A hash set: a list searched per entry made a 100,000-entry file take
  // minutes, and a file of that size is within max_file_bytes.
  std::unordered_set<std::string> seen;
  seen.reserve(entries->get_array().size());
  std::size_t index = 0;
  for (const boost::json::value& v : entries->get_array()) {
    const std::string where = "entry " + std::to_string(index++);
    const auto* e = v.if_object();
    if (!e) return corrupt(where + " is not an object");
    auto text_field = [&](const char* name, bool required,
                          std::string& to) -> std::optional<failure> {
      const auto* f = e->if_contains(name);
      if (!f) {
        if (!required) return std::nullopt;
        return corrupt(where + " has no \"" + name + "\"");
      }
      if (!f->is_string()) return corrupt(where + ": \"" + name + "\" is not a string");
      to = std::string(f->get_string());
      if (required && to.empty()) return corrupt(where + ": \"" + name + "\" is empty");
      return std::nullopt;
    };
    auto time_field = [&](const char* name, bool required, double& to) -> std::optional<failure> {
      const auto* f = e->if_contains(name);
      if (!f) {
        if (!required) return std::nullopt;
        return corrupt(where + " has no \"" + name + "\"");
      }
      if (!f->is_number()) return corrupt(where + ": \"" + name + "\" is not a number");
      boost::system::error_code nec;
      to = f->to_number<double>(nec);
      if (nec || !std::isfinite(to) || to < 0 || (required && to == 0)) {
        return corrupt(where + ": \"" + name + "\" is not a positive finite number of ns");
      }
      return std::nullopt;
    };
    parsed_entry p;
    std::string key_hex;
    for (auto err : {text_field("device", true, p.device), text_field("key", true, key_hex),
                     text_field("implementation", true, p.entry.implementation),
                     text_field("config", true, p.entry.config),
                     text_field("description", false, p.entry.description),
                     time_field("time_ns", true, p.entry.time_ns),
                     time_field("default_time_ns", false, p.entry.default_time_ns),
                     time_field("warm_time_ns", false, p.entry.warm_time_ns),
                     time_field("warm_default_time_ns", false, p.entry.warm_default_time_ns)}) {
      if (err) return *err;
    }
    auto key = from_hex(key_hex);
    if (!key) return corrupt(where + ": \"key\" is not lowercase hex of whole bytes");
    p.key = std::move(*key);
    if (!seen.insert(p.device + '\0' + key_hex).second) {
      return corrupt(where + " repeats the device and key of an earlier entry");
    }
    out.entries.push_back(std::move(p));
  }
  return out;
}

// Closes a descriptor when it goes (and with it releases a flock on it).
class unique_fd {
 public:
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&&) = delete;
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

std::string too_large(std::uintmax_t bytes) {
  return "it holds " + std::to_string(bytes) + " bytes, more than the " +
         std::to_string(tune_table::max_file_bytes) + " a tune table may";
}

// Reads a whole file: not_found, or runtime_error with the reason. Only a
// regular file of at most max_file_bytes is read (regular_file.hpp): the
// table path comes from the environment and is read when the first
// primitive descriptor is made, where a FIFO would wait for a writer
// forever and /dev/zero would fill memory.
result<std::string> read_file(const std::string& path) {
  regular_file_text f = read_regular_file(path, tune_table::max_file_bytes);
  auto refuse = [&](const std::string& why) -> failure {
    return failure{status::runtime_error, "tune table " + path + ": not read: " + why};
  };
  switch (f.refusal) {
    case file_refusal::none: return std::move(f.text);
    case file_refusal::cannot_open:
      if (f.error == ENOENT) {
        return failure{status::not_found, "tune table " + path + " does not exist"};
      }
      return failure{status::runtime_error,
                     "tune table " + path + ": cannot open (" + f.reason + ")"};
    case file_refusal::not_regular: return refuse("it is " + f.reason);
    case file_refusal::too_large: return refuse(too_large(f.bytes) + (f.grew ? " (it grew)" : ""));
    case file_refusal::cannot_read: break;
  }
  return failure{status::runtime_error, "tune table " + path + ": cannot read (" + f.reason + ")"};
}

// An exclusive flock on PATH.lock, held by save_file from reading the file
// to renaming the new one over it: saves of one path, from threads or
// processes, take turns, so no save's rename drops entries another merged
// in after it read the file. The lock file stays (removing it would let a
// save lock a file that another has just unlinked); it is created 0600
// and never through a symbolic link.
result<unique_fd> lock_table(const std::string& path) {
  const std::string lock = path + ".lock";
  auto fail = [&](const std::string& what) -> failure {
    return failure{status::runtime_error, "tune table " + path + ": " + what};
  };
  // O_NONBLOCK: a FIFO planted there is refused below, never waited on
  // (flock's waiting is LOCK_NB's to say, not the descriptor's).
  unique_fd fd(::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    const std::string why =
        errno == ELOOP ? "it is a symbolic link, which is never followed" : sys_reason();
    return fail("cannot create or open its lock file " + lock + " (" + why + ")");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail("cannot stat " + lock + " (" + sys_reason() + ")");
  if (!S_ISREG(st.st_mode)) {
    return fail("cannot lock it: " + lock + " is " + file_type_name(st.st_mode) +
                ", not a regular file");
  }
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return fail("cannot lock " + lock + " (" + sys_reason() + ")");
  }
  return fd;
}

// No fork() while a save holds its lock: a child would share the lock's
// open file description, so the lock would stay held after the saving
// thread closed its descriptor, until the child exited, and a save in the
// child itself would wait on it for ever. Saves in this process take the
// gate; fork's prepare handler takes it too, so it waits for the save in
// progress and no save starts until the fork is done.
std::mutex& save_gate() {
  static std::mutex* gate = [] {
    auto* made = new std::mutex;  // never destroyed: a save may run at exit
    ::pthread_atfork([] { save_gate().lock(); }, [] { save_gate().unlock(); },
                     [] { save_gate().unlock(); });
    return made;
  }();
  return *gate;
}

// 64 random bits as hex, for a temporary file's name: unique across
// processes even where two share a pid (containers sharing a volume, each
// its program as pid 1).
std::string random_suffix() {
  std::uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bits)) {
    // No entropy yet (early boot): the clock and a counter, still checked
    // by O_EXCL.
    static std::atomic<std::uint64_t> counter{0};
    bits = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           (static_cast<std::uint64_t>(::getpid()) << 32) ^
           (counter.fetch_add(1, std::memory_order_relaxed) * 0x9e3779b97f4a7c15ULL);
  }
  return to_hex(std::as_bytes(std::span(&bits, 1)));
}

// Writes `text` to `path` through a temporary file beside it, a new one
// with a random name (O_EXCL: never a file someone else made; only a file
// this call created is ever removed).
result<bool> write_atomically(const std::string& path, const std::string& text) {
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = path + ".tmp." + random_suffix();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && (errno != EEXIST || attempt == 16)) {
      return failure{status::runtime_error,
                     "tune table " + path + ": cannot create " + tmp + " (" + sys_reason() + ")"};
    }
  }
  auto fail = [&](const std::string& step) -> failure {
    const std::string why = sys_reason();
    ::unlink(tmp.c_str());  // this call created it
    return failure{status::runtime_error,
                   "tune table " + path + ": cannot " + step + " (" + why + ")"};
  };
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return fail("write " + tmp);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    return fail("fsync " + tmp);
  }
  if (::close(fd) != 0) return fail("close " + tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename " + tmp + " over it");
  // The rename is durable once the directory is; a failure here leaves the
  // new file in place, so it is not reported.
  const int dir = ::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
  return true;
}

}  // namespace

std::string tune_table::slot(std::string_view device, std::span<const std::byte> key_bytes) {
  std::string s(device);
  s.push_back('\0');
  s.append(reinterpret_cast<const char*>(key_bytes.data()), key_bytes.size());
  return s;
}

std::optional<tune_entry> tune_table::find(std::string_view device, const key& k) const {
  return find(device, k.bytes());
}

std::optional<tune_entry> tune_table::find(std::string_view device,
                                           std::span<const std::byte> key_bytes) const {
  const std::string s = slot(device, key_bytes);
  shared_lock_guard g(mu_);
  auto it = entries_.find(s);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void tune_table::put(std::string_view device, const key& k, tune_entry entry) {
  put(device, k.bytes(), std::move(entry));
}

void tune_table::put(std::string_view device, std::span<const std::byte> key_bytes,
                     tune_entry entry) {
  std::string s = slot(device, key_bytes);
  lock_guard g(mu_);
  entries_.insert_or_assign(std::move(s), std::move(entry));
}

bool tune_table::put_if_faster_locked(std::string s, tune_entry entry) {
  auto it = entries_.find(s);
  if (it != entries_.end() && !(entry.time_ns < it->second.time_ns)) return false;
  entries_.insert_or_assign(std::move(s), std::move(entry));
  return true;
}

bool tune_table::put_if_faster(std::string_view device, std::span<const std::byte> key_bytes,
                               tune_entry entry) {
  std::string s = slot(device, key_bytes);
  lock_guard g(mu_);
  return put_if_faster_locked(std::move(s), std::move(entry));
}

std::size_t tune_table::merge(const tune_table& other) {
  // Copied under the other's lock first: never two tables' locks at once.
  std::vector<std::pair<std::string, tune_entry>> theirs;
  {
    shared_lock_guard g(other.mu_);
    theirs.assign(other.entries_.begin(), other.entries_.end());
  }
  std::size_t taken = 0;
  lock_guard g(mu_);
  for (auto& [s, e] : theirs) taken += put_if_faster_locked(std::move(s), std::move(e)) ? 1 : 0;
  return taken;
}

bool tune_table::erase(std::string_view device, std::span<const std::byte> key_bytes) {
  const std::string s = slot(device, key_bytes);
  lock_guard g(mu_);
  return entries_.erase(s) != 0;
}

std::size_t tune_table::size() const {
  shared_lock_guard g(mu_);
  return entries_.size();
}

void tune_table::clear() {
  lock_guard g(mu_);
  entries_.clear();
}

std::vector<tune_row> tune_table::rows() const {
  std::vector<std::pair<std::string, tune_entry>> copy;
  {
    shared_lock_guard g(mu_);
    copy.assign(entries_.begin(), entries_.end());
  }
  std::sort(copy.begin(), copy.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<tune_row> out;
  out.reserve(copy.size());
  for (auto& [s, e] : copy) {
    const auto nul = s.find('\0');
    tune_row r;
    r.device = s.substr(0, nul);
    const auto* p = reinterpret_cast<const std::byte*>(s.data()) + nul + 1;
    r.key.assign(p, p + (s.size() - nul - 1));
    r.entry = std::move(e);
    out.push_back(std::move(r));
  }
  return out;
}

std::string tune_table::to_json(std::string_view library_version) const {
  boost::json::array entries;
  for (const tune_row& r : rows()) {
    boost::json::object e;
    e["device"] = r.device;
    e["key"] = to_hex(r.key);
    e["implementation"] = r.entry.implementation;
    e["config"] = r.entry.config;
    e["time_ns"] = r.entry.time_ns;
    if (r.entry.default_time_ns > 0) e["default_time_ns"] = r.entry.default_time_ns;
    if (r.entry.warm_time_ns > 0) e["warm_time_ns"] = r.entry.warm_time_ns;
    if (r.entry.warm_default_time_ns > 0) e["warm_default_time_ns"] = r.entry.warm_default_time_ns;
    if (!r.entry.description.empty()) e["description"] = r.entry.description;
    entries.push_back(std::move(e));
  }
  boost::json::object root;
  root["format"] = kFormat;
  root["format_version"] = format_version;
  root["library_version"] = library_version;
  root["entries"] = std::move(entries);
  // One entry per line: diffs of a shipped table stay readable.
  std::string out = "{\"format\":" + boost::json::serialize(root["format"]) +
                    ",\"format_version\":" + boost::json::serialize(root["format_version"]) +
                    ",\"library_version\":" + boost::json::serialize(root["library_version"]) +
                    ",\"entries\":[";
  const auto& list = root["entries"].get_array();
  for (std::size_t i = 0; i < list.size(); ++i) {
    out += i ? ",\n  " : "\n  ";
    out += boost::json::serialize(list[i]);
  }
  out += list.empty() ? "]}\n" : "\n]}\n";
  return out;
}

result<tune_load_report> tune_table::merge_json(std::string_view text,
                                                std::string_view library_version,
                                                std::string_view device) {
  auto parsed = parse(text);
  if (!parsed) return parsed.why();
  parsed_file& file = parsed.value();
  tune_load_report report;
  report.entries = file.entries.size();
  report.file_version = file.version;
  if (file.version != library_version) {
    report.other_version = true;
    return report;
  }
  lock_guard g(mu_);
  for (parsed_entry& p : file.entries) {
    if (!device.empty() && p.device != device) {
      ++report.other_device;
      continue;
    }
    if (put_if_faster_locked(slot(p.device, p.key), std::move(p.entry))) {
      ++report.taken;
    } else {
      ++report.kept_faster;
    }
  }
  return report;
}

result<tune_load_report> tune_table::load_file(const std::string& path,
                                               std::string_view library_version,
                                               std::string_view device) {
  auto text = read_file(path);
  if (!text) return text.why();
  auto r = merge_json(text.value(), library_version, device);
  if (!r) return failure{r.why().code, path + ": " + r.why().message};
  return r;
}

result<std::size_t> tune_table::save_file(const std::string& path, std::string_view library_version,
                                          bool merge_existing) const {
  // Held until the rename: see lock_table and save_gate.
  const std::lock_guard<std::mutex> gate(save_gate());
  auto lock = lock_table(path);
  if (!lock) return lock.why();
  std::string text;
  std::size_t count = 0;
  if (merge_existing) {
    tune_table combined;
    combined.merge(*this);
    // A missing, unreadable (not a regular file, too large), corrupt or
    // other-version file is replaced.
    if (auto existing = read_file(path)) {
      (void)combined.merge_json(existing.value(), library_version);
    }
    text = combined.to_json(library_version);
    count = combined.size();
  } else {
    text = to_json(library_version);
    count = size();
  }
  if (text.size() > max_file_bytes) {
    return failure{status::runtime_error, "tune table " + path +
                                              ": not written: " + too_large(text.size()) +
                                              " (loading would refuse it)"};
  }
  auto ok = write_atomically(path, text);
  if (!ok) return ok.why();
  return count;
}

}  // namespace primcache
