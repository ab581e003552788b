#include "primcache/persist/directory_store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <random>
#include <tuple>
#include <utility>

#include "primcache/base/env.hpp"
#include "primcache/base/error.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "primcache/keyhash/key.hpp"

namespace primcache {
namespace {

using bytes = std::vector<std::byte>;

constexpr const char* tmp_dir = ".tmp";
constexpr const char* size_file = "size.txt";
constexpr const char* lock_file = ".lock";
// An entry's files; the RFC's names.
constexpr const char* key_file = "key.bin";
constexpr const char* kernel_file = "kernel.bin";
// Writers' leftovers are removed once their process is gone, or after this
// long whatever the process (a writer in another PID namespace).
constexpr std::int64_t stale_after_seconds = 3600;

// read_all_at's and open_entry_dir's answers, besides 0 and -errno, for a
// file or directory no entry of the store can have: they make the entry
// bad, where an errno only makes it unreadable for now.
enum bad_file : int {
  not_a_regular_file = 1,  // a FIFO (whose open would wait for a writer), a device, a directory
  larger_than_any_entry =
      2,  // over max_entry_file_bytes; a huge sparse file could not be allocated
  // Another user could have written it, and so chosen the code it holds:
  // the check open() makes of the cache dir would be worth nothing if what
  // is inside it went unchecked.
  owned_by_another_user = 3,        // neither root nor this process's effective user
  writable_by_group_or_others = 4,  // whoever owns it
  not_a_directory = 5,              // an entry that is a symlink (never followed) or a file
};

// The largest file of an entry that put() writes and get() reads, whatever
// the capacity (which differs between the processes sharing a directory:
// one with a small capacity must not call a larger one's entries bad).
// Kernel objects are kilobytes to a few megabytes.
constexpr std::uint64_t max_entry_file_bytes = std::uint64_t{1} << 30;

std::uint64_t megabytes_to_bytes(std::uint64_t m) {
  return m > (UINT64_MAX >> 20) ? UINT64_MAX : m << 20;
}

std::string errno_text(int negative_errno) {
  return std::strerror(-negative_errno);
}

// What is wrong with an entry's file that read_all_at refused with `r`.
std::string read_failure(const char* file, int r) {
  switch (r) {
    case not_a_regular_file: return std::string(file) + " is not a regular file";
    case larger_than_any_entry:
      return std::string(file) + " is larger than any entry (" +
             std::to_string(max_entry_file_bytes >> 20) + " MB)";
    case owned_by_another_user:
      return std::string(file) + " is owned by another user: refusing to load code from it";
    case writable_by_group_or_others:
      return std::string(file) + " is writable by group or others: refusing to load code from it";
    case not_a_directory:
      return std::string(file) + " is not a directory (a symlink is never followed)";
    default: return std::string(file) + " cannot be read: " + errno_text(r);
  }
}

// 0 when only root or this process's effective user can have written the
// file or directory `st` describes (as open() requires of the cache dir),
// else the bad_file saying who else could.
int foreign_writer(const struct stat& st) {
  if (st.st_uid != ::geteuid() && st.st_uid != 0) return owned_by_another_user;
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) return writable_by_group_or_others;
  return 0;
}

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string user_name(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[1024];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
    return std::string(found->pw_name);
  }
  return "unknown";
}

