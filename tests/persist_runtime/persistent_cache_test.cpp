// The runtime's persistent cache: round trips through a directory store
// with nothing compiled the second time, corrupt and foreign entries
// rejected and recompiled, store I/O faults, the write-behind queue, control
// and metrics, the C API, and the environment variables (each in its own
// process, registered in CMakeLists.txt).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "cases.hpp"
#include "jit/compiler.hpp"
#include "persist/faulty_file_ops.hpp"
#include "primcache/base/env.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/cpu/cpu.hpp"
#include "primcache/persist/directory_store.hpp"
#include "primcache/persist/registration.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/persistent_cache.hpp"
#include "primcache/runtime/primcache.h"
#include "primcache/runtime/runtime.hpp"

using namespace primcache;
using namespace primcache::test;
namespace fs = std::filesystem;

namespace {

std::uint64_t compiled() {
  return cpu_internal::objects_compiled();
}

// Every entry directory (DIR/<bucket>/<n>) of a directory store.
std::vector<fs::path> entries(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& f : fs::recursive_directory_iterator(dir)) {
    if (f.path().filename() == "kernel.bin" &&
        f.path().parent_path().parent_path().parent_path() == fs::path(dir)) {
      out.push_back(f.path().parent_path());
    }
  }
  return out;
}

std::vector<char> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_file(const fs::path& p, const std::vector<char>& bytes) {
  // Published files are 0400/0600; replace the file as a tamperer would.
  fs::remove(p);
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::shared_ptr<blob_store> dir_store(const std::string& path, std::uint64_t mb = 64) {
  return open_persistent_cache_dir(path, mb);
}

std::uint64_t histogram_count(const std::string& source) {
  for (const auto& f : control().list_metrics()) {
    if (f.name != "primcache_primitive_create_seconds") continue;
    for (const auto& s : f.samples) {
      for (const auto& [k, v] : s.labels) {
        if (k == "source" && v == source) {
          bool cpu = false;
          for (const auto& [k2, v2] : s.labels) cpu |= k2 == "engine" && v2 == "cpu";
          if (cpu) return s.count;
        }
      }
    }
  }
  return 0;
}

std::uint64_t extra(const cache_info& info, const std::string& name) {
  for (const auto& [k, v] : info.extra) {
    if (k == name) return v;
  }
  FAIL("no extra stat " << name);
  return 0;
}

}  // namespace

TEST_CASE("a second creation through a directory store compiles nothing and computes the same bits",
          "[persistent][roundtrip]") {
  temp_dir dir;
  detach_at_end detach;
  set_persistent_cache(dir_store(dir.path()));
  for (const a_case& c : all_cases()) {
    INFO(c.name);
    empty_primitive_cache();
    const primitive_desc pd = c.make_pd();
    const auto before = get_persistent_cache_stats();
    const std::uint64_t compiled_before = compiled();
    const primitive fresh(pd);
    CHECK(compiled() > compiled_before);
    const auto want = run(fresh, c);
    flush_persistent_cache_writes();
    const auto after = get_persistent_cache_stats();
    CHECK(after.misses > before.misses);
    CHECK(after.writes_stored > before.writes_stored);
    CHECK(after.hits == before.hits);

    // As in a new process: nothing in memory, the code in the directory.
    empty_primitive_cache();
    REQUIRE_FALSE(primitive_cache_contains(c.make_pd()));
    const std::uint64_t compiled_mid = compiled();
    const std::uint64_t persistent_before = histogram_count("persistent");
    const primitive loaded(c.make_pd());
    CHECK(compiled() == compiled_mid);
    CHECK(loaded.creation_outcome() == lookup_outcome::miss);
    CHECK(get_persistent_cache_stats().hits > after.hits);
    CHECK(histogram_count("persistent") == persistent_before + 1);
    CHECK(run(loaded, c) == want);
    CHECK(loaded.cache_blob() == fresh.cache_blob());
  }
  // The latest creation event names where the code came from.
  const auto page = control().events_since(0);
  REQUIRE_FALSE(page.events.empty());
  CHECK(page.events.back().source == "persistent");
}

