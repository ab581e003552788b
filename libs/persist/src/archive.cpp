#include "primcache/persist/archive.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "primcache/base/error.hpp"
#include "primcache/persist/entry.hpp"

namespace primcache {
namespace {

constexpr std::string_view head_magic = "PCARCHV\n";
constexpr std::string_view tail_magic = "PCAREND\n";
constexpr std::size_t head_size = 8 + 4 + 4;
constexpr std::size_t trailer_size = 8 + 8 + 16;

std::string errno_text(int e) {
  return std::strerror(e);
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
std::uint64_t get_le(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}
void put_checksum(std::string& out, XXH128_hash_t h) {
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>(h.high64 >> (8 * i)));
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>(h.low64 >> (8 * i)));
}

struct xxh_state_deleter {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};
using xxh_state = std::unique_ptr<XXH3_state_t, xxh_state_deleter>;

xxh_state new_hash() {
  xxh_state s(XXH3_createState());
  if (!s) throw std::bad_alloc();
  XXH3_128bits_reset(s.get());
  return s;
}

// Writes the archive beside its target; publish() fsyncs and renames.
class archive_writer {
 public:
  // The temporary gets a name no one can guess and is created, never
  // opened: a file or symlink someone planted beside the target (a
  // directory others can write) is never written through, and two exports
  // to one target never share a temporary.
  explicit archive_writer(const std::string& file) : file_(file), hash_(new_hash()) {
    std::string name = file + ".tmp-XXXXXX";
    fd_ = ::mkostemp(name.data(), O_CLOEXEC);  // O_CREAT | O_EXCL, mode 0600
    if (fd_ < 0) fail("cannot create a temporary file " + name, errno);
    temp_ = std::move(name);
  }
  ~archive_writer() {
    if (fd_ >= 0) ::close(fd_);
    if (!published_) ::unlink(temp_.c_str());
  }

  void write(std::string_view bytes) {
    XXH3_128bits_update(hash_.get(), bytes.data(), bytes.size());
    raw(bytes);
  }

  void publish(std::uint64_t count) {
    std::string t(tail_magic);
    put_u64(t, count);
    write(t);
    std::string sum;
    put_checksum(sum, XXH3_128bits_digest(hash_.get()));
    raw(sum);
    if (::fsync(fd_) != 0) fail("cannot fsync " + temp_, errno);
    if (::close(fd_) != 0) {
      fd_ = -1;
      fail("cannot close " + temp_, errno);
    }
    fd_ = -1;
    if (::rename(temp_.c_str(), file_.c_str()) != 0) fail("cannot rename it to " + file_, errno);
    published_ = true;
  }

 private:
  [[noreturn]] void fail(const std::string& what, int e) {
    throw error(status::runtime_error, "export to " + file_ + ": " + what + ": " + errno_text(e));
  }
  void raw(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t w = ::write(fd_, bytes.data(), bytes.size());
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("cannot write " + temp_, w < 0 ? errno : EIO);
      bytes.remove_prefix(static_cast<std::size_t>(w));
    }
  }

  std::string file_, temp_;
  int fd_ = -1;
  bool published_ = false;
  xxh_state hash_;
};