bool is_bucket_name(std::string_view n) {
  return n.size() == 16 && std::all_of(n.begin(), n.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool is_entry_name(std::string_view n) {
  if (n.empty() || n.size() > 9) return false;
  if (n.size() > 1 && n[0] == '0') return false;
  return std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string bucket_name(std::uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Names in a directory, without . and ..; empty when it cannot be read.
std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    out.emplace_back(n);
  }
  ::closedir(d);
  return out;
}

// The numbered entries of a bucket, ascending.
std::vector<unsigned> entry_numbers(const std::string& bucket_path) {
  std::vector<unsigned> out;
  for (const std::string& n : list_dir(bucket_path)) {
    if (is_entry_name(n)) out.push_back(static_cast<unsigned>(std::stoul(n)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);  // a concurrent deleter may race us; fine
}

std::uint64_t entry_size_on_disk(const std::string& entry_path) {
  std::uint64_t total = 0;
  struct stat st {};
  if (::stat((entry_path + "/" + key_file).c_str(), &st) == 0) total += st.st_size;
  if (::stat((entry_path + "/" + kernel_file).c_str(), &st) == 0) total += st.st_size;
  return total;
}

bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// This process's PID namespace: the inode of /proc/self/ns/pid, unique
// among the namespaces of a running kernel. 0: unknown (no /proc).
std::uint64_t own_pid_namespace() {
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_ino);
}

// Who made a temporary, from its name: <kind>-<pid>-<counter>-<random>-<pid
// namespace>. The namespace comes last so that earlier versions, which read
// only the pid, still read it. 0: not said (a name from an earlier version,
// or one made without /proc) or malformed.
struct temporary_writer {
  long pid = 0;
  std::uint64_t pid_namespace = 0;
};

temporary_writer writer_of(std::string_view name) {
  std::vector<std::string_view> fields;
  for (std::size_t start = 0;;) {
    std::size_t dash = name.find('-', start);
    fields.push_back(name.substr(start, dash == std::string_view::npos ? dash : dash - start));
    if (dash == std::string_view::npos) break;
    start = dash + 1;
  }
  temporary_writer w;
  if (fields.size() >= 2) {
    if (result<std::int64_t> pid = parse_int(fields[1], 1, INT32_MAX)) w.pid = pid.value();
  }
  if (fields.size() == 5) {
    if (result<std::int64_t> ns = parse_int(fields[4], 1, INT64_MAX)) {
      w.pid_namespace = static_cast<std::uint64_t>(ns.value());
    }
  }
  return w;
}

}  // namespace

struct directory_store::state {
  std::string root;
  std::atomic<std::uint64_t> capacity_mb{0};
  bool read_only = false;
  entry_format format;
  std::shared_ptr<file_ops> files;
  std::function<std::uint64_t(std::span<const std::byte>)> bucket_hash;
  int lock_fd = -1;
  std::atomic<std::uint64_t> next_temp{0};
  // Named in this process's temporaries; 0: unknown.
  std::uint64_t pid_namespace = 0;

  // Serializes this process's writers; the flock on lock_fd serializes
  // processes (a flock held through one descriptor does not exclude other
  // threads using the same descriptor, hence both).
  mutex write_mu;

  std::atomic<std::uint64_t> hits{0}, misses{0}, writes{0}, bytes_read{0}, bytes_written{0},
      evictions{0}, corrupt{0}, errors{0}, refusals{0};

  ~state() {
    if (lock_fd >= 0) ::close(lock_fd);
  }

  std::string bucket_path(std::span<const std::byte> key) const {
    std::uint64_t h = bucket_hash ? bucket_hash(key) : primcache::key(key).hash();
    return root + "/" + bucket_name(h);
  }

  // ---- file helpers through the seam; each returns 0 or -errno ----

  // An entry's file, whole. 0, -errno, or a bad_file: a file no entry can
  // have is refused before anything is allocated for it.
  int read_all_at(int dirfd, const char* name, bytes& out) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
    // writer, forever. (It changes nothing for a regular file.)
    int fd = files->open_at(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (fd < 0) return fd;
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      int e = -errno;
      files->close(fd);
      return e;
    }
    if (!S_ISREG(st.st_mode)) {
      files->close(fd);
      return not_a_regular_file;
    }
    if (static_cast<std::uint64_t>(st.st_size) > max_entry_file_bytes) {
      files->close(fd);
      return larger_than_any_entry;
    }
    // Checked on the descriptor we read through, so a file swapped in after
    // the check is not the one read.
    if (int foreign = foreign_writer(st); foreign != 0) {
      files->close(fd);
      return foreign;
    }
    try {
      out.resize(static_cast<std::size_t>(st.st_size));
    } catch (const std::bad_alloc&) {
      files->close(fd);
      return -ENOMEM;  // a failure to report, not to throw at the caller
    }
    std::size_t got = 0;
    while (got < out.size()) {
      long r = files->read(fd, out.data() + got, out.size() - got);
      if (r < 0) {
        files->close(fd);
        return static_cast<int>(r);
      }
      if (r == 0) break;  // shorter than fstat said: the decode will see it
      got += static_cast<std::size_t>(r);
    }
    out.resize(got);
    files->close(fd);
    return 0;
  }

  // Opens the entry directory `path` into `dfd`, for reading its files
  // through. 0, -errno (dfd -1), or a bad_file: not_a_directory (dfd -1)
  // for a symlink, which is never followed (it could lead out of the
  // checked directory), or another user's mark (dfd open, so that the
  // caller can tell this entry from a later one under the same number).
  int open_entry_dir(const std::string& path, int& dfd) {
    dfd = files->open_at(AT_FDCWD, path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (dfd == -ELOOP || dfd == -ENOTDIR) {
      dfd = -1;
      return not_a_directory;
    }
    if (dfd < 0) {
      int e = dfd;
      dfd = -1;
      return e;
    }
    struct stat st {};
    if (::fstat(dfd, &st) != 0) {
      int e = -errno;
      files->close(dfd);
      dfd = -1;
      return e;
    }
    return foreign_writer(st);
  }

  int write_new_file(const std::string& path, std::span<const std::byte> b, bool stamp = false) {
    int fd = files->open_at(AT_FDCWD, path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (fd < 0) return fd;
    std::size_t done = 0;
    while (done < b.size()) {
      long r = files->write(fd, b.data() + done, b.size() - done);
      if (r < 0) {
        files->close(fd);
        return static_cast<int>(r);
      }
      if (r == 0) {
        files->close(fd);
        return -EIO;
      }
      done += static_cast<std::size_t>(r);
    }
    if (stamp) {
      // The entry's creation time, to the nanosecond: file systems stamp
      // writes with a coarse clock (a few ms), too coarse to order entries
      // written in quick succession for oldest-first eviction.
      struct timespec times[2];
      times[0].tv_nsec = UTIME_OMIT;
      ::clock_gettime(CLOCK_REALTIME, &times[1]);
      ::futimens(fd, times);
    }
    int r = files->fsync(fd);
    int c = files->close(fd);
    return r != 0 ? r : c;
  }

  int fsync_dir(const std::string& path) {
    int fd = files->open_at(AT_FDCWD, path.c_str(), O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) return fd;
    int r = files->fsync(fd);
    files->close(fd);
    return r;
  }

  // <kind>-<pid>-<counter>-<random>-<pid namespace>; see writer_of.
  std::string temp_name(const char* kind) {
    static thread_local std::minstd_rand rng(std::random_device{}());
    return root + "/" + tmp_dir + "/" + kind + "-" + std::to_string(::getpid()) + "-" +
           std::to_string(next_temp.fetch_add(1)) + "-" + std::to_string(rng()) + "-" +
           std::to_string(pid_namespace);
  }

  // ---- entries ----

  // Whether a bucket already holds an entry whose key.bin is `key`.
  bool bucket_has(const std::string& bucket, std::span<const std::byte> key) {
    for (unsigned n : entry_numbers(bucket)) {
      std::string p = bucket + "/" + std::to_string(n);
      int dfd = -1;
      if (open_entry_dir(p, dfd) != 0) {
        if (dfd >= 0) files->close(dfd);
        continue;  // a bad entry: get() removes it, and put() may add a good one
      }
      bytes k;
      int r = read_all_at(dfd, key_file, k);
      files->close(dfd);
      if (r == 0 && k.size() == key.size() &&
          std::equal(k.begin(), k.end(), key.begin(), key.end())) {
        return true;
      }
    }
    return false;
  }

  // ---- size.txt, under the lock ----

  // The bytes every entry occupies, by walking the directory.
  std::uint64_t scan_size() const {
    std::uint64_t total = 0;
    for (const std::string& b : list_dir(root)) {
      if (!is_bucket_name(b)) continue;
      std::string bp = root + "/" + b;
      for (unsigned n : entry_numbers(bp))
        total += entry_size_on_disk(bp + "/" + std::to_string(n));
    }
    return total;
  }

  // size.txt's value; nullopt when missing or malformed.
  std::optional<std::uint64_t> read_size_file() const {
    std::FILE* f = std::fopen((root + "/" + size_file).c_str(), "re");
    if (f == nullptr) return std::nullopt;
    char buf[32] = {};
    std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    std::string_view text(buf, n);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
    result<std::int64_t> v = parse_int(text, 0, INT64_MAX);
    if (!v) return std::nullopt;
    return static_cast<std::uint64_t>(v.value());
  }

  std::uint64_t current_size() const PRIMCACHE_REQUIRES(write_mu) {
    if (auto v = read_size_file()) return *v;
    return scan_size();
  }

  // Replaces size.txt (write beside, rename). 0 or -errno.
  int write_size_file(std::uint64_t value) PRIMCACHE_REQUIRES(write_mu) {
    std::string tmp = temp_name("size");
    std::string text = std::to_string(value) + "\n";
    int r = write_new_file(tmp, std::as_bytes(std::span(text)));
    if (r == 0) r = files->rename(tmp.c_str(), (root + "/" + size_file).c_str(), false);
    if (r != 0) ::unlink(tmp.c_str());
    return r;
  }

  // Moves an entry (or bucket) out of sight under .tmp; the caller deletes
  // the returned path once it has let go of the lock. Empty on failure.
  std::string unpublish(const std::string& path) PRIMCACHE_REQUIRES(write_mu) {
    std::string dead = temp_name("dead");
    if (files->rename(path.c_str(), dead.c_str(), true) != 0) return {};
    return dead;
  }

  struct aged_entry {
    std::int64_t sec;
    std::int64_t nsec;
    std::string path;
    std::uint64_t size;
  };

  // Removes the oldest entries until `size` + `incoming` fits `cap`. Returns
  // the new size; appends what to delete to `dead`.
  std::uint64_t evict(std::uint64_t size, std::uint64_t incoming, std::uint64_t cap,
                      std::vector<std::string>& dead) PRIMCACHE_REQUIRES(write_mu) {
    if (size + incoming <= cap) return size;
    std::vector<aged_entry> all;
    for (const std::string& b : list_dir(root)) {
      if (!is_bucket_name(b)) continue;
      std::string bp = root + "/" + b;
      for (unsigned n : entry_numbers(bp)) {
        std::string ep = bp + "/" + std::to_string(n);
        struct stat st {};
        std::int64_t sec = 0, nsec = 0;  // no kernel.bin: oldest of all
        if (::stat((ep + "/" + kernel_file).c_str(), &st) == 0) {
          sec = st.st_mtim.tv_sec;
          nsec = st.st_mtim.tv_nsec;
        }
        all.push_back({sec, nsec, ep, entry_size_on_disk(ep)});
      }
    }
    std::sort(all.begin(), all.end(), [](const aged_entry& a, const aged_entry& b) {
      return std::tie(a.sec, a.nsec, a.path) < std::tie(b.sec, b.nsec, b.path);
    });
    // size.txt may be too high (a writer killed between raising it and
    // publishing, or after removing before lowering it): trust the walk we
    // just made.
    std::uint64_t actual = 0;
    for (const aged_entry& e : all) actual += e.size;
    size = actual;
    for (const aged_entry& e : all) {
      if (size + incoming <= cap) break;
      std::string d = unpublish(e.path);
      if (d.empty()) continue;
      dead.push_back(std::move(d));
      size -= std::min(size, e.size);
      evictions.fetch_add(1, std::memory_order_relaxed);
      ::rmdir(e.path.substr(0, e.path.rfind('/')).c_str());  // fails unless the bucket is empty
    }
    return size;
  }

  // Removes leftovers under .tmp whose writer is gone. Returns their number.
  std::uint64_t clean_temporaries(bool remove) {
    std::uint64_t stale = 0;
    std::string tp = root + "/" + tmp_dir;
    const std::int64_t now = ::time(nullptr);
    for (const std::string& n : list_dir(tp)) {
      std::string p = tp + "/" + n;
      bool is_stale = n.rfind("dead-", 0) == 0;
      if (!is_stale) {
        const temporary_writer w = writer_of(n);
        struct stat st {};
        bool old = ::lstat(p.c_str(), &st) == 0 && now - st.st_mtim.tv_sec > stale_after_seconds;
        // A pid names a process only in the PID namespace it was taken in.
        // A writer in another (another container sharing the directory) is
        // invisible to kill() here while it writes, and so is one that did
        // not name its namespace (an earlier version, which may still be
        // running beside us): theirs wait for the age rule. Deleting a live
        // writer's files costs its entry; waiting costs an hour of disk.
        const bool same_namespace = pid_namespace != 0 && w.pid_namespace == pid_namespace;
        is_stale = old || (same_namespace && w.pid != ::getpid() && !process_alive(w.pid));
      }
      if (!is_stale) continue;
      ++stale;
      if (remove) remove_tree(p);
    }
    return stale;
  }
};

// The process mutex and the directory's flock, for one writer's critical
// section.
class PRIMCACHE_SCOPED_CAPABILITY directory_lock {
 public:
  explicit directory_lock(mutex& mu, int fd) PRIMCACHE_ACQUIRE(mu) : mu_(mu), fd_(fd) {
    mu_.lock();
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~directory_lock() PRIMCACHE_RELEASE() {
    ::flock(fd_, LOCK_UN);
    mu_.unlock();
  }
  directory_lock(const directory_lock&) = delete;
  directory_lock& operator=(const directory_lock&) = delete;

 private:
  mutex& mu_;
  int fd_;
};

namespace {

// Creates `path` and its missing parents with mode 0700.
void make_directories(file_ops& files, const std::string& path) {
  std::string partial;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    int r = files.mkdir(partial.c_str(), 0700);
    if (r != 0 && r != -EEXIST) {
      throw error(status::runtime_error, "persistent cache dir " + path + ": cannot create " +
                                             partial + ": " + errno_text(r));
    }
  }
}

// `path` with every symlink resolved. The store uses this name alone from
// then on: a link re-pointed later cannot send it elsewhere.
std::string resolve(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) {
    int e = errno;
    throw error(e == ENOENT ? status::not_found : status::runtime_error,
                "persistent cache dir " + path + " cannot be opened: " + std::strerror(e));
  }
  std::string out(real);
  std::free(real);
  return out;
}

std::string writable_by(mode_t mode) {
  const bool group = (mode & S_IWGRP) != 0;
  const bool others = (mode & S_IWOTH) != 0;
  return group && others ? "group and others" : group ? "group" : "others";
}

// `name`: the directory as given, and where it resolves to when that differs.
void check_directory(const std::string& name, const std::string& resolved) {
  struct stat st {};
  if (::lstat(resolved.c_str(), &st) != 0) {
    int e = errno;
    throw error(e == ENOENT ? status::not_found : status::runtime_error,
                "persistent cache dir " + name + " cannot be opened: " + std::strerror(e));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw error(status::invalid_arguments, "persistent cache dir " + name + " is not a directory");
  }
  const uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    throw error(status::permission_denied,
                "persistent cache dir " + name + " is owned by " + user_name(st.st_uid) + " (uid " +
                    std::to_string(st.st_uid) + "), not by " + user_name(me) + " (uid " +
                    std::to_string(me) + ") who runs this process: refusing to load code from it");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw error(status::permission_denied,
                "persistent cache dir " + name + " is writable by " + writable_by(st.st_mode) +
                    " (mode " + octal_mode(st.st_mode) +
                    "): refusing to load code from it; chmod go-w " + resolved);
  }
}

// Every directory above `resolved`. Whoever may rename entries of one of
// them can move the cache dir (or a directory on its way) aside and put
// their own in its place while we run: each must be owned by root or by
// us, and if group or others can write it, have the sticky bit (as /tmp
// does), which lets only an entry's owner rename it.
void check_ancestors(const std::string& name, const std::string& resolved) {
  const uid_t me = ::geteuid();
  for (std::size_t slash = resolved.find('/'); slash != std::string::npos;
       slash = resolved.find('/', slash + 1)) {
    const std::string dir = slash == 0 ? "/" : resolved.substr(0, slash);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      throw error(status::permission_denied, "persistent cache dir " + name + " is in " + dir +
                                                 ", which changed while it was checked: "
                                                 "refusing to load code from it");
    }
    if (st.st_uid != me && st.st_uid != 0) {
      const std::string runner = user_name(me) + " (uid " + std::to_string(me) + ")";
      throw error(status::permission_denied,
                  "persistent cache dir " + name + " is in " + dir + ", which is owned by " +
                      user_name(st.st_uid) + " (uid " + std::to_string(st.st_uid) + "), not by " +
                      (me == 0 ? runner : "root or by " + runner) +
                      " who runs this process: its owner could put another directory in the "
                      "cache dir's place; refusing to load code from it");
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
      throw error(status::permission_denied,
                  "persistent cache dir " + name + " is in " + dir + ", which is writable by " +
                      writable_by(st.st_mode) + " (mode " + octal_mode(st.st_mode) +
                      ") without the sticky bit: they could put another directory in the cache "
                      "dir's place; refusing to load code from it; chmod +t " +
                      dir + ", or chmod go-w " + dir);
    }
  }
}

// The staging directory .tmp, which open() found already there: put()
// writes an entry's files in a directory of its own under it before moving
// it into place, so whoever else could write .tmp could move that directory
// aside and put theirs (or a symlink) in its place between the two steps.
void check_staging_directory(const std::string& root, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    const int e = errno;
    throw error(status::runtime_error,
                "persistent cache dir " + root + ": cannot inspect .tmp: " + std::strerror(e));
  }
  const std::string where = "persistent cache dir " + root + ": its .tmp ";
  if (!S_ISDIR(st.st_mode)) {
    throw error(status::permission_denied,
                where +
                    "is not a directory (a symlink is never followed): refusing to load "
                    "code from it; remove " +
                    path);
  }
  const int foreign = foreign_writer(st);
  if (foreign == 0) return;
  const bool owner = foreign == owned_by_another_user;
  throw error(status::permission_denied,
              where +
                  (owner ? "is owned by " + user_name(st.st_uid) + " (uid " +
                               std::to_string(st.st_uid) + ")"
                         : "is writable by " + writable_by(st.st_mode) + " (mode " +
                               octal_mode(st.st_mode) + ")") +
                  ": they could replace an entry while it is written; refusing to load code from "
                  "it; " +
                  (owner ? "remove " : "chmod go-w ") + path);
}

}  // namespace