TEST_CASE("a descriptor made before a lower ISA cap loads its entry and leaves it in the store",
          "[persistent][isa_cap]") {
  // The descriptor binds its ISA when it is made, and its fresh code is
  // compiled for that ISA whatever the cap says later: its stored code must
  // load too. Refused, it was counted bad and erased, though every process
  // without the cap (a fleet sharing the store) loads it.
  REQUIRE(detected_isa() > cpu_isa::avx2);  // a cap below the bound ISA, the JIT still on
  struct clear_cap_at_end {
    ~clear_cap_at_end() { clear_max_cpu_isa(); }
  } clear_cap;
  temp_dir dir;
  detach_at_end detach;
  set_persistent_cache(dir_store(dir.path()));
  for (const a_case& c : all_cases()) {
    INFO(c.name);
    clear_max_cpu_isa();
    empty_primitive_cache();
    const primitive fresh(c.make_pd());
    const auto want = run(fresh, c);
    flush_persistent_cache_writes();
    const std::size_t stored = entries(dir.path()).size();

    empty_primitive_cache();
    const primitive_desc bound_before = c.make_pd();
    set_max_cpu_isa(cpu_isa::avx2);
    const auto before = get_persistent_cache_stats();
    const std::uint64_t compiled_before = compiled();
    const primitive loaded(bound_before);
    const auto after = get_persistent_cache_stats();
    CHECK(after.hits == before.hits + 1);
    CHECK(after.rejected == before.rejected);
    CHECK(after.load_failed == before.load_failed);
    CHECK(compiled() == compiled_before);
    CHECK(entries(dir.path()).size() == stored);
    CHECK(run(loaded, c) == want);
    CHECK(loaded.cache_blob() == fresh.cache_blob());
  }
}

TEST_CASE("the store is registered in control as persistent while attached",
          "[persistent][control]") {
  temp_dir dir;
  {
    detach_at_end detach;
    set_persistent_cache(dir_store(dir.path(), 7));
    REQUIRE(get_persistent_cache() != nullptr);
    const a_case c = matmul_case(21);
    empty_primitive_cache();
    run(primitive(c.make_pd()), c);
    flush_persistent_cache_writes();
    empty_primitive_cache();
    run(primitive(c.make_pd()), c);
    const cache_info info = control().find_cache("persistent").info();
    CHECK(info.unit == capacity_unit::megabytes);
    CHECK(info.capacity == 7);
    CHECK(info.stats.hits == 1);
    CHECK(info.stats.misses == 1);
    CHECK(extra(info, "writes") == 1);
    CHECK(extra(info, "corrupt_entries") == 0);
    CHECK(info.weight_bytes.value_or(0) > 0);
    // An operator's capacity change reaches the store.
    control().set_capacity("persistent", 9);
    CHECK(get_persistent_cache()->capacity() == 9);
  }
  CHECK(get_persistent_cache() == nullptr);
  CHECK_THROWS_AS(control().find_cache("persistent"), error);
}

TEST_CASE("attaching while another cache holds the name persistent is refused",
          "[persistent][control]") {
  temp_dir a, b;
  auto other = directory_store::open({.path = a.path()});
  auto reg = register_blob_store(*other);  // someone else's "persistent"
  try {
    set_persistent_cache(dir_store(b.path()));
    FAIL("attached");
  } catch (const error& e) {
    CHECK(e.code() == status::already_exists);
  }
  CHECK(get_persistent_cache() == nullptr);
}