// Reads an archive from the start, hashing what it reads.
class archive_reader {
 public:
  explicit archive_reader(const std::string& file) : file_(file), hash_(new_hash()) {
    f_ = std::fopen(file.c_str(), "rbe");
    if (f_ == nullptr) {
      const int e = errno;
      throw error(e == ENOENT ? status::not_found : status::runtime_error,
                  "import " + file + ": cannot open it: " + errno_text(e));
    }
    struct stat st {};
    if (::fstat(::fileno(f_), &st) != 0 || !S_ISREG(st.st_mode)) {
      std::fclose(f_);
      throw error(status::runtime_error, "import " + file + ": not a regular file");
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  ~archive_reader() { std::fclose(f_); }
  archive_reader(const archive_reader&) = delete;
  archive_reader& operator=(const archive_reader&) = delete;

  [[noreturn]] void corrupt(const std::string& why) const {
    throw error(status::corrupt_data,
                "import " + file_ + ": " + why + "; nothing was imported from it");
  }

  // The header and the trailer's count (read without hashing, then back to
  // just after the header).
  std::uint64_t open_archive() {
    if (size_ < head_size + trailer_size) corrupt("truncated: too short for an archive");
    std::string h = read(head_size);
    if (std::string_view(h).substr(0, 8) != head_magic) {
      corrupt("not a primcache cache archive (bad magic)");
    }
    const auto* p = reinterpret_cast<const unsigned char*>(h.data());
    const std::uint32_t version = static_cast<std::uint32_t>(get_le(p + 8, 4));
    if (version != archive_format_version) {
      corrupt("archive format version " + std::to_string(version) + ", this build reads " +
              std::to_string(archive_format_version));
    }
    if (get_le(p + 12, 4) != 0) corrupt("unknown flags");
    if (std::fseek(f_, static_cast<long>(size_ - trailer_size), SEEK_SET) != 0) io_fail();
    unsigned char t[trailer_size];
    if (std::fread(t, 1, trailer_size, f_) != trailer_size) io_fail();
    if (std::string_view(reinterpret_cast<const char*>(t), 8) != tail_magic) {
      corrupt("truncated or damaged: no trailer at its end");
    }
    if (std::fseek(f_, static_cast<long>(head_size), SEEK_SET) != 0) io_fail();
    pos_ = head_size;
    return get_le(t + 8, 8);
  }

  // The next entry's key and bytes; false at the trailer.
  bool next(std::string& key, std::string& entry) {
    if (entries_left() == 0) return false;
    key = read_entry_part(read_length(4, "key"), "key");
    entry = read_entry_part(read_length(8, "entry"), "entry");
    return true;
  }

  // Checks the trailer's count and checksum, after the last entry.
  void check_trailer(std::uint64_t count_seen) {
    std::string t = read(trailer_size - 16);
    const std::uint64_t count = get_le(reinterpret_cast<const unsigned char*>(t.data()) + 8, 8);
    std::string want;
    put_checksum(want, XXH3_128bits_digest(hash_.get()));
    unsigned char got[16];
    if (std::fread(got, 1, 16, f_) != 16) io_fail();
    if (std::memcmp(want.data(), got, 16) != 0) {
      corrupt("checksum mismatch: the archive was altered or damaged");
    }
    if (count != count_seen) {
      corrupt("the trailer counts " + std::to_string(count) + " entries, the archive holds " +
              std::to_string(count_seen));
    }
  }

 private:
  [[noreturn]] void io_fail() const {
    throw error(status::runtime_error, "import " + file_ + ": cannot read it: " +
                                           (std::ferror(f_) ? errno_text(errno) : "short read"));
  }

  // Bytes between here and the trailer (pos_ never passes its start while
  // entries are read).
  std::uint64_t entries_left() const { return size_ - trailer_size - pos_; }

  std::uint64_t read_length(int width, const char* what) {
    std::string b = read_entry_part(static_cast<std::uint64_t>(width), what);
    return get_le(reinterpret_cast<const unsigned char*>(b.data()), width);
  }

  std::string read_entry_part(std::uint64_t n, const char* what) {
    if (n > entries_left()) {
      corrupt(std::string("truncated or damaged: an entry's ") + what + " (" + std::to_string(n) +
              " bytes) runs past the end of the entries");
    }
    return read(static_cast<std::size_t>(n));
  }

  std::string read(std::size_t n) {
    if (n > size_ - pos_) corrupt("truncated");
    std::string out(n, '\0');
    if (n > 0 && std::fread(out.data(), 1, n, f_) != n) io_fail();
    XXH3_128bits_update(hash_.get(), out.data(), n);
    pos_ += n;
    return out;
  }

  std::string file_;
  std::FILE* f_ = nullptr;
  std::uint64_t size_ = 0;
  std::uint64_t pos_ = 0;
  xxh_state hash_;
};

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

}  // namespace

archive_report export_archive(directory_store& store, const std::string& file,
                              const archive_progress& progress) {
  archive_writer w(file);
  std::string head(head_magic);
  put_u32(head, archive_format_version);
  put_u32(head, 0);
  w.write(head);
  archive_report rep;
  verify_options o;
  o.progress = progress;
  std::string rec;
  o.on_good = [&](std::span<const std::byte> key, std::span<const std::byte> entry) {
    rec.clear();
    put_u32(rec, static_cast<std::uint32_t>(key.size()));
    rec.append(reinterpret_cast<const char*>(key.data()), key.size());
    put_u64(rec, entry.size());
    w.write(rec);
    w.write({reinterpret_cast<const char*>(entry.data()), entry.size()});
    ++rep.entries;
    rep.bytes += key.size() + entry.size();
  };
  verify_report v = store.verify(o);
  rep.skipped = std::move(v.bad);
  w.publish(rep.entries);
  return rep;
}

archive_report import_archive(const std::string& file, directory_store& store,
                              const archive_progress& progress) {
  if (store.read_only()) {
    throw error(status::permission_denied,
                "import " + file + ": the store " + store.describe() + " is read-only");
  }
  archive_report rep;
  std::uint64_t total = 0;
  std::uint64_t done = 0;
  std::string key, entry;
  // Pass 1: everything checks, or nothing is published.
  {
    archive_reader r(file);
    total = 2 * r.open_archive();
    while (r.next(key, entry)) {
      decoded_entry d = decode_entry(store.format(), bytes_of(key), bytes_of(entry));
      if (!d.ok()) {
        r.corrupt("entry " + std::to_string(rep.entries + 1) + " (" + std::to_string(key.size()) +
                  "-byte key) is bad: " + d.message);
      }
      ++rep.entries;
      rep.bytes += key.size() + entry.size();
      if (progress) progress(++done, std::max(total, done));
    }
    r.check_trailer(rep.entries);
  }
  // Pass 2: publish, checking each entry again (the file could have changed).
  archive_reader r(file);
  r.open_archive();
  std::uint64_t n = 0;
  while (r.next(key, entry)) {
    ++n;
    decoded_entry d = decode_entry(store.format(), bytes_of(key), bytes_of(entry));
    if (!d.ok()) {
      throw error(status::corrupt_data, "import " + file + ": entry " + std::to_string(n) +
                                            " changed since it was checked: " + d.message + "; " +
                                            std::to_string(rep.stored) +
                                            " entries were imported before it");
    }
    put_result p = store.put(bytes_of(key), d.payload);
    if (p.status == put_status::stored) {
      ++rep.stored;
    } else if (p.status == put_status::exists) {
      ++rep.already_present;
    } else {
      throw error(status::runtime_error,
                  "import " + file + ": entry " + std::to_string(n) + " could not be stored (" +
                      std::string(to_string(p.status)) + "): " + p.message + "; " +
                      std::to_string(rep.stored) + " entries were imported before it");
    }
    if (progress) progress(++done, std::max(total, done));
  }
  return rep;
}

}  // namespace primcache
