// `primcache cache ...` run as a process on real directories: stats,
// verify (and --fix), clear, export and import, and each way they fail — a
// missing or world-writable directory, a missing, foreign, truncated or
// altered archive, an archive whose entry does not verify, an unusable
// fleet key, usage errors — with a non-zero exit and a message that says why.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "primcache/persist/directory_store.hpp"
#include "process.hpp"

namespace fs = std::filesystem;
using primcache::test::run_program;
using primcache::test::run_result;
using primcache::test::temp_path;

namespace {

constexpr const char* version = "cli-test-1";

std::vector<std::byte> bytes_of(const std::string& s) {
  auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}

std::string payload(const std::string& key, std::size_t n) {
  std::string out(n, '\0');
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<char>(key[i % key.size()] + i);
  return out;
}

std::string key_name(int i) {
  std::string k = "k";
  k += std::to_string(i);
  return k;
}

std::unique_ptr<primcache::directory_store> open_store(const std::string& dir,
                                                       std::string v = version) {
  primcache::directory_store_options o;
  o.path = dir;
  o.format.library_version = std::move(v);
  return primcache::directory_store::open(o);
}

// A cache directory holding k0..k(n-1).
std::string make_cache(int n, const std::string& name = "cache") {
  const std::string dir = temp_path(name);
  auto s = open_store(dir);
  for (int i = 0; i < n; ++i) {
    const std::string k = key_name(i);
    s->put(bytes_of(k), bytes_of(payload(k, 3000 + 100 * static_cast<std::size_t>(i))));
  }
  return dir;
}

run_result cli(std::vector<std::string> args, bool with_version = true) {
  std::vector<std::string> argv = {PRIMCACHE_CLI_PATH, "cache"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (with_version) {
    argv.push_back("--library-version");
    argv.push_back(version);
  }
  run_result r = run_program(argv);
  REQUIRE(r.status);  // it ended within the time limit
  return r;
}

std::vector<std::string> kernel_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().filename() == "kernel.bin") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

void flip_byte(const std::string& p, std::size_t at) {
  std::string b = read_file(p);
  b[at] = static_cast<char>(b[at] ^ 0x5a);
  write_file(p, b);
}

// Rewrites an archive's trailer checksum over its (altered) bytes.
void reseal(std::string& archive) {
  const std::size_t body = archive.size() - 16;
  XXH128_hash_t h = XXH3_128bits(archive.data(), body);
  for (int i = 0; i < 8; ++i) archive[body + i] = static_cast<char>(h.high64 >> (8 * (7 - i)));
  for (int i = 0; i < 8; ++i) archive[body + 8 + i] = static_cast<char>(h.low64 >> (8 * (7 - i)));
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("cache stats counts entries and bytes", "[services][cli][cache]") {
  const std::string dir = make_cache(3);
  run_result r = cli({"stats", dir});
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(has(r.out, "entries:           3 (3 good, 0 bad)"));
  CHECK(has(r.out, "stale temporaries: 0"));
  CHECK(has(r.out, "library version:   cli-test-1"));

  SECTION("entries of another library version are bad ones") {
    run_result d = cli({"stats", dir}, false);
    CHECK(d.status == 0);
    CHECK(has(d.out, "(0 good, 3 bad)"));
    CHECK(has(d.out, "run `primcache cache verify"));
  }
}

TEST_CASE("cache verify finds bad entries; --fix removes them", "[services][cli][cache]") {
  const std::string dir = make_cache(3);
  CHECK(cli({"verify", dir}).status == 0);

  flip_byte(kernel_files(dir)[1], 200);
  run_result r = cli({"verify", dir});
  CHECK(r.status == 1);
  CHECK(has(r.out, "bad: "));
  CHECK(has(r.out, "checksum_mismatch"));
  CHECK(has(r.out, "2 good"));
  CHECK(has(r.err, "1 bad entries in " + dir + " (remove them with --fix)"));
  CHECK(kernel_files(dir).size() == 3);  // without --fix nothing is removed

  run_result f = cli({"verify", dir, "--fix"});
  INFO(f.err);
  CHECK(f.status == 1);  // removed, and still reported: the cache held a bad entry
  CHECK(has(f.out, "fixed: removed 1 bad entries"));
  CHECK(has(f.err, "1 bad entries were in " + dir + " (removed)"));
  CHECK(kernel_files(dir).size() == 2);
  CHECK(cli({"verify", dir}).status == 0);
  // A clean cache: --fix has nothing to remove and exits 0.
  run_result again = cli({"verify", dir, "--fix"});
  CHECK(again.status == 0);
  CHECK(has(again.out, "fixed: removed 0 bad entries"));
}

TEST_CASE("cache clear drops every entry", "[services][cli][cache]") {
  const std::string dir = make_cache(4);
  run_result r = cli({"clear", dir});
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(has(r.out, "cleared " + dir));
  CHECK(kernel_files(dir).empty());
  CHECK(has(cli({"stats", dir}).out, "entries:           0"));
}

TEST_CASE("cache export and import ship a cache as one file", "[services][cli][cache]") {
  const std::string dir = make_cache(5);
  const std::string archive = temp_path("warm.pcar");
  run_result e = cli({"export", dir, archive});
  INFO(e.err);
  REQUIRE(e.status == 0);
  CHECK(has(e.out, "exported 5 entries"));
  CHECK(read_file(archive).rfind("PCARCHV\n", 0) == 0);
  for (const auto& f : fs::directory_iterator(fs::path(archive).parent_path())) {
    CHECK(f.path().string().find(".pcar.tmp-") == std::string::npos);  // written beside, renamed
  }

  const std::string target = temp_path("imported");  // created by import
  run_result i = cli({"import", archive, target});
  INFO(i.err);
  REQUIRE(i.status == 0);
  CHECK(has(i.out, "imported 5 entries"));
  auto s = open_store(target);
  for (int k = 0; k < 5; ++k) {
    const std::string key = key_name(k);
    auto got = s->get(bytes_of(key));
    REQUIRE(got);
    CHECK(*got == bytes_of(payload(key, 3000 + 100 * static_cast<std::size_t>(k))));
  }
  CHECK((fs::status(target).permissions() & fs::perms::all) == fs::perms::owner_all);

  SECTION("importing again finds them there") {
    run_result again = cli({"import", archive, target});
    CHECK(again.status == 0);
    CHECK(has(again.out, "imported 0 entries"));
    CHECK(has(again.out, "5 were already there"));
  }
  SECTION("bad entries are left out of an export, and said so") {
    flip_byte(kernel_files(dir)[0], 100);
    run_result e2 = cli({"export", dir, archive});
    CHECK(e2.status == 0);
    CHECK(has(e2.out, "exported 4 entries"));
    CHECK(has(e2.out, "left out 1 bad entries"));
  }
  SECTION("the progress bar, forced on a pipe") {
    run_result p = cli({"verify", dir, "--progress"});
    CHECK(p.status == 0);
    CHECK(has(p.err, "verify ["));
    CHECK(has(p.err, "100% 5/5"));
    run_result q = cli({"import", archive, temp_path("p"), "--progress"});
    CHECK(q.status == 0);
    CHECK(has(q.err, "100% 10/10"));          // two passes over 5 entries
    CHECK(cli({"verify", dir}).err.empty());  // not a terminal: no bar
  }
}

TEST_CASE("cache import refuses a bad archive and imports nothing", "[services][cli][cache]") {
  const std::string dir = make_cache(3);
  const std::string archive = temp_path("a.pcar");
  REQUIRE(cli({"export", dir, archive}).status == 0);
  std::string bytes = read_file(archive);
  const std::string bad = temp_path("bad.pcar");
  std::string says;

  SECTION("missing") {
    run_result r = cli({"import", temp_path("none.pcar"), temp_path("t")});
    CHECK(r.status == 1);
    CHECK(has(r.err, "cannot open it: No such file or directory"));
    return;
  }
  SECTION("not an archive") {
    write_file(bad, std::string(100, 'x'));
    says = "not a primcache cache archive";
  }
  SECTION("too short") {
    write_file(bad, "PCARCHV\n");
    says = "too short";
  }
  SECTION("truncated") {
    write_file(bad, bytes.substr(0, bytes.size() - 40));
    says = "no trailer";
  }
  SECTION("another archive format version") {
    bytes[8] = 9;
    write_file(bad, bytes);
    says = "archive format version 9";
  }
  SECTION("a flipped bit: the archive's checksum") {
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 1);
    write_file(bad, bytes);
    says = "checksum mismatch: the archive was altered";
  }
  SECTION("a corrupt entry inside a resealed archive") {
    // Alter an entry's payload and fix up the archive's own checksum: only
    // the entry's checksum can tell.
    bytes[bytes.size() - 32 - 16 - 100] ^= 1;
    reseal(bytes);
    write_file(bad, bytes);
    says = "is bad: checksum_mismatch";
  }
  SECTION("a length running past the end") {
    bytes[16] = static_cast<char>(0xff);  // the first key's length
    bytes[17] = static_cast<char>(0xff);
    reseal(bytes);
    write_file(bad, bytes);
    says = "runs past the end";
  }
  SECTION("entries of another library version") {
    write_file(bad, bytes);
    const std::string target = temp_path("t");
    std::vector<std::string> argv = {PRIMCACHE_CLI_PATH,  "cache",  "import", bad, target,
                                     "--library-version", "another"};
    run_result r = run_program(argv);
    CHECK(r.status == 1);
    CHECK(has(r.err, "entry 1"));
    CHECK(has(r.err, "other_library_version"));
    CHECK(kernel_files(target).empty());
    return;
  }
  const std::string target = temp_path("t");
  run_result r = cli({"import", bad, target});
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(has(r.err, says));
  CHECK(has(r.err, "nothing was imported"));
  CHECK(kernel_files(target).empty());
}

TEST_CASE("cache import with a fleet key refuses unsigned entries", "[services][cli][cache]") {
  const std::string dir = make_cache(2);  // unsigned
  const std::string archive = temp_path("u.pcar");
  REQUIRE(cli({"export", dir, archive}).status == 0);
  const std::string key = temp_path("fleet.key");
  write_file(key, "0123456789abcdef0123456789abcdef\n");
  ::chmod(key.c_str(), 0600);
  ::setenv("PRIMCACHE_PERSISTENT_CACHE_KEY_FILE", key.c_str(), 1);
  run_result r = cli({"import", archive, temp_path("t")});
  run_result v = cli({"verify", dir});
  ::chmod(key.c_str(), 0644);
  run_result loose = cli({"stats", dir});
  ::unsetenv("PRIMCACHE_PERSISTENT_CACHE_KEY_FILE");
  CHECK(r.status == 1);
  CHECK(has(r.err, "signature_missing"));
  CHECK(v.status == 1);
  CHECK(has(v.out, "signature_missing"));
  CHECK(loose.status == 1);
  CHECK(has(loose.err, "fleet key file"));
}

TEST_CASE("cache commands refuse a missing or world-writable directory", "[services][cli][cache]") {
  const std::string missing = temp_path("missing");
  for (std::vector<std::string> args : {std::vector<std::string>{"stats", missing},
                                        {"verify", missing},
                                        {"verify", missing, "--fix"},
                                        {"clear", missing},
                                        {"export", missing, temp_path("x.pcar")}}) {
    run_result r = cli(args);
    INFO(args[0]);
    CHECK(r.status == 1);
    CHECK((has(r.err, "cannot be opened: No such file") || has(r.err, "does not exist")));
    CHECK_FALSE(fs::exists(missing));
  }

  const std::string dir = make_cache(1);
  const std::string archive = temp_path("w.pcar");
  REQUIRE(cli({"export", dir, archive}).status == 0);
  ::chmod(dir.c_str(), 0777);
  for (std::vector<std::string> args : {std::vector<std::string>{"stats", dir},
                                        {"verify", dir},
                                        {"verify", dir, "--fix"},
                                        {"clear", dir},
                                        {"export", dir, temp_path("y.pcar")},
                                        {"import", archive, dir}}) {
    run_result r = cli(args);
    INFO(args[0]);
    CHECK(r.status == 1);
    CHECK(has(r.err, "is writable by group and others (mode 0777)"));
  }
  ::chmod(dir.c_str(), 0700);
  CHECK(kernel_files(dir).size() == 1);
}

TEST_CASE("cache export fails cleanly when it cannot write", "[services][cli][cache]") {
  const std::string dir = make_cache(1);
  run_result r = cli({"export", dir, temp_path("no-such-dir") + "/a.pcar"});
  CHECK(r.status == 1);
  CHECK(has(r.err, "cannot create"));
}

TEST_CASE("cache usage errors exit 2 with the usage", "[services][cli][cache]") {
  const std::string dir = make_cache(0);
  for (std::vector<std::string> args : {std::vector<std::string>{},
                                        {"frobnicate", dir},
                                        {"stats"},
                                        {"stats", dir, "extra"},
                                        {"export", dir},
                                        {"import", "f"},
                                        {"stats", dir, "--fix"},
                                        {"stats", dir, "--bogus"},
                                        {"import", "f", dir, "--capacity", "0"},
                                        {"verify", dir, "--capacity", "5"},
                                        {"stats", dir, "--library-version"}}) {
    run_result r = cli(args, false);
    INFO((args.empty() ? "(none)" : args[0]));
    CHECK(r.status == 2);
    CHECK(has(r.err, "usage: primcache cache COMMAND"));
  }
  run_result h = cli({"--help"}, false);
  CHECK(h.status == 0);
  CHECK(has(h.out, "export DIR FILE"));
}