TEST_CASE("damaged entries are rejected, counted, recompiled and never loaded",
          "[persistent][corrupt]") {
  temp_dir dir;
  detach_at_end detach;
  set_persistent_cache(dir_store(dir.path()));
  const a_case c = matmul_case(23);
  empty_primitive_cache();
  const auto want = run(primitive(c.make_pd()), c);
  flush_persistent_cache_writes();
  REQUIRE(entries(dir.path()).size() == 1);

  // Damages the one entry, then creates as a new process would: the
  // creation compiles, the results are right, the damage is counted, and
  // the fresh compilation is written back.
  auto recompiles = [&](const std::function<void(const fs::path&)>& damage) {
    const fs::path e = entries(dir.path()).at(0);
    damage(e);
    empty_primitive_cache();
    const auto store_before = get_persistent_cache()->stats();
    const std::uint64_t compiled_before = compiled();
    const primitive p(c.make_pd());
    CHECK(compiled() > compiled_before);
    CHECK(run(p, c) == want);
    const auto store_after = get_persistent_cache()->stats();
    CHECK(store_after.hits == store_before.hits);
    flush_persistent_cache_writes();
    // Written back whole: the next creation loads it.
    empty_primitive_cache();
    const std::uint64_t compiled_again = compiled();
    CHECK(run(primitive(c.make_pd()), c) == want);
    CHECK(compiled() == compiled_again);
    return store_after.corrupt_entries - store_before.corrupt_entries;
  };
  SECTION("a flipped bit in kernel.bin") {
    CHECK(recompiles([](const fs::path& e) {
            auto b = read_file(e / "kernel.bin");
            b[b.size() / 2] ^= 0x04;
            write_file(e / "kernel.bin", b);
          }) == 1);
  }
  SECTION("a flipped bit in the entry's last byte (the checksum)") {
    CHECK(recompiles([](const fs::path& e) {
            auto b = read_file(e / "kernel.bin");
            b.back() ^= 0x80;
            write_file(e / "kernel.bin", b);
          }) == 1);
  }
  SECTION("a truncated kernel.bin") {
    CHECK(recompiles([](const fs::path& e) {
            auto b = read_file(e / "kernel.bin");
            b.resize(b.size() / 3);
            write_file(e / "kernel.bin", b);
          }) == 1);
  }
  SECTION("another primitive's kernel.bin under this key") {
    const a_case other = matmul_case(29);
    run(primitive(other.make_pd()), other);
    flush_persistent_cache_writes();
    REQUIRE(entries(dir.path()).size() == 2);
    const std::vector<std::uint8_t> own_id = c.make_pd().cache_blob_id();
    CHECK(recompiles([&](const fs::path&) {
            // Find which entry is ours by its key.bin, and give it the other's kernel.bin.
            auto es = entries(dir.path());
            const auto own = read_file(es[0] / "key.bin");
            const bool first_is_own = std::equal(
                own.begin(), own.end(), own_id.begin(), own_id.end(),
                [](char a, std::uint8_t b) { return static_cast<std::uint8_t>(a) == b; });
            const fs::path mine = first_is_own ? es[0] : es[1];
            const fs::path theirs = first_is_own ? es[1] : es[0];
            write_file(mine / "kernel.bin", read_file(theirs / "kernel.bin"));
          }) == 1);
  }
  SECTION("swapped key.bin files: neither entry is taken for the other") {
    const a_case other = matmul_case(31);
    const auto other_want = run(primitive(other.make_pd()), other);
    flush_persistent_cache_writes();
    auto es = entries(dir.path());
    REQUIRE(es.size() == 2);
    const auto k0 = read_file(es[0] / "key.bin"), k1 = read_file(es[1] / "key.bin");
    write_file(es[0] / "key.bin", k1);
    write_file(es[1] / "key.bin", k0);
    empty_primitive_cache();
    const std::uint64_t hits_before = get_persistent_cache_stats().hits;
    const std::uint64_t compiled_before = compiled();
    CHECK(run(primitive(c.make_pd()), c) == want);
    CHECK(run(primitive(other.make_pd()), other) == other_want);
    CHECK(compiled() > compiled_before);
    CHECK(get_persistent_cache_stats().hits == hits_before);
  }
}

TEST_CASE("a well-formed entry whose blob does not load is rejected, erased and recompiled",
          "[persistent][corrupt]") {
  temp_dir dir;
  detach_at_end detach;
  set_persistent_cache(dir_store(dir.path()));
  const a_case c = matmul_case(37);
  const a_case other = eltwise_case();
  empty_primitive_cache();
  const auto want = run(primitive(c.make_pd()), c);
  const std::vector<std::uint8_t> foreign = primitive(other.make_pd()).cache_blob();
  flush_persistent_cache_writes();
  std::shared_ptr<blob_store> store = get_persistent_cache();
  const std::vector<std::uint8_t> id = c.make_pd().cache_blob_id();
  const auto id_bytes = std::as_bytes(std::span(id));

  auto rejected = [&](const std::vector<std::uint8_t>& payload) {
    REQUIRE(store->erase(id_bytes));
    REQUIRE(store->put(id_bytes, std::as_bytes(std::span(payload))).status == put_status::stored);
    empty_primitive_cache();
    const auto before = get_persistent_cache_stats();
    const auto view_before = control().find_cache("persistent").info();
    const std::uint64_t compiled_before = compiled();
    CHECK(run(primitive(c.make_pd()), c) == want);
    CHECK(compiled() > compiled_before);
    const auto after = get_persistent_cache_stats();
    CHECK(after.rejected == before.rejected + 1);
    CHECK(after.hits == before.hits);
    // control shows it as a corrupt entry and a miss, not a hit.
    const auto view_after = control().find_cache("persistent").info();
    CHECK(extra(view_after, "corrupt_entries") == extra(view_before, "corrupt_entries") + 1);
    CHECK(view_after.stats.hits == view_before.stats.hits);
    flush_persistent_cache_writes();
    // The bad entry was erased and the fresh compilation stored.
    auto back = store->get(id_bytes);
    REQUIRE(back);
    CHECK_FALSE(std::equal(back->begin(), back->end(), std::as_bytes(std::span(payload)).begin(),
                           std::as_bytes(std::span(payload)).end()));
  };
  SECTION("bytes that are no impl blob") {
    rejected({1, 2, 3, 4, 5, 6, 7, 8, 9});
  }
  SECTION("another primitive's blob") {
    rejected(foreign);
  }
  SECTION("its own blob as another build of the library made it") {
    backend::impl_blob b = backend::impl_blob::decode(primitive(c.make_pd()).cache_blob()).value();
    b.producer = std::string(version().version) + "+ffffffffffffffff";
    rejected(b.encode());
  }
}