std::string_view to_string(put_status s) noexcept {
  switch (s) {
    case put_status::stored: return "stored";
    case put_status::exists: return "exists";
    case put_status::read_only: return "read_only";
    case put_status::too_large: return "too_large";
    case put_status::failed: return "failed";
  }
  return "unknown";
}

blob_store::~blob_store() = default;

std::unique_ptr<directory_store> directory_store::open(directory_store_options options) {
  if (options.path.empty()) {
    throw error(status::invalid_arguments, "persistent cache dir is empty");
  }
  auto s = std::make_unique<state>();
  s->root = options.path;
  while (s->root.size() > 1 && s->root.back() == '/') s->root.pop_back();
  s->capacity_mb.store(options.capacity_mb);
  s->read_only = options.read_only;
  s->format = std::move(options.format);
  s->files = options.files ? std::move(options.files) : system_file_ops();
  s->bucket_hash = std::move(options.bucket_hash);

  if (!s->read_only) make_directories(*s->files, s->root);
  const std::string resolved = resolve(s->root);
  const std::string name = resolved == s->root ? resolved : s->root + " (" + resolved + ")";
  check_directory(name, resolved);
  check_ancestors(name, resolved);
  // Every path the store makes from now on starts here.
  s->root = resolved;
  s->pid_namespace = own_pid_namespace();
  if (!s->read_only) {
    std::string tp = s->root + "/" + tmp_dir;
    int r = s->files->mkdir(tp.c_str(), 0700);
    if (r != 0 && r != -EEXIST) {
      throw error(status::runtime_error,
                  "persistent cache dir " + s->root + ": cannot create .tmp: " + errno_text(r));
    }
    if (r == -EEXIST) check_staging_directory(s->root, tp);
    std::string lp = s->root + "/" + lock_file;
    s->lock_fd = s->files->open_at(AT_FDCWD, lp.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
    if (s->lock_fd < 0) {
      int e = s->lock_fd;
      s->lock_fd = -1;
      throw error(status::runtime_error, "persistent cache dir " + s->root +
                                             ": cannot open its lock file: " + errno_text(e));
    }
    s->clean_temporaries(true);
    directory_lock g(s->write_mu, s->lock_fd);
    if (!s->read_size_file()) s->write_size_file(s->scan_size());
  }
  return std::unique_ptr<directory_store>(new directory_store(std::move(s)));
}

directory_store::directory_store(std::unique_ptr<state> s) : s_(std::move(s)) {}
directory_store::~directory_store() = default;

const std::string& directory_store::path() const noexcept {
  return s_->root;
}
const entry_format& directory_store::format() const noexcept {
  return s_->format;
}
bool directory_store::read_only() const noexcept {
  return s_->read_only;
}
std::string directory_store::describe() const {
  return std::string(s_->read_only ? "read-only " : "") + "directory " + s_->root;
}

std::optional<std::vector<std::byte>> directory_store::get(std::span<const std::byte> key) {
  state& s = *s_;
  const std::string bucket = s.bucket_path(key);
  for (unsigned n : entry_numbers(bucket)) {
    const std::string ep = bucket + "/" + std::to_string(n);
    // The entry's directory, held open: its two files come from one entry
    // even if it is removed and its number reused meanwhile.
    int dfd = -1;
    int r = s.open_entry_dir(ep, dfd);
    if (r < 0) {
      if (r != -ENOENT) s.errors.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // A directory or key.bin no entry can have makes the entry bad,
    // whatever its key.
    bool bad = r > 0;
    bytes k;
    bytes entry;
    if (!bad) {
      r = s.read_all_at(dfd, key_file, k);
      bad = r > 0;
    }
    if (!bad &&
        (r != 0 || k.size() != key.size() || !std::equal(k.begin(), k.end(), key.begin()))) {
      // ENOENT: removed while we looked. Other errors are I/O failures.
      if (r != 0 && r != -ENOENT) s.errors.fetch_add(1, std::memory_order_relaxed);
      s.files->close(dfd);
      continue;
    }
    if (!bad) {
      r = s.read_all_at(dfd, kernel_file, entry);
      bad = r > 0;
    }
    // What we read, so that only it is removed: the directory held open, or
    // the symlink that was not followed.
    struct stat dst {};
    const bool have_ino = dfd >= 0 ? ::fstat(dfd, &dst) == 0 : ::lstat(ep.c_str(), &dst) == 0;
    if (dfd >= 0) s.files->close(dfd);
    if (r < 0) {
      if (r != -ENOENT) s.errors.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (!bad) {
      decoded_entry d = decode_entry(s.format, key, entry);
      if (d.ok()) {
        s.hits.fetch_add(1, std::memory_order_relaxed);
        s.bytes_read.fetch_add(d.payload.size(), std::memory_order_relaxed);
        return std::move(d.payload);
      }
    }
    s.corrupt.fetch_add(1, std::memory_order_relaxed);
    if (!s.read_only && have_ino) {
      // Remove it, if it is still the entry we read (not a newer one under
      // the same number).
      std::string dead;
      {
        directory_lock g(s.write_mu, s.lock_fd);
        struct stat now {};
        if (::lstat(ep.c_str(), &now) == 0 && now.st_ino == dst.st_ino &&
            now.st_dev == dst.st_dev) {
          dead = s.unpublish(ep);
          // A damaged entry's files no longer have the size size.txt
          // counted: walk the store once (this is rare) rather than guess.
          if (!dead.empty()) s.write_size_file(s.scan_size());
        }
      }
      if (!dead.empty()) remove_tree(dead);
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return std::nullopt;
}

put_result directory_store::put(std::span<const std::byte> key,
                                std::span<const std::byte> payload) {
  state& s = *s_;
  if (s.read_only) {
    s.refusals.fetch_add(1, std::memory_order_relaxed);
    return {put_status::read_only, "persistent cache dir " + s.root + " is read-only"};
  }
  // Bounds first: an entry refused is never copied.
  const std::uint64_t encoded_size = encoded_entry_size(s.format, key.size(), payload.size());
  const std::uint64_t entry_size =
      encoded_size > UINT64_MAX - key.size() ? UINT64_MAX : key.size() + encoded_size;
  const std::uint64_t cap = megabytes_to_bytes(s.capacity_mb.load());
  if (encoded_size > max_entry_file_bytes || key.size() > max_entry_file_bytes) {
    s.refusals.fetch_add(1, std::memory_order_relaxed);
    return {put_status::too_large, "an entry of " + std::to_string(entry_size) +
                                       " bytes exceeds the largest entry a store keeps (" +
                                       std::to_string(max_entry_file_bytes >> 20) + " MB)"};
  }
  if (entry_size > cap) {
    s.refusals.fetch_add(1, std::memory_order_relaxed);
    return {put_status::too_large, "an entry of " + std::to_string(entry_size) +
                                       " bytes exceeds the capacity of " +
                                       std::to_string(s.capacity_mb.load()) + " MB"};
  }
  const std::string bucket = s.bucket_path(key);
  if (s.bucket_has(bucket, key)) return {put_status::exists, {}};
  const bytes encoded = encode_entry(s.format, key, payload);

  auto failed = [&](const std::string& what, int err) {
    s.errors.fetch_add(1, std::memory_order_relaxed);
    return put_result{put_status::failed,
                      "persistent cache dir " + s.root + ": " + what + ": " + errno_text(err)};
  };

  // Write both files beside the store, where no reader looks.
  const std::string stage = s.temp_name("w");
  if (int r = s.files->mkdir(stage.c_str(), 0700); r != 0) {
    return failed("cannot create " + stage, r);
  }
  int r = s.write_new_file(stage + "/" + key_file, key);
  if (r == 0) r = s.write_new_file(stage + "/" + kernel_file, encoded, /*stamp=*/true);
  if (r == 0) r = s.fsync_dir(stage);
  if (r != 0) {
    remove_tree(stage);
    return failed("cannot write a new entry", r);
  }

  std::vector<std::string> dead;
  put_result out{put_status::stored, {}};
  {
    directory_lock g(s.write_mu, s.lock_fd);
    if (s.bucket_has(bucket, key)) {
      out = {put_status::exists, {}};
    } else {
      std::uint64_t size = s.evict(s.current_size(), entry_size, cap, dead);
      // The bucket is made only now: eviction removes the buckets it empties,
      // this one too when its only entry was the oldest.
      const int m = s.files->mkdir(bucket.c_str(), 0700);
      // size.txt grows before an entry appears and shrinks after one goes,
      // so a writer killed in between leaves it too high, never too low: a
      // low one would let the store pass its capacity unseen, a high one
      // only makes the next eviction walk the store and correct it.
      if (m != 0 && m != -EEXIST) {
        s.write_size_file(size);  // less what eviction removed
        out = failed("cannot create " + bucket, m);
      } else if (int w = s.write_size_file(size + entry_size); w != 0) {
        out = failed("cannot update size.txt", w);
      } else if (int f = s.fsync_dir(s.root); f != 0) {
        // Both changes above are names in the store's directory: made
        // durable before the entry appears, so a crash can lose the entry
        // but never keep it in a bucket that is gone or under a size.txt
        // that does not count it (which no later open would correct).
        s.write_size_file(size);
        out = failed("cannot fsync " + s.root, f);
      } else {
        std::string target;
        for (unsigned n = 0;; ++n) {
          target = bucket + "/" + std::to_string(n);
          r = s.files->rename(stage.c_str(), target.c_str(), true);
          if (r != -EEXIST && r != -ENOTEMPTY) break;
        }
        if (r != 0) {
          s.write_size_file(size);
          out = failed("cannot publish " + target, r);
        } else if (int f = s.fsync_dir(bucket); f != 0) {
          // Not durable: take it back rather than keep an entry that a
          // crash could lose or tear.
          if (std::string d = s.unpublish(target); !d.empty()) dead.push_back(d);
          s.write_size_file(size);
          out = failed("cannot fsync " + bucket, f);
        } else {
          s.writes.fetch_add(1, std::memory_order_relaxed);
          s.bytes_written.fetch_add(entry_size, std::memory_order_relaxed);
        }
      }
    }
  }
  remove_tree(stage);  // nothing left there once published
  for (const std::string& d : dead) remove_tree(d);
  return out;
}

bool directory_store::erase(std::span<const std::byte> key) {
  state& s = *s_;
  if (s.read_only) return false;
  const std::string bucket = s.bucket_path(key);
  std::string dead;
  {
    directory_lock g(s.write_mu, s.lock_fd);
    for (unsigned n : entry_numbers(bucket)) {
      std::string ep = bucket + "/" + std::to_string(n);
      int dfd = -1;
      int r = s.open_entry_dir(ep, dfd);
      bytes k;
      if (r == 0) r = s.read_all_at(dfd, key_file, k);
      if (dfd >= 0) s.files->close(dfd);
      if (r != 0 || k.size() != key.size() || !std::equal(k.begin(), k.end(), key.begin())) {
        continue;
      }
      std::uint64_t sz = entry_size_on_disk(ep);
      dead = s.unpublish(ep);
      if (dead.empty()) break;
      std::uint64_t total = s.current_size();
      s.write_size_file(total - std::min(total, sz));
      ::rmdir(bucket.c_str());
      break;
    }
  }
  if (dead.empty()) return false;
  remove_tree(dead);
  return true;
}

std::uint64_t directory_store::size() const {
  if (auto v = s_->read_size_file()) return *v;
  return s_->scan_size();
}

std::uint64_t directory_store::capacity() const {
  return s_->capacity_mb.load();
}

void directory_store::set_capacity(std::uint64_t megabytes) {
  state& s = *s_;
  s.capacity_mb.store(megabytes);
  if (s.read_only) return;
  std::vector<std::string> dead;
  {
    directory_lock g(s.write_mu, s.lock_fd);
    std::uint64_t before = s.current_size();
    std::uint64_t after = s.evict(before, 0, megabytes_to_bytes(megabytes), dead);
    if (after != before) s.write_size_file(after);
  }
  for (const std::string& d : dead) remove_tree(d);
}

void directory_store::clear() {
  state& s = *s_;
  if (s.read_only) {
    throw error(status::permission_denied,
                "persistent cache dir " + s.root + " is read-only: it cannot be cleared");
  }
  std::vector<std::string> dead;
  {
    directory_lock g(s.write_mu, s.lock_fd);
    for (const std::string& b : list_dir(s.root)) {
      if (!is_bucket_name(b)) continue;
      if (std::string d = s.unpublish(s.root + "/" + b); !d.empty()) dead.push_back(d);
    }
    if (s.write_size_file(s.scan_size()) != 0) s.errors.fetch_add(1, std::memory_order_relaxed);
  }
  for (const std::string& d : dead) remove_tree(d);
}

blob_store_stats directory_store::stats() const {
  const state& s = *s_;
  blob_store_stats out;
  out.hits = s.hits.load(std::memory_order_relaxed);
  out.misses = s.misses.load(std::memory_order_relaxed);
  out.writes = s.writes.load(std::memory_order_relaxed);
  out.bytes = size();
  out.bytes_read = s.bytes_read.load(std::memory_order_relaxed);
  out.bytes_written = s.bytes_written.load(std::memory_order_relaxed);
  out.evictions = s.evictions.load(std::memory_order_relaxed);
  out.corrupt_entries = s.corrupt.load(std::memory_order_relaxed);
  out.errors = s.errors.load(std::memory_order_relaxed);
  out.refusals = s.refusals.load(std::memory_order_relaxed);
  return out;
}

verify_report directory_store::verify(bool fix) {
  verify_options o;
  o.fix = fix;
  return verify(o);
}

verify_report directory_store::verify(const verify_options& options) {
  state& s = *s_;
  const bool fixing = options.fix && !s.read_only;
  std::uint64_t total = 0;
  if (options.progress) {
    for (const std::string& b : list_dir(s.root)) {
      if (is_bucket_name(b)) total += entry_numbers(s.root + "/" + b).size();
    }
  }
  verify_report rep;
  std::vector<std::string> dead;
  auto walk = [&]() PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
    rep.recorded_bytes = s.read_size_file().value_or(0);
    auto bad = [&](const std::string& p, std::string why) PRIMCACHE_NO_THREAD_SAFETY_ANALYSIS {
      rep.bad.push_back({p, std::move(why)});
      if (fixing) {
        if (std::string d = s.unpublish(p); !d.empty()) dead.push_back(d);
      }
    };
    for (const std::string& b : list_dir(s.root)) {
      if (b == size_file || b == lock_file || b == tmp_dir) continue;
      const std::string bp = s.root + "/" + b;
      struct stat st {};
      if (!is_bucket_name(b) || ::lstat(bp.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        bad(bp, "not a bucket of this store (a bucket is a directory named by 16 hex digits)");
        continue;
      }
      for (const std::string& n : list_dir(bp)) {
        const std::string ep = bp + "/" + n;
        if (!is_entry_name(n)) {
          bad(ep, "not an entry (entries are numbered 0, 1, ...)");
          continue;
        }
        ++rep.entries;
        if (options.progress) options.progress(rep.entries, std::max(total, rep.entries));
        int dfd = -1;
        if (int r = s.open_entry_dir(ep, dfd); r != 0) {
          if (dfd >= 0) s.files->close(dfd);
          bad(ep, r > 0 ? read_failure("the entry", r)
                        : "cannot be opened as a directory: " + errno_text(r));
          continue;
        }
        bytes k;
        bytes e;
        int rk = s.read_all_at(dfd, key_file, k);
        int re = rk == 0 ? s.read_all_at(dfd, kernel_file, e) : 0;
        s.files->close(dfd);
        // Out of memory says nothing of the entry: no verdict, and no fix
        // that would remove a good one (as std::bad_alloc escaping did).
        if (rk == -ENOMEM || re == -ENOMEM) throw std::bad_alloc();
        if (rk != 0) {
          bad(ep, read_failure(key_file, rk));
          continue;
        }
        if (re != 0) {
          bad(ep, read_failure(kernel_file, re));
          continue;
        }
        std::uint64_t h = s.bucket_hash ? s.bucket_hash(k) : primcache::key(k).hash();
        if (bucket_name(h) != b) {
          bad(ep, "key.bin hashes to bucket " + bucket_name(h) + ", not " + b);
          continue;
        }
        decoded_entry d = decode_entry(s.format, k, e);
        if (!d.ok()) {
          bad(ep, d.message);
          continue;
        }
        ++rep.good;
        rep.bytes += k.size() + e.size();
        if (options.on_good) options.on_good(k, e);
      }
      if (fixing) ::rmdir(bp.c_str());  // only if it ended up empty
    }
    rep.stale_temporaries = s.clean_temporaries(fixing);
    if (fixing) {
      if (s.write_size_file(rep.bytes) != 0) s.errors.fetch_add(1, std::memory_order_relaxed);
      rep.fixed = true;
    }
  };
  if (fixing) {
    directory_lock g(s.write_mu, s.lock_fd);
    walk();
  } else {
    walk();
  }
  for (const std::string& d : dead) remove_tree(d);
  return rep;
}

bool readonly_from_env(bool fallback) {
  return env_bool(persistent_cache_readonly_env, fallback);
}

}  // namespace primcache
