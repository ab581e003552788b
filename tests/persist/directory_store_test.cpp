// The directory store in one process: the RFC's layout, round trips,
// collisions, capacity and oldest-first eviction, every kind of bad entry
// refused, counted and removed, the directory's ownership and mode,
// read-only mode, disk-full and I/O errors through the file layer, verify(),
// and its registration in control.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "faulty_file_ops.hpp"
#include "persist_test_support.hpp"
#include "primcache/base/env.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/persist/directory_store.hpp"
#include "primcache/persist/registration.hpp"

namespace fs = std::filesystem;
using primcache::directory_store;
using primcache::directory_store_options;
using primcache::put_status;
using primcache::test::as_bytes;
using primcache::test::payload_of;
using primcache::test::temp_dir;

namespace {

directory_store_options options_for(const std::string& path) {
  directory_store_options o;
  o.path = path;
  o.capacity_mb = 16;
  o.format.library_version = "test-1";
  return o;
}

// A store on `path` whose file calls go through `files` (faults, journal).
std::unique_ptr<directory_store> open_through(
    const std::string& path, const std::shared_ptr<primcache::test::faulty_file_ops>& files) {
  auto o = options_for(path);
  o.files = files;
  return directory_store::open(o);
}

// Every entry directory (bucket/n) under the store.
std::vector<std::string> entry_dirs(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& b : fs::directory_iterator(root)) {
    std::string name = b.path().filename();
    if (!b.is_directory() || name == ".tmp") continue;
    for (const auto& e : fs::directory_iterator(b.path())) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t leftovers(const std::string& root) {
  std::size_t n = 0;
  for (auto it = fs::directory_iterator(root + "/.tmp"); it != fs::directory_iterator(); ++it) ++n;
  return n;
}

std::uint64_t size_txt(const std::string& root) {
  std::ifstream f(root + "/size.txt");
  std::uint64_t v = 0;
  f >> v;
  return v;
}

std::vector<char> read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void write_file(const std::string& p, const std::vector<char>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}

// This process's PID namespace, as the store names it in its temporaries.
std::string pid_namespace() {
  struct stat st {};
  REQUIRE(::stat("/proc/self/ns/pid", &st) == 0);
  return std::to_string(st.st_ino);
}

// Runs `call` on another thread and says whether it returned within a few
// seconds. One that did not is blocked opening a FIFO among `fifos`: they
// are opened for writing until it returns, so a failing test ends instead of
// hanging the suite.
template <class Call>
bool returns_in_time(Call call, const std::vector<std::string>& fifos) {
  auto done = std::async(std::launch::async, std::move(call));
  const bool in_time = done.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  while (done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    for (const std::string& f : fifos) {
      int fd = ::open(f.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
  }
  done.get();  // rethrows what the call threw
  return in_time;
}

// Stores "victim" and "bystander" in `s`, whose directory is `root`;
// returns the victim's entry directory, for a test to damage.
std::string store_victim_and_bystander(directory_store& s, const std::string& root) {
  REQUIRE(s.put(as_bytes("victim"), payload_of("victim", 5000)).status == put_status::stored);
  REQUIRE(s.put(as_bytes("bystander"), payload_of("bystander", 5000)).status == put_status::stored);
  std::string victim;
  for (const auto& e : entry_dirs(root)) {
    if (read_file(e + "/key.bin") == std::vector<char>{'v', 'i', 'c', 't', 'i', 'm'}) victim = e;
  }
  REQUIRE_FALSE(victim.empty());
  return victim;
}

// Once the victim's bad entry is gone: the bystander is untouched, the
// store keeps working, and size.txt follows.
void check_store_recovers(directory_store& s) {
  CHECK(*s.get(as_bytes("bystander")) == payload_of("bystander", 5000));
  REQUIRE(s.put(as_bytes("victim"), payload_of("victim", 5000)).status == put_status::stored);
  CHECK(*s.get(as_bytes("victim")) == payload_of("victim", 5000));
  auto after = s.verify(false);
  CHECK(after.ok());
  CHECK(after.bytes == after.recorded_bytes);
}

}  // namespace

TEST_CASE("the directory store keeps the RFC's layout", "[persist][directory]") {
  temp_dir dir;
  const std::string root = dir.path() + "/cache";
  auto s = directory_store::open(options_for(root));

  struct stat st {};
  REQUIRE(::stat(root.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(fs::exists(root + "/size.txt"));
  CHECK(size_txt(root) == 0);

  REQUIRE(s->put(as_bytes("k1"), payload_of("k1", 1000)).status == put_status::stored);
  auto entries = entry_dirs(root);
  REQUIRE(entries.size() == 1);
  const std::string e = entries[0];
  CHECK(fs::path(e).filename() == "0");
  CHECK(fs::path(e).parent_path().filename().string().size() == 16);
  CHECK(read_file(e + "/key.bin") == std::vector<char>{'k', '1'});
  CHECK(fs::exists(e + "/kernel.bin"));
  REQUIRE(::stat(fs::path(e).parent_path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(::stat((e + "/kernel.bin").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(size_txt(root) == fs::file_size(e + "/kernel.bin") + 2);
  CHECK(s->size() == size_txt(root));
  CHECK(leftovers(root) == 0);
}

TEST_CASE("the directory store round-trips blobs", "[persist][directory]") {
  temp_dir dir;
  auto s = directory_store::open(options_for(dir.path()));

  SECTION("get returns what put stored; a second put of the key writes nothing") {
    for (std::size_t n : {0, 1, 4096, 100 * 1024}) {
      std::string k = "key-" + std::to_string(n);
      REQUIRE(s->put(as_bytes(k), payload_of(k, n)).status == put_status::stored);
      auto again = s->put(as_bytes(k), payload_of("other", 10));
      CHECK(again.status == put_status::exists);
      auto got = s->get(as_bytes(k));
      REQUIRE(got);
      CHECK(*got == payload_of(k, n));
    }
    auto st = s->stats();
    CHECK(st.hits == 4);
    CHECK(st.writes == 4);
    CHECK(st.misses == 0);
    CHECK(st.bytes == s->size());
    CHECK(st.bytes_read == 4096 + 1 + 100 * 1024);
  }
  SECTION("a missing key is a miss") {
    CHECK_FALSE(s->get(as_bytes("nothing")));
    CHECK(s->stats().misses == 1);
  }
  SECTION("erase removes the entry and its bytes") {
    s->put(as_bytes("a"), payload_of("a", 500));
    s->put(as_bytes("b"), payload_of("b", 500));
    const auto before = s->size();
    CHECK(s->erase(as_bytes("a")));
    CHECK_FALSE(s->erase(as_bytes("a")));
    CHECK_FALSE(s->get(as_bytes("a")));
    CHECK(s->get(as_bytes("b")));
    CHECK(s->size() < before);
    CHECK(entry_dirs(dir.path()).size() == 1);
  }
  SECTION("clear drops every entry") {
    for (int i = 0; i < 5; ++i) s->put(as_bytes("k" + std::to_string(i)), payload_of("x", 100));
    s->clear();
    CHECK(entry_dirs(dir.path()).empty());
    CHECK(s->size() == 0);
    CHECK_FALSE(s->get(as_bytes("k1")));
  }
  SECTION("another store object on the directory sees the entries") {
    s->put(as_bytes("shared"), payload_of("shared", 1234));
    auto other = directory_store::open(options_for(dir.path()));
    auto got = other->get(as_bytes("shared"));
    REQUIRE(got);
    CHECK(*got == payload_of("shared", 1234));
    CHECK(other->size() == s->size());
  }
  SECTION("a store of another library version does not load the entry") {
    s->put(as_bytes("k"), payload_of("k", 10));
    auto o = options_for(dir.path());
    o.format.library_version = "test-2";
    auto other = directory_store::open(o);
    CHECK_FALSE(other->get(as_bytes("k")));
    CHECK(other->stats().corrupt_entries == 1);
  }
}

TEST_CASE("keys that share a bucket are told apart by key.bin", "[persist][directory]") {
  temp_dir dir;
  auto o = options_for(dir.path());
  o.bucket_hash = [](std::span<const std::byte>) -> std::uint64_t { return 42; };
  auto s = directory_store::open(o);
  for (std::string k : {"a", "b", "c"}) {
    REQUIRE(s->put(as_bytes(k), payload_of(k, 300)).status == put_status::stored);
  }
  const std::string bucket = dir.path() + "/000000000000002a";
  CHECK(entry_dirs(dir.path()) ==
        std::vector<std::string>{bucket + "/0", bucket + "/1", bucket + "/2"});
  for (std::string k : {"a", "b", "c"}) {
    auto got = s->get(as_bytes(k));
    REQUIRE(got);
    CHECK(*got == payload_of(k, 300));
  }
  CHECK_FALSE(s->get(as_bytes("d")));

  SECTION("a new entry takes the lowest free number") {
    REQUIRE(s->erase(as_bytes("b")));
    REQUIRE(s->put(as_bytes("d"), payload_of("d", 300)).status == put_status::stored);
    CHECK(read_file(bucket + "/1/key.bin") == std::vector<char>{'d'});
    CHECK(*s->get(as_bytes("d")) == payload_of("d", 300));
    CHECK(*s->get(as_bytes("c")) == payload_of("c", 300));
  }
  SECTION("a swapped key.bin is caught by the key inside kernel.bin, counted and removed") {
    // Entry 0 holds a; make its key.bin say c, as if the files were mixed up.
    write_file(bucket + "/0/key.bin", {'c'});
    auto got = s->get(as_bytes("c"));
    // Entry 0 is refused; entry 2 (the real c) is found after it.
    REQUIRE(got);
    CHECK(*got == payload_of("c", 300));
    CHECK(s->stats().corrupt_entries == 1);
    CHECK_FALSE(fs::exists(bucket + "/0"));
    CHECK(s->verify(false).ok());
  }
}

TEST_CASE("the directory store respects its capacity, oldest entries first",
          "[persist][directory][capacity]") {
  temp_dir dir;
  auto o = options_for(dir.path());
  o.capacity_mb = 1;
  auto s = directory_store::open(o);
  const std::size_t entry = 300 * 1024;
  for (int i = 0; i < 3; ++i) {
    std::string k = "k" + std::to_string(i);
    REQUIRE(s->put(as_bytes(k), payload_of(k, entry)).status == put_status::stored);
  }
  CHECK(s->stats().evictions == 0);

  SECTION("a put past the capacity evicts the oldest") {
    REQUIRE(s->put(as_bytes("k3"), payload_of("k3", entry)).status == put_status::stored);
    CHECK(s->stats().evictions == 1);
    CHECK_FALSE(s->get(as_bytes("k0")));
    for (std::string k : {"k1", "k2", "k3"}) CHECK(s->get(as_bytes(k)));
    CHECK(s->size() <= (1u << 20));
    // Reading k1 does not make it younger: creation order, not use, decides.
    REQUIRE(s->put(as_bytes("k4"), payload_of("k4", entry)).status == put_status::stored);
    CHECK_FALSE(s->get(as_bytes("k1")));
    CHECK(s->get(as_bytes("k2")));
  }
  SECTION("lowering the capacity evicts at once") {
    s->set_capacity(0);
    CHECK(s->capacity() == 0);
    CHECK(s->size() == 0);
    CHECK(s->stats().evictions == 3);
    CHECK(entry_dirs(dir.path()).empty());
    auto r = s->put(as_bytes("k"), payload_of("k", 10));
    CHECK(r.status == put_status::too_large);
    CHECK_THAT(r.message, Catch::Contains("capacity of 0 MB"));
    CHECK(s->stats().refusals == 1);
  }
  SECTION("an entry larger than the whole capacity is refused, nothing evicted") {
    auto r = s->put(as_bytes("big"), payload_of("big", 2 << 20));
    CHECK(r.status == put_status::too_large);
    CHECK(s->stats().evictions == 0);
    CHECK(entry_dirs(dir.path()).size() == 3);
  }
  SECTION("size.txt agrees with the entries after evictions") {
    for (int i = 10; i < 20; ++i) {
      std::string k = "k" + std::to_string(i);
      s->put(as_bytes(k), payload_of(k, entry));
    }
    auto rep = s->verify(false);
    CHECK(rep.ok());
    CHECK(rep.bytes == rep.recorded_bytes);
    CHECK(rep.bytes <= (1u << 20));
    CHECK(rep.entries == 3);
  }
}

TEST_CASE("an entry over 1 GiB is refused whatever the capacity, before it is copied",
          "[persist][directory][capacity]") {
  temp_dir dir;
  auto o = options_for(dir.path());
  o.capacity_mb = 8192;
  auto s = directory_store::open(o);
  // Spans over memory nobody may read: the store must refuse on sizes alone.
  const primcache::test::untouched_bytes huge((std::size_t{1} << 30) + 1);
  SECTION("the payload") {
    auto r = s->put(as_bytes("big"), huge.span());
    CHECK(r.status == put_status::too_large);
    CHECK_THAT(r.message, Catch::Contains("exceeds the largest entry a store keeps (1024 MB)"));
  }
  SECTION("the key") {
    auto r = s->put(huge.span(), payload_of("k", 10));
    CHECK(r.status == put_status::too_large);
    CHECK_THAT(r.message, Catch::Contains("exceeds the largest entry a store keeps (1024 MB)"));
  }
  CHECK(s->stats().refusals == 1);
  CHECK(s->size() == 0);
  CHECK(entry_dirs(dir.path()).empty());
}

TEST_CASE("a put that evicts the only entry of its own bucket still publishes",
          "[persist][directory][capacity]") {
  temp_dir dir;
  auto o = options_for(dir.path());
  o.capacity_mb = 1;
  // Keys share a bucket by their first letter.
  o.bucket_hash = [](std::span<const std::byte> k) -> std::uint64_t {
    return k.empty() ? 0 : static_cast<std::uint64_t>(k[0]);
  };
  auto s = directory_store::open(o);
  const std::size_t entry = 400 * 1024;
  REQUIRE(s->put(as_bytes("a-old"), payload_of("a-old", entry)).status == put_status::stored);
  REQUIRE(s->put(as_bytes("b"), payload_of("b", entry)).status == put_status::stored);
  // a-new goes to a-old's bucket and needs a-old, the oldest, evicted: the
  // bucket is empty for a moment, and must still be there to publish into.
  auto r = s->put(as_bytes("a-new"), payload_of("a-new", entry));
  CHECK(r.status == put_status::stored);
  CHECK(r.message.empty());
  CHECK(s->stats().evictions == 1);
  CHECK(s->stats().errors == 0);
  CHECK_FALSE(s->get(as_bytes("a-old")));
  auto got = s->get(as_bytes("a-new"));
  REQUIRE(got);
  CHECK(*got == payload_of("a-new", entry));
  CHECK(leftovers(dir.path()) == 0);
  auto rep = s->verify(false);
  CHECK(rep.ok());
  CHECK(rep.entries == 2);
  CHECK(rep.bytes == rep.recorded_bytes);
}

TEST_CASE("bad entries are refused, counted and removed", "[persist][directory][corruption]") {
  temp_dir dir;
  const auto fleet =
      primcache::fleet_key::from_bytes(as_bytes("fleet secret, 32 bytes long....")).value();
  auto o = options_for(dir.path());
  o.format.key = &fleet;
  auto s = directory_store::open(o);
  const std::string victim = store_victim_and_bystander(*s, dir.path());
  const std::string kernel = victim + "/kernel.bin";
  auto bytes = read_file(kernel);

  SECTION("a flipped bit") {
    auto at = GENERATE(0, 9, 40, 2000, -20, -1);
    auto i = at >= 0 ? static_cast<std::size_t>(at) : bytes.size() + at;
    bytes[i] ^= 0x04;
    write_file(kernel, bytes);
  }
  SECTION("truncation") {
    auto keep = GENERATE(0, 5, 100, -1);
    bytes.resize(keep >= 0 ? static_cast<std::size_t>(keep) : bytes.size() - 1);
    write_file(kernel, bytes);
  }
  SECTION("a missing kernel.bin") {
    fs::remove(kernel);
  }
  SECTION("a forged entry: unsigned") {
    auto forged = primcache::encode_entry({.library_version = "test-1", .key = nullptr},
                                          as_bytes("victim"), as_bytes("evil"));
    write_file(kernel,
               std::vector<char>(reinterpret_cast<const char*>(forged.data()),
                                 reinterpret_cast<const char*>(forged.data()) + forged.size()));
  }
  SECTION("a forged entry: signed with another key") {
    auto other = primcache::fleet_key::from_bytes(as_bytes("not the fleet's key at all")).value();
    auto forged = primcache::encode_entry({.library_version = "test-1", .key = &other},
                                          as_bytes("victim"), as_bytes("evil"));
    write_file(kernel,
               std::vector<char>(reinterpret_cast<const char*>(forged.data()),
                                 reinterpret_cast<const char*>(forged.data()) + forged.size()));
  }

  auto report = s->verify(false);
  REQUIRE(report.bad.size() == 1);
  CHECK(report.bad[0].path == victim);
  CHECK(report.good == 1);

  CHECK_FALSE(s->get(as_bytes("victim")));
  // A missing kernel.bin reads as an entry being removed: skipped, not
  // counted; verify reports it and removes it.
  if (fs::exists(victim)) {
    CHECK(s->stats().corrupt_entries == 0);
    CHECK(s->verify(true).bad.size() == 1);
  } else {
    CHECK(s->stats().corrupt_entries == 1);
  }
  CHECK_FALSE(fs::exists(victim));
  CHECK(s->stats().hits == 0);
  check_store_recovers(*s);
}

TEST_CASE("an entry file that is not a regular file, or larger than any entry, is bad",
          "[persist][directory][corruption]") {
  // Found and removed by get(), or by verify(true).
  const bool via_get = GENERATE(true, false);
  temp_dir dir;
  auto s = directory_store::open(options_for(dir.path()));
  const std::string victim = store_victim_and_bystander(*s, dir.path());
  std::vector<std::string> fifos;

  // A FIFO blocks an open for reading until a writer comes: a store that
  // opened it so would hang get(), put() and verify().
  SECTION("a FIFO as kernel.bin") {
    fifos.push_back(victim + "/kernel.bin");
  }
  SECTION("a FIFO as key.bin") {
    fifos.push_back(victim + "/key.bin");
  }
  for (const std::string& f : fifos) {
    fs::remove(f);
    REQUIRE(::mkfifo(f.c_str(), 0600) == 0);
  }
  // A sparse file as large as no entry can be: reading it would need a
  // terabyte of memory (std::bad_alloc escaping get()).
  SECTION("a 1 TB sparse kernel.bin") {
    REQUIRE(::truncate((victim + "/kernel.bin").c_str(), off_t{1} << 40) == 0);
  }
  SECTION("a directory as kernel.bin") {
    fs::remove(victim + "/kernel.bin");
    fs::create_directory(victim + "/kernel.bin");
  }

  primcache::verify_report rep;
  REQUIRE(returns_in_time([&] { rep = s->verify(false); }, fifos));
  REQUIRE(rep.bad.size() == 1);
  CHECK(rep.bad[0].path == victim);
  CHECK(rep.good == 1);

  if (via_get) {
    std::optional<std::vector<std::byte>> got;
    REQUIRE(returns_in_time([&] { got = s->get(as_bytes("victim")); }, fifos));
    CHECK_FALSE(got);
    CHECK(s->stats().corrupt_entries == 1);
    CHECK(s->stats().misses == 1);
  } else {
    REQUIRE(returns_in_time([&] { rep = s->verify(true); }, fifos));
    CHECK(rep.fixed);
    CHECK(rep.bad.size() == 1);
  }
  // Still there, it would block the calls below.
  REQUIRE_FALSE(fs::exists(victim));
  check_store_recovers(*s);
}

TEST_CASE("an entry another user could have written is bad, and a symlink is not followed",
          "[persist][directory][security]") {
  // The directory's check at open() is worth nothing if what is inside it
  // is not checked: an entry file or directory that another user owns or
  // may write holds code of their choosing (the checksum stops no one
  // without a fleet key). Found and removed by get(), or by verify(true).
  const bool via_get = GENERATE(true, false);
  temp_dir dir;
  temp_dir elsewhere;
  auto s = directory_store::open(options_for(dir.path()));
  const std::string victim = store_victim_and_bystander(*s, dir.path());
  // What the other user puts there: a well-formed entry for the key.
  auto forged = primcache::encode_entry({.library_version = "test-1", .key = nullptr},
                                        as_bytes("victim"), as_bytes("evil"));
  write_file(victim + "/kernel.bin",
             std::vector<char>(reinterpret_cast<const char*>(forged.data()),
                               reinterpret_cast<const char*>(forged.data()) + forged.size()));
  std::string reason;
  std::string link_target;

  SECTION("kernel.bin writable by group and others") {
    ::chmod((victim + "/kernel.bin").c_str(), 0666);
    reason = "kernel.bin is writable by group or others";
  }
  SECTION("key.bin writable by group") {
    ::chmod((victim + "/key.bin").c_str(), 0620);
    reason = "key.bin is writable by group or others";
  }
  SECTION("the entry's directory writable by others") {
    ::chmod(victim.c_str(), 0703);
    reason = "writable by group or others";
  }
  SECTION("kernel.bin owned by another user") {
    if (::geteuid() != 0) {
      WARN("not root: cannot give a file to another user; ownership check not exercised");
      return;
    }
    REQUIRE(::chown((victim + "/kernel.bin").c_str(), 65534, 65534) == 0);
    reason = "kernel.bin is owned by another user";
  }
  SECTION("the entry's directory owned by another user") {
    if (::geteuid() != 0) {
      WARN("not root: cannot give a directory to another user; ownership check not exercised");
      return;
    }
    REQUIRE(::chown(victim.c_str(), 65534, 65534) == 0);
    reason = "owned by another user";
  }
  SECTION("the entry's directory a symlink to an entry outside the store") {
    link_target = elsewhere.path() + "/entry";
    fs::rename(victim, link_target);
    fs::create_directory_symlink(link_target, victim);
    reason = "symlink";
  }

  auto rep = s->verify(false);
  CHECK(rep.bad.size() == 1);
  if (!rep.bad.empty()) {
    CHECK(rep.bad[0].path == victim);
    CHECK_THAT(rep.bad[0].message, Catch::Contains(reason));
  }
  CHECK(rep.good == 1);

  if (via_get) {
    const std::optional<std::vector<std::byte>> got = s->get(as_bytes("victim"));
    CHECK_FALSE(got);
    if (got) CHECK(*got != as_bytes("evil"));
    CHECK(s->stats().corrupt_entries == 1);
    CHECK(s->stats().misses == 1);
    CHECK(s->stats().hits == 0);
  } else {
    rep = s->verify(true);
    CHECK(rep.fixed);
    CHECK(rep.bad.size() == 1);
  }
  CHECK_FALSE(fs::exists(fs::symlink_status(victim)));
  // Removing a link removes the link, never what it points to.
  if (!link_target.empty()) CHECK(fs::exists(link_target + "/kernel.bin"));
  check_store_recovers(*s);
}

TEST_CASE("verify finds every bad entry and stray file, and fixes them",
          "[persist][directory][verify]") {
  temp_dir dir;
  auto s = directory_store::open(options_for(dir.path()));
  for (int i = 0; i < 6; ++i) {
    std::string k = "k" + std::to_string(i);
    s->put(as_bytes(k), payload_of(k, 2000));
  }
  auto entries = entry_dirs(dir.path());
  // Damage two entries, move a third into the wrong bucket, add strays.
  auto b0 = read_file(entries[0] + "/kernel.bin");
  b0[100] ^= 1;
  write_file(entries[0] + "/kernel.bin", b0);
  fs::resize_file(entries[1] + "/kernel.bin", 10);
  fs::create_directories(dir.path() + "/00000000000000ff");
  fs::rename(entries[2], dir.path() + "/00000000000000ff/0");
  write_file(dir.path() + "/stray.txt", {'x'});
  // A writer of this PID namespace that is gone (no pid is that high).
  write_file(dir.path() + "/.tmp/w-999999999-0-0-" + pid_namespace(), {'x'});
  // size.txt out of date (a writer killed before updating it).
  write_file(dir.path() + "/size.txt", {'7', '\n'});

  auto rep = s->verify(false);
  CHECK(rep.entries == 6);
  CHECK(rep.good == 3);
  CHECK(rep.bad.size() == 4);
  CHECK(rep.recorded_bytes == 7);
  CHECK(rep.stale_temporaries == 1);
  CHECK_FALSE(rep.fixed);
  bool wrong_bucket = false;
  for (const auto& p : rep.bad) {
    if (p.message.find("hashes to bucket") != std::string::npos) wrong_bucket = true;
  }
  CHECK(wrong_bucket);

  auto fixed = s->verify(true);
  CHECK(fixed.fixed);
  CHECK(fixed.bad.size() == 4);
  auto clean = s->verify(false);
  CHECK(clean.ok());
  CHECK(clean.entries == 3);
  CHECK(clean.bytes == clean.recorded_bytes);
  CHECK(clean.stale_temporaries == 0);
  CHECK(leftovers(dir.path()) == 0);
  CHECK_FALSE(fs::exists(dir.path() + "/00000000000000ff"));
}

TEST_CASE("a writer's leftovers are removed when it is gone, or after an hour",
          "[persist][directory][temporaries]") {
  temp_dir dir;
  auto s = directory_store::open(options_for(dir.path()));
  const std::string tmp = dir.path() + "/.tmp";
  // No process has pid 999999999 (pid_max is at most 2^22); the namespace
  // numbers are a PID namespace's inode, this process's or another.
  const std::string here = pid_namespace();
  const std::string elsewhere = std::to_string(std::stoull(here) + 1);
  const std::string gone_here = tmp + "/w-999999999-0-1-" + here;
  // A writer in another container sharing the directory: its pid means
  // nothing here, and it may well be writing right now.
  const std::string elsewhere_fresh = tmp + "/w-999999999-0-2-" + elsewhere;
  const std::string elsewhere_old = tmp + "/w-999999999-0-3-" + elsewhere;
  // Named without a namespace (by an earlier version): it could be anyone's.
  const std::string unnamed_fresh = tmp + "/w-999999999-0-4";
  const std::string unnamed_old = tmp + "/w-999999999-0-5";
  const std::string dead = tmp + "/dead-999999999-0-6-" + elsewhere;
  for (const auto& p :
       {gone_here, elsewhere_fresh, elsewhere_old, unnamed_fresh, unnamed_old, dead}) {
    fs::create_directory(p);
    write_file(p + "/kernel.bin", {'x'});
  }
  const auto two_hours_ago = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(elsewhere_old, two_hours_ago);
  fs::last_write_time(unnamed_old, two_hours_ago);

  CHECK(s->verify(false).stale_temporaries == 4);
  directory_store::open(options_for(dir.path()));  // removes the stale ones
  REQUIRE(fs::exists(elsewhere_fresh));
  REQUIRE(fs::exists(unnamed_fresh));
  CHECK_FALSE(fs::exists(gone_here));
  CHECK_FALSE(fs::exists(elsewhere_old));
  CHECK_FALSE(fs::exists(unnamed_old));
  CHECK_FALSE(fs::exists(dead));
  CHECK(leftovers(dir.path()) == 2);

  SECTION("verify(true) keeps them too") {
    auto rep = s->verify(true);
    CHECK(rep.stale_temporaries == 0);
    CHECK(leftovers(dir.path()) == 2);
  }
  SECTION("until they are an hour old") {
    fs::last_write_time(elsewhere_fresh, two_hours_ago);
    fs::last_write_time(unnamed_fresh, two_hours_ago);
    auto rep = s->verify(true);
    CHECK(rep.stale_temporaries == 2);
    CHECK(leftovers(dir.path()) == 0);
  }
}

namespace {

// Opening `root` is refused as permission_denied, with a message naming
// root, each of `words`, and that no code is loaded from it.
void check_refused(const std::string& root, const std::vector<std::string>& words) {
  try {
    directory_store::open(options_for(root));
    FAIL("the directory was accepted");
  } catch (const primcache::error& e) {
    CHECK(e.code() == primcache::status::permission_denied);
    CHECK_THAT(e.message(), Catch::Contains(root));
    for (const std::string& w : words) CHECK_THAT(e.message(), Catch::Contains(w));
    CHECK_THAT(e.message(), Catch::Contains("refusing to load code from it"));
  }
}

}  // namespace

TEST_CASE("a directory others could write to, or another user owns, is refused",
          "[persist][directory][security]") {
  temp_dir dir;
  const std::string root = dir.path() + "/cache";
  directory_store::open(options_for(root));

  auto refused_with = [&](const std::string& words) { check_refused(root, {words}); };
  SECTION("writable by others") {
    ::chmod(root.c_str(), 0707);
    refused_with("writable by others (mode 0707)");
  }
  SECTION("writable by group") {
    ::chmod(root.c_str(), 0770);
    refused_with("writable by group (mode 0770)");
  }
  SECTION("world-writable") {
    ::chmod(root.c_str(), 0777);
    refused_with("writable by group and others");
  }
  SECTION("readable by others is fine") {
    ::chmod(root.c_str(), 0755);
    CHECK_NOTHROW(directory_store::open(options_for(root)));
  }
  SECTION("owned by another user") {
    if (::geteuid() != 0) {
      WARN("not root: cannot give the directory to another user; ownership check not exercised");
      return;
    }
    REQUIRE(::chown(root.c_str(), 65534, 65534) == 0);
    refused_with("uid 65534");
  }
  SECTION("not a directory") {
    write_file(dir.path() + "/file", {'x'});
    CHECK_THROWS_AS(directory_store::open(options_for(dir.path() + "/file")), primcache::error);
  }
}

TEST_CASE("a staging directory (.tmp) others could write to, or not a directory, is refused",
          "[persist][directory][security]") {
  temp_dir dir;
  const std::string root = dir.path() + "/cache";
  const std::string tmp = root + "/.tmp";
  directory_store::open(options_for(root));
  REQUIRE(fs::is_directory(tmp));

  // put() stages an entry under .tmp before moving it into place: whoever
  // else can write .tmp could swap the staged entry in between.
  SECTION("writable by group") {
    ::chmod(tmp.c_str(), 0770);
    check_refused(root, {"its .tmp is writable by group (mode 0770)", "chmod go-w " + tmp});
  }
  SECTION("writable by others") {
    ::chmod(tmp.c_str(), 0703);
    check_refused(root, {"its .tmp is writable by others (mode 0703)"});
  }
  SECTION("a symlink to a directory") {
    const std::string elsewhere = dir.path() + "/elsewhere";
    fs::create_directory(elsewhere);
    ::chmod(elsewhere.c_str(), 0700);
    fs::remove(tmp);
    fs::create_directory_symlink(elsewhere, tmp);
    check_refused(root, {"its .tmp is not a directory (a symlink is never followed)"});
  }
  SECTION("a file") {
    fs::remove(tmp);
    write_file(tmp, {'x'});
    check_refused(root, {"its .tmp is not a directory"});
  }
  SECTION("its own, mode 0700 or 0755, is fine; a read-only store never looks") {
    ::chmod(tmp.c_str(), 0755);
    CHECK_NOTHROW(directory_store::open(options_for(root)));
    ::chmod(tmp.c_str(), 0777);
    auto o = options_for(root);
    o.read_only = true;
    CHECK_NOTHROW(directory_store::open(o));
  }
  SECTION("owned by another user") {
    if (::geteuid() != 0) {
      WARN("not root: cannot give .tmp to another user; ownership check not exercised");
      return;
    }
    REQUIRE(::chown(tmp.c_str(), 65534, 65534) == 0);
    check_refused(root, {"its .tmp is owned by", "(uid 65534)"});
  }
}

TEST_CASE("a cache dir in a directory others could write to is refused",
          "[persist][directory][security]") {
  temp_dir dir;
  // Checked: every directory above the cache dir, not only its parent.
  const std::string shared = dir.path() + "/shared";
  const std::string root = shared + "/team/cache";
  fs::create_directories(shared + "/team");
  ::chmod(shared.c_str(), 0755);
  ::chmod((shared + "/team").c_str(), 0755);
  directory_store::open(options_for(root));

  auto refused_with = [&](const std::string& words) {
    check_refused(root, {" " + shared + ", ", words});
  };
  // Whoever can write a directory can rename what is in it: they could move
  // the cache dir away and put their own (or a symlink) in its place.
  SECTION("writable by others, without the sticky bit") {
    ::chmod(shared.c_str(), 0777);
    refused_with("writable by group and others (mode 0777) without the sticky bit");
  }
  SECTION("writable by its group, setgid, without the sticky bit") {
    ::chmod(shared.c_str(), 02775);
    refused_with("writable by group (mode 2775) without the sticky bit");
  }
  SECTION("writable by all with the sticky bit, like /tmp, is fine") {
    ::chmod(shared.c_str(), 01777);
    CHECK_NOTHROW(directory_store::open(options_for(root)));
  }
  SECTION("writable by its group with the sticky bit is fine") {
    ::chmod(shared.c_str(), 03775);
    CHECK_NOTHROW(directory_store::open(options_for(root)));
  }
  SECTION("owned by another user") {
    if (::geteuid() != 0) {
      WARN("not root: cannot give the directory to another user; ownership check not exercised");
      return;
    }
    REQUIRE(::chown(shared.c_str(), 65534, 65534) == 0);
    refused_with("uid 65534");
  }
}

TEST_CASE("a symlinked cache dir is resolved once, when the store opens",
          "[persist][directory][security]") {
  temp_dir dir;
  const std::string real = fs::canonical(dir.path()).string() + "/real";
  const std::string other = dir.path() + "/other";
  const std::string link = dir.path() + "/link";
  fs::create_directory(real);
  fs::create_directory(other);
  ::chmod(real.c_str(), 0700);
  ::chmod(other.c_str(), 0700);
  fs::create_directory_symlink(real, link);

  auto s = directory_store::open(options_for(link));
  CHECK(s->path() == real);
  CHECK(s->describe() == "directory " + real);
  // Whoever re-points the link later does not redirect this store.
  fs::remove(link);
  fs::create_directory_symlink(other, link);
  REQUIRE(s->put(as_bytes("k"), payload_of("k", 100)).status == put_status::stored);
  CHECK(entry_dirs(real).size() == 1);
  CHECK(fs::is_empty(other));
  CHECK(*s->get(as_bytes("k")) == payload_of("k", 100));

  SECTION("a link into a directory others could write to is refused") {
    const std::string shared = dir.path() + "/shared";
    fs::create_directories(shared + "/cache");
    ::chmod((shared + "/cache").c_str(), 0700);
    ::chmod(shared.c_str(), 0777);
    fs::remove(link);
    fs::create_directory_symlink(shared + "/cache", link);
    try {
      directory_store::open(options_for(link));
      FAIL("the directory was accepted");
    } catch (const primcache::error& e) {
      CHECK(e.code() == primcache::status::permission_denied);
      CHECK_THAT(e.message(), Catch::Contains(shared) && Catch::Contains("sticky bit"));
    }
  }
}

TEST_CASE("a read-only store reads and never writes", "[persist][directory][readonly]") {
  temp_dir dir;
  {
    auto w = directory_store::open(options_for(dir.path()));
    w->put(as_bytes("a"), payload_of("a", 1000));
    w->put(as_bytes("b"), payload_of("b", 1000));
  }
  const std::string b_entry = [&] {
    for (const auto& e : entry_dirs(dir.path())) {
      if (read_file(e + "/key.bin") == std::vector<char>{'b'}) return e;
    }
    return std::string();
  }();
  auto bytes = read_file(b_entry + "/kernel.bin");
  bytes[50] ^= 1;
  write_file(b_entry + "/kernel.bin", bytes);

  // Every call that would change the file system fails as on a read-only
  // mount, and is counted: a read-only store makes none.
  auto files = std::make_shared<primcache::test::faulty_file_ops>();
  files->fail_create = EROFS;
  files->fail_write = EROFS;
  files->fail_mkdir = EROFS;
  files->fail_rename = EROFS;
  auto o = options_for(dir.path());
  o.read_only = true;
  o.files = files;
  const auto size_before = size_txt(dir.path());
  auto s = directory_store::open(o);
  CHECK(s->read_only());

  CHECK(*s->get(as_bytes("a")) == payload_of("a", 1000));
  CHECK_FALSE(s->get(as_bytes("b")));
  CHECK(s->stats().corrupt_entries == 1);
  CHECK(fs::exists(b_entry));  // counted and skipped, not removed

  auto r = s->put(as_bytes("c"), payload_of("c", 10));
  CHECK(r.status == put_status::read_only);
  CHECK_THAT(r.message, Catch::Contains("read-only"));
  CHECK_FALSE(s->erase(as_bytes("a")));
  CHECK_THROWS_WITH(s->clear(), Catch::Contains("read-only"));
  s->set_capacity(0);  // recorded; nothing evicted
  CHECK(s->capacity() == 0);
  CHECK(*s->get(as_bytes("a")) == payload_of("a", 1000));
  auto rep = s->verify(true);
  CHECK_FALSE(rep.fixed);
  CHECK(rep.bad.size() == 1);
  CHECK(files->modifying_calls == 0);
  CHECK(size_txt(dir.path()) == size_before);

  SECTION("a directory without write permission") {
    // Root ignores permissions; this exercises only the open path then.
    ::chmod(dir.path().c_str(), 0500);
    auto x = options_for(dir.path());
    x.read_only = true;
    auto ro = directory_store::open(x);
    CHECK(*ro->get(as_bytes("a")) == payload_of("a", 1000));
  }
  SECTION("a missing directory is not created") {
    auto x = options_for(dir.path() + "/missing");
    x.read_only = true;
    CHECK_THROWS_AS(directory_store::open(x), primcache::error);
    CHECK_FALSE(fs::exists(dir.path() + "/missing"));
  }
}

TEST_CASE("PRIMCACHE_PERSISTENT_CACHE_READONLY is parsed strictly", "[persist][readonly][env]") {
  const char* name = primcache::persistent_cache_readonly_env;
  ::unsetenv(name);
  CHECK_FALSE(primcache::readonly_from_env());
  CHECK(primcache::readonly_from_env(true));
  ::setenv(name, "1", 1);
  CHECK(primcache::readonly_from_env());
  ::setenv(name, "off", 1);
  CHECK_FALSE(primcache::readonly_from_env(true));
  ::setenv(name, "maybe", 1);
  CHECK_FALSE(primcache::readonly_from_env(false));
  bool reported = false;
  for (const auto& m : primcache::env_reports()) {
    if (m.find("PRIMCACHE_PERSISTENT_CACHE_READONLY='maybe'") != std::string::npos) {
      reported = true;
    }
  }
  CHECK(reported);
  ::unsetenv(name);
}

TEST_CASE("disk full and I/O errors fail a put cleanly", "[persist][directory][faults]") {
  temp_dir dir;
  auto files = std::make_shared<primcache::test::faulty_file_ops>();
  auto s = open_through(dir.path(), files);
  REQUIRE(s->put(as_bytes("old"), payload_of("old", 1000)).status == put_status::stored);
  const auto size_before = s->size();

  SECTION("ENOSPC at write") {
    files->fail_write = ENOSPC;
  }
  SECTION("ENOSPC at fsync") {
    files->fail_fsync = ENOSPC;
  }
  SECTION("EIO at fsync") {
    files->fail_fsync = EIO;
  }
  SECTION("ENOSPC at rename") {
    files->fail_rename = ENOSPC;
  }
  SECTION("ENOSPC at mkdir") {
    files->fail_mkdir = ENOSPC;
  }
  SECTION("EIO at open") {
    files->fail_create = EIO;
  }

  auto r = s->put(as_bytes("new"), payload_of("new", 100 * 1024));
  CHECK(r.status == put_status::failed);
  CHECK_THAT(r.message, Catch::Contains(dir.path()));
  CHECK((r.message.find(std::strerror(ENOSPC)) != std::string::npos ||
         r.message.find(std::strerror(EIO)) != std::string::npos));
  CHECK(s->stats().errors == 1);
  CHECK(s->stats().writes == 1);
  // Nothing half-written: no entry, no leftover, the size unchanged.
  files->fail_write = 0;
  files->fail_fsync = 0;
  files->fail_rename = 0;
  files->fail_mkdir = 0;
  files->fail_create = 0;
  CHECK_FALSE(s->get(as_bytes("new")));
  CHECK(leftovers(dir.path()) == 0);
  CHECK(s->size() == size_before);
  CHECK(entry_dirs(dir.path()).size() == 1);
  // The store keeps working.
  REQUIRE(s->put(as_bytes("new"), payload_of("new", 100 * 1024)).status == put_status::stored);
  CHECK(*s->get(as_bytes("new")) == payload_of("new", 100 * 1024));
  CHECK(*s->get(as_bytes("old")) == payload_of("old", 1000));
  CHECK(s->verify(false).ok());
}

TEST_CASE("a put makes size.txt and its bucket durable before the entry appears",
          "[persist][directory][faults]") {
  temp_dir dir;
  auto files = std::make_shared<primcache::test::faulty_file_ops>();
  auto s = open_through(dir.path(), files);
  const std::string root = s->path();  // resolved, as /proc/self/fd names it

  files->start_journal();
  REQUIRE(s->put(as_bytes("k"), payload_of("k", 1000)).status == put_status::stored);
  const std::vector<std::string> journal = files->stop_journal();
  auto first = [&](auto&& matches) {
    return static_cast<std::size_t>(std::find_if(journal.begin(), journal.end(), matches) -
                                    journal.begin());
  };
  auto in_root = [&](const std::string& e, const std::string& call) {
    // A name directly in the store's directory, neither size.txt nor .tmp.
    const std::string prefix = call + " " + root + "/";
    if (e.rfind(prefix, 0) != 0) return false;
    const std::string rest = e.substr(prefix.size());
    return rest != "size.txt" && rest.rfind(".tmp", 0) != 0;
  };
  const std::size_t size_renamed =
      first([&](const std::string& e) { return e == "rename " + root + "/size.txt"; });
  const std::size_t bucket_made = first([&](const std::string& e) { return in_root(e, "mkdir"); });
  const std::size_t root_synced = first([&](const std::string& e) { return e == "fsync " + root; });
  const std::size_t published = first([&](const std::string& e) { return in_root(e, "rename"); });
  INFO(Catch::Detail::stringify(journal));
  REQUIRE(published < journal.size());
  CHECK(size_renamed < root_synced);
  CHECK(bucket_made < root_synced);
  CHECK(root_synced < published);
}

TEST_CASE("a put whose fsync of the store's directory fails changes nothing",
          "[persist][directory][faults]") {
  temp_dir dir;
  auto files = std::make_shared<primcache::test::faulty_file_ops>();
  auto s = open_through(dir.path(), files);
  REQUIRE(s->put(as_bytes("old"), payload_of("old", 1000)).status == put_status::stored);
  const auto size_before = s->size();

  files->fail_fsync_of(s->path());
  auto r = s->put(as_bytes("new"), payload_of("new", 10 * 1024));
  CHECK(r.status == put_status::failed);
  CHECK_THAT(r.message, Catch::Contains("cannot fsync " + s->path()));
  CHECK_THAT(r.message, Catch::Contains(std::strerror(EIO)));
  CHECK(s->stats().errors == 1);
  files->fail_fsync_of("");
  CHECK_FALSE(s->get(as_bytes("new")));
  CHECK(s->size() == size_before);
  CHECK(leftovers(dir.path()) == 0);
  REQUIRE(s->put(as_bytes("new"), payload_of("new", 10 * 1024)).status == put_status::stored);
  CHECK(*s->get(as_bytes("new")) == payload_of("new", 10 * 1024));
  CHECK(s->verify(false).ok());
}

TEST_CASE("a read error is a counted miss that keeps the entry", "[persist][directory][faults]") {
  temp_dir dir;
  auto files = std::make_shared<primcache::test::faulty_file_ops>();
  auto s = open_through(dir.path(), files);
  s->put(as_bytes("k"), payload_of("k", 1000));
  files->fail_read = EIO;
  CHECK_FALSE(s->get(as_bytes("k")));
  CHECK(s->stats().errors == 1);
  CHECK(s->stats().corrupt_entries == 0);
  files->fail_read = 0;
  CHECK(*s->get(as_bytes("k")) == payload_of("k", 1000));
}

TEST_CASE("verify stops at running out of memory, and removes nothing",
          "[persist][directory][faults]") {
  temp_dir dir;
  auto files = std::make_shared<primcache::test::faulty_file_ops>();
  auto s = open_through(dir.path(), files);
  s->put(as_bytes("k"), payload_of("k", 1000));
  files->fail_read = ENOMEM;  // as read_all_at answers an allocation that failed
  CHECK_THROWS_AS(s->verify(true), std::bad_alloc);
  files->fail_read = 0;
  CHECK(*s->get(as_bytes("k")) == payload_of("k", 1000));
  CHECK(s->verify(false).ok());
}

TEST_CASE("a blob store shows in control as cache 'persistent'", "[persist][control]") {
  temp_dir dir;
  primcache::control_registry registry;
  auto o = options_for(dir.path());
  o.capacity_mb = 8;
  auto s = directory_store::open(o);
  auto reg = primcache::register_blob_store(*s, "persistent", registry);
  s->put(as_bytes("k"), payload_of("k", 3000));
  s->get(as_bytes("k"));
  s->get(as_bytes("missing"));

  auto h = registry.find_cache("persistent");
  auto info = h.info();
  CHECK(info.unit == primcache::capacity_unit::megabytes);
  CHECK(info.capacity == 8);
  CHECK(info.size == 1);  // 3 KB, rounded up to 1 MB
  REQUIRE(info.weight_bytes);
  CHECK(*info.weight_bytes == s->size());
  CHECK(info.stats.hits == 1);
  CHECK(info.stats.misses == 1);
  bool writes = false;
  for (const auto& [name, value] : info.extra) {
    if (name == "writes") writes = value == 1;
  }
  CHECK(writes);

  registry.set_capacity("persistent", 2);
  CHECK(s->capacity() == 2);
  registry.flush("persistent");
  CHECK(s->size() == 0);
  CHECK_FALSE(s->get(as_bytes("k")));

  reg.reset();
  CHECK_THROWS(registry.find_cache("persistent"));
}