TEST_CASE("entries a build with other code generators made are not reached: its ids differ",
          "[persistent][build_identity]") {
  // What a rebuild after a change to the kernel generators finds in a
  // directory the old build filled: entries under ids with the old build
  // identity. Made here by rewriting the identity inside this build's id and
  // blob, as the old build would have written them.
  temp_dir dir;
  detach_at_end detach;
  set_persistent_cache(dir_store(dir.path()));
  const a_case c = matmul_case(41);
  empty_primitive_cache();
  const auto want = run(primitive(c.make_pd()), c);
  const std::vector<std::uint8_t> blob = primitive(c.make_pd()).cache_blob();
  flush_persistent_cache_writes();
  std::shared_ptr<blob_store> store = get_persistent_cache();
  const std::vector<std::uint8_t> id = c.make_pd().cache_blob_id();
  REQUIRE(store->erase(std::as_bytes(std::span(id))));

  const std::string here = version().build_identity;
  const std::string old_identity(here.size(), here[0] == '0' ? '1' : '0');
  std::vector<std::uint8_t> old_id = id;
  const auto at = std::search(old_id.begin(), old_id.end(), here.begin(), here.end());
  REQUIRE(at != old_id.end());  // the id names the build identity
  std::copy(old_identity.begin(), old_identity.end(), at);
  backend::impl_blob old_blob = backend::impl_blob::decode(blob).value();
  old_blob.producer = std::string(version().version) + "+" + old_identity;
  const std::vector<std::uint8_t> old_bytes = old_blob.encode();
  REQUIRE(
      store->put(std::as_bytes(std::span(old_id)), std::as_bytes(std::span(old_bytes))).status ==
      put_status::stored);

  empty_primitive_cache();
  const auto before = get_persistent_cache_stats();
  const std::uint64_t compiled_before = compiled();
  CHECK(run(primitive(c.make_pd()), c) == want);
  CHECK(compiled() > compiled_before);  // the old entry is never asked for
  const auto after = get_persistent_cache_stats();
  CHECK(after.hits == before.hits);
  CHECK(after.misses == before.misses + 1);
  CHECK(after.rejected == before.rejected);
  flush_persistent_cache_writes();
  // This build's entry now sits beside the old one, which is left to age out.
  CHECK(entries(dir.path()).size() == 2);
  CHECK(store->get(std::as_bytes(std::span(old_id))));
}

TEST_CASE("with a fleet key, forged entries are rejected, counted, recompiled, never loaded",
          "[persistent][corrupt][fleet_key]") {
  temp_dir dir;
  temp_dir keys;
  detach_at_end detach;
  auto key_file = [&](const std::string& name, const std::string& secret) {
    const std::string path = keys.path() + "/" + name;
    write_file(path, std::vector<char>(secret.begin(), secret.end()));
    ::chmod(path.c_str(), 0600);
    return path;
  };
  const std::string fleet = key_file("fleet", "0123456789abcdef0123456789abcdef");
  const std::string other = key_file("other", "fedcba9876543210fedcba9876543210");
  // Each store reads PRIMCACHE_PERSISTENT_CACHE_KEY_FILE when it is opened.
  auto open_with = [&](const std::string& key) {
    if (key.empty()) {
      ::unsetenv("PRIMCACHE_PERSISTENT_CACHE_KEY_FILE");
    } else {
      ::setenv("PRIMCACHE_PERSISTENT_CACHE_KEY_FILE", key.c_str(), 1);
    }
    std::shared_ptr<blob_store> s = dir_store(dir.path());
    ::unsetenv("PRIMCACHE_PERSISTENT_CACHE_KEY_FILE");
    return s;
  };
  const a_case c = matmul_case(43);
  empty_primitive_cache();
  const auto want = run(primitive(c.make_pd()), c);
  const std::vector<std::uint8_t> blob = primitive(c.make_pd()).cache_blob();
  const std::vector<std::uint8_t> id = c.make_pd().cache_blob_id();
  const auto id_bytes = std::as_bytes(std::span(id));

  // The forger writes a good blob (it would load) through a store without
  // the fleet's key: unsigned, or signed with a key of its own.
  // (A generator keeps its first run's values: the paths are chosen after it.)
  const bool forger_signs = GENERATE(false, true);
  const std::string forger_key = forger_signs ? other : std::string();
  INFO((forger_signs ? "signed with another key" : "unsigned"));
  REQUIRE(open_with(forger_key)->put(id_bytes, std::as_bytes(std::span(blob))).status ==
          put_status::stored);

  set_persistent_cache(open_with(fleet));
  empty_primitive_cache();
  const auto store_before = get_persistent_cache()->stats();
  const auto before = get_persistent_cache_stats();
  const std::uint64_t compiled_before = compiled();
  CHECK(run(primitive(c.make_pd()), c) == want);
  CHECK(compiled() > compiled_before);  // recompiled: the forged code never ran
  const auto store_after = get_persistent_cache()->stats();
  CHECK(store_after.corrupt_entries == store_before.corrupt_entries + 1);
  CHECK(store_after.hits == store_before.hits);
  CHECK(get_persistent_cache_stats().hits == before.hits);
  flush_persistent_cache_writes();
  // The forged entry is gone and the fleet's own, signed, took its place:
  // the next creation loads it.
  empty_primitive_cache();
  const std::uint64_t compiled_again = compiled();
  CHECK(run(primitive(c.make_pd()), c) == want);
  CHECK(compiled() == compiled_again);
  CHECK(get_persistent_cache_stats().hits == before.hits + 1);
}

TEST_CASE("store I/O errors never fail a creation; they are counted", "[persistent][faults]") {
  temp_dir dir;
  detach_at_end detach;
  auto files = std::make_shared<faulty_file_ops>();
  directory_store_options o;
  o.path = dir.path();
  o.capacity_mb = 64;
  o.format.library_version = "test";
  o.files = files;
  std::shared_ptr<blob_store> store = directory_store::open(o);
  set_persistent_cache(store);
  const a_case c = matmul_case(41);

  SECTION("the disk is full: the write fails, the creation does not") {
    files->fail_write = ENOSPC;
    empty_primitive_cache();
    const auto before = get_persistent_cache_stats();
    const auto want = run(primitive(c.make_pd()), c);
    flush_persistent_cache_writes();
    CHECK(get_persistent_cache_stats().writes_failed == before.writes_failed + 1);
    CHECK(store->stats().errors >= 1);
    CHECK(entries(dir.path()).empty());
    files->fail_write = 0;
    // Nothing was half-written: the next creation compiles and stores.
    empty_primitive_cache();
    CHECK(run(primitive(c.make_pd()), c) == want);
    flush_persistent_cache_writes();
    CHECK(entries(dir.path()).size() == 1);
  }
  SECTION("reads fail: a counted miss, a compilation") {
    empty_primitive_cache();
    const auto want = run(primitive(c.make_pd()), c);
    flush_persistent_cache_writes();
    files->fail_read = EIO;
    empty_primitive_cache();
    const auto errors_before = store->stats().errors;
    const std::uint64_t compiled_before = compiled();
    CHECK(run(primitive(c.make_pd()), c) == want);
    CHECK(compiled() > compiled_before);
    CHECK(store->stats().errors > errors_before);
    files->fail_read = 0;
    flush_persistent_cache_writes();
  }
}

namespace {

// A store whose put blocks until the test opens the gate.
class gated_store final : public blob_store {
 public:
  std::optional<std::vector<std::byte>> get(std::span<const std::byte>) override {
    return std::nullopt;
  }
  put_result put(std::span<const std::byte>, std::span<const std::byte>) override {
    std::unique_lock<std::mutex> l(m_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(l, [&] { return open_; });
    ++stored_;
    return {};
  }
  bool erase(std::span<const std::byte>) override { return false; }
  std::uint64_t size() const override { return 0; }
  std::uint64_t capacity() const override { return 1; }
  void set_capacity(std::uint64_t) override {}
  void clear() override {}
  blob_store_stats stats() const override {
    std::lock_guard<std::mutex> l(m_);
    blob_store_stats s;
    s.writes = static_cast<std::uint64_t>(stored_);
    return s;
  }
  bool read_only() const noexcept override { return false; }
  std::string describe() const override { return "gated"; }

  void wait_entered(int n) {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return entered_ >= n; });
  }
  void open() {
    std::lock_guard<std::mutex> l(m_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  int entered_ = 0;
  int stored_ = 0;
  bool open_ = false;
};

}  // namespace

TEST_CASE("the write-behind queue never makes a creator wait for the store; when full it drops",
          "[persistent][write_behind]") {
  auto store = std::make_shared<gated_store>();
  set_persistent_cache_write_queue_capacity(1);
  set_persistent_cache(store);
  const auto before = get_persistent_cache_stats();
  // The first write blocks the writer inside put() until the gate opens.
  empty_primitive_cache();
  const a_case a = matmul_case(43), b = matmul_case(47), c = matmul_case(53);
  run(primitive(a.make_pd()), a);
  store->wait_entered(1);
  // Creations go on while that put is blocked: one waits in the queue, the
  // next finds it full and is dropped.
  run(primitive(b.make_pd()), b);
  run(primitive(c.make_pd()), c);
  auto mid = get_persistent_cache_stats();
  CHECK(mid.writes_queued == before.writes_queued + 2);
  CHECK(mid.writes_dropped == before.writes_dropped + 1);
  CHECK(mid.queue_depth == 2);
  store->open();
  flush_persistent_cache_writes();
  CHECK(store->stats().writes == 2);
  CHECK(get_persistent_cache_stats().writes_stored == before.writes_stored + 2);
  CHECK(get_persistent_cache_stats().queue_depth == 0);
  detach_persistent_cache();
  set_persistent_cache_write_queue_capacity(256);
}

TEST_CASE("detaching finishes the queued writes first", "[persistent][write_behind]") {
  temp_dir dir;
  set_persistent_cache(dir_store(dir.path()));
  empty_primitive_cache();
  for (std::int64_t n : {59, 61, 67}) {
    const a_case c = matmul_case(n);
    run(primitive(c.make_pd()), c);
  }
  detach_persistent_cache();
  CHECK(get_persistent_cache_stats().queue_depth == 0);
  CHECK(entries(dir.path()).size() == 3);
  // Detached: creations neither read nor write a store.
  const auto before = get_persistent_cache_stats();
  empty_primitive_cache();
  const a_case c = matmul_case(59);
  const std::uint64_t compiled_before = compiled();
  run(primitive(c.make_pd()), c);
  CHECK(compiled() > compiled_before);
  CHECK(get_persistent_cache_stats().misses == before.misses);
  CHECK(get_persistent_cache_stats().writes_queued == before.writes_queued);
}

TEST_CASE("a store that refuses writes (read-only) is read, and the refusals counted",
          "[persistent][write_behind]") {
  temp_dir dir;
  detach_at_end detach;
  { set_persistent_cache(dir_store(dir.path())); }
  directory_store_options o;
  o.path = dir.path();
  o.read_only = true;
  o.format.library_version = std::string(version().version) + "+" + version().build_identity;
  set_persistent_cache(std::shared_ptr<blob_store>(directory_store::open(o)));
  const auto before = get_persistent_cache_stats();
  empty_primitive_cache();
  const a_case c = matmul_case(71);
  run(primitive(c.make_pd()), c);
  flush_persistent_cache_writes();
  CHECK(get_persistent_cache_stats().writes_refused == before.writes_refused + 1);
  CHECK(entries(dir.path()).empty());
}

TEST_CASE("the C API attaches a directory and reports its errors", "[persistent][c_api]") {
  temp_dir dir;
  CHECK(pc_set_persistent_cache_dir(nullptr, 10) == pc_invalid_arguments);
  CHECK(std::string(pc_last_error_message()).find("NULL or empty") != std::string::npos);
  CHECK(pc_set_persistent_cache_dir("", 10) == pc_invalid_arguments);
  CHECK(pc_set_persistent_cache_dir(dir.path().c_str(), -1) == pc_invalid_arguments);
  CHECK(std::string(pc_last_error_message()).find("negative") != std::string::npos);
  CHECK(get_persistent_cache() == nullptr);

  REQUIRE(pc_set_persistent_cache_dir(dir.path().c_str(), 12) == pc_success);
  REQUIRE(get_persistent_cache() != nullptr);
  CHECK(get_persistent_cache()->capacity() == 12);
  CHECK(get_persistent_cache()->describe().find(dir.path()) != std::string::npos);

  // A directory others could plant code in is refused; the store stays.
  temp_dir open_dir;
  ::chmod(open_dir.path().c_str(), 0777);
  CHECK(pc_set_persistent_cache_dir(open_dir.path().c_str(), 12) == pc_permission_denied);
  CHECK(std::string(pc_last_error_message()).find("writable by") != std::string::npos);
  CHECK(get_persistent_cache()->describe().find(dir.path()) != std::string::npos);

  // A path that cannot be a directory.
  const std::string file = dir.path() + "/a-file";
  std::ofstream(file) << "x";
  CHECK(pc_set_persistent_cache_dir((file + "/sub").c_str(), 12) != pc_success);

  const a_case c = reorder_case();
  empty_primitive_cache();
  run(primitive(c.make_pd()), c);
  CHECK(pc_flush_persistent_cache() == pc_success);
  CHECK(entries(dir.path()).size() == 1);
  CHECK(pc_detach_persistent_cache() == pc_success);
  CHECK(get_persistent_cache() == nullptr);
  CHECK(pc_detach_persistent_cache() == pc_success);
}

TEST_CASE("a forked child writes through its own writer thread", "[persistent][fork]") {
  temp_dir dir;
  detach_at_end detach;
  set_persistent_cache(dir_store(dir.path()));
  empty_primitive_cache();
  const a_case parent_case = matmul_case(73);
  run(primitive(parent_case.make_pd()), parent_case);  // the parent's writer thread runs
  flush_persistent_cache_writes();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The parent's writer thread does not exist here: the child starts its
    // own on its first write, and a flush returns (it would hang otherwise).
    // The application-attached store stays attached (persistent_cache.hpp).
    const a_case c = matmul_case(79);
    const auto before = get_persistent_cache_stats();
    run(primitive(c.make_pd()), c);
    flush_persistent_cache_writes();
    const auto after = get_persistent_cache_stats();
    ::_exit(get_persistent_cache() != nullptr && after.writes_stored == before.writes_stored + 1
                ? 0
                : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(entries(dir.path()).size() == 2);
}

// ---- run in their own processes (CMakeLists.txt), with the environment set ----

TEST_CASE("env: PRIMCACHE_PERSISTENT_CACHE_DIR and _CAPACITY attach a directory store",
          "[.env_good]") {
  const char* dir = std::getenv("PRIMCACHE_PERSISTENT_CACHE_DIR");
  REQUIRE(dir != nullptr);
  std::shared_ptr<blob_store> s = get_persistent_cache();
  REQUIRE(s != nullptr);
  CHECK(s->describe().find(dir) != std::string::npos);
  CHECK(s->capacity() == 5);
  CHECK(env_reports().empty());
  CHECK(control().find_cache("persistent").capacity() == 5);
  // The API wins over the environment.
  temp_dir other;
  set_persistent_cache(dir_store(other.path(), 3));
  CHECK(get_persistent_cache()->capacity() == 3);
  detach_persistent_cache();
  CHECK(get_persistent_cache() == nullptr);  // the environment is not read again
}

TEST_CASE("env: a malformed capacity is reported once and the default stands",
          "[.env_bad_capacity]") {
  std::shared_ptr<blob_store> s = get_persistent_cache();
  REQUIRE(s != nullptr);
  CHECK(s->capacity() == 1024);
  const auto reports = env_reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].find("PRIMCACHE_PERSISTENT_CACHE_CAPACITY") != std::string::npos);
  detach_persistent_cache();
}

TEST_CASE("env: a directory that cannot be used is reported with the reason; no store",
          "[.env_bad_dir]") {
  CHECK(get_persistent_cache() == nullptr);
  const auto reports = env_reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].find("PRIMCACHE_PERSISTENT_CACHE_DIR") != std::string::npos);
  // Creation works without it.
  const a_case c = reorder_case();
  run(primitive(c.make_pd()), c);
  CHECK(get_persistent_cache_stats().misses == 0);
}

TEST_CASE("env: a Redis URL attaches a Redis store; an unreachable server costs no creation",
          "[.env_redis]") {
  std::shared_ptr<blob_store> s = get_persistent_cache();
  REQUIRE(s != nullptr);
  CHECK(s->describe().find("redis") != std::string::npos);
  CHECK(env_reports().empty());
  // Nothing listens on the URL's port: the store misses, the creation compiles.
  const a_case c = reorder_case();
  const std::uint64_t compiled_before = compiled();
  run(primitive(c.make_pd()), c);
  CHECK(compiled() > compiled_before);
  CHECK(get_persistent_cache_stats().misses == 1);
  flush_persistent_cache_writes();
  detach_persistent_cache();
}

// Run twice (CMakeLists.txt): with PRIMCACHE_PERSISTENT_CACHE_DIR, and with
// PRIMCACHE_PERSISTENT_CACHE_REDIS alone.
TEST_CASE("env: a forked child opens the environment's store anew", "[.env_fork]") {
  const bool has_dir = std::getenv("PRIMCACHE_PERSISTENT_CACHE_DIR") != nullptr;
  REQUIRE(get_persistent_cache() != nullptr);
  if (has_dir) get_persistent_cache()->clear();  // the directory outlives the runs
  const a_case parent_case = matmul_case(83);
  run(primitive(parent_case.make_pd()), parent_case);
  flush_persistent_cache_writes();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::alarm(60);
    int code = 0;
    try {
      // The parent's store was registered in control as "persistent"; the
      // child's own store takes the name over, so control turns the store
      // the child uses.
      if (get_persistent_cache() == nullptr) {
        code = 1;
      } else if (!env_reports().empty()) {
        code = 2;
      } else {
        const auto before = get_persistent_cache_stats();
        const a_case c = matmul_case(89);
        run(primitive(c.make_pd()), c);
        flush_persistent_cache_writes();
        const auto after = get_persistent_cache_stats();
        if (after.misses <= before.misses) code = 3;
        if (has_dir && after.writes_stored <= before.writes_stored) code = 4;
        if (has_dir) {
          const std::uint64_t turned = get_persistent_cache()->capacity() + 1;
          control().set_capacity("persistent", turned);
          if (get_persistent_cache()->capacity() != turned) code = 5;
        } else if (control().find_cache("persistent").capacity() !=
                   get_persistent_cache()->capacity()) {
          code = 5;
        }
      }
    } catch (...) {
      code = 6;
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  detach_persistent_cache();
}

TEST_CASE("env: a malformed Redis URL is reported with the reason and ignored",
          "[.env_bad_redis]") {
  CHECK(get_persistent_cache() == nullptr);
  const auto reports = env_reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].find("PRIMCACHE_PERSISTENT_CACHE_REDIS") != std::string::npos);
}

TEST_CASE("env: a malformed Redis URL's password is never reported", "[.env_bad_redis_password]") {
  CHECK(get_persistent_cache() == nullptr);
  const auto reports = env_reports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].find("PRIMCACHE_PERSISTENT_CACHE_REDIS='redis://***@127.0.0.1:1/'") !=
        std::string::npos);
  CHECK(reports[0].find("prefix is empty") != std::string::npos);
  CHECK(reports[0].find("hunter2") == std::string::npos);
}

TEST_CASE("env: an API call before first use means the environment is never read",
          "[.env_api_first]") {
  const char* dir = std::getenv("PRIMCACHE_PERSISTENT_CACHE_DIR");
  REQUIRE(dir != nullptr);
  REQUIRE_FALSE(fs::exists(dir));
  temp_dir mine;
  set_persistent_cache(dir_store(mine.path()));
  const a_case c = reorder_case();
  run(primitive(c.make_pd()), c);
  detach_persistent_cache();
  CHECK_FALSE(fs::exists(dir));  // never opened (opening creates it)
}

// Verbose lines: one process with PRIMCACHE_VERBOSE=1 (CMakeLists.txt checks the output).
TEST_CASE("verbose: persistent cache hits and misses are traced", "[.verbose]") {
  temp_dir dir;
  detach_at_end detach;
  set_persistent_cache(dir_store(dir.path()));
  const a_case c = eltwise_case(format_tag::nhwc);
  empty_primitive_cache();
  run(primitive(c.make_pd()), c);
  flush_persistent_cache_writes();
  empty_primitive_cache();
  run(primitive(c.make_pd()), c);
}

// The multi-process test (multi_process.cmake runs this twice on one
// directory): prints how many objects this process compiled and a digest of
// the results.
TEST_CASE("multi-process: create and run every case", "[.multi_process]") {
  REQUIRE(get_persistent_cache() != nullptr);
  const std::uint64_t compiled_before = compiled();
  std::uint64_t digest = 1469598103934665603ull;
  for (const a_case& c : all_cases()) {
    for (std::uint8_t b : run(primitive(c.make_pd()), c)) digest = (digest ^ b) * 1099511628211ull;
  }
  const std::uint64_t n = compiled() - compiled_before;
  flush_persistent_cache_writes();
  std::printf("compiled %llu digest %016llx hits %llu\n", static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(digest),
              static_cast<unsigned long long>(get_persistent_cache_stats().hits));
}
