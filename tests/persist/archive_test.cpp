// Cache archives through the library (the command line's tests run the
// same code as a process): a round trip with progress, verify's hooks,
// signed entries carried through, an import into a read-only store refused,
// a damaged archive publishing nothing, and an export that writes through
// nothing planted beside its target.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "persist_test_support.hpp"
#include "primcache/base/error.hpp"
#include "primcache/persist/archive.hpp"
#include "primcache/persist/directory_store.hpp"

using primcache::directory_store;
using primcache::test::as_bytes;
using primcache::test::payload_of;
using primcache::test::temp_dir;

namespace {

std::unique_ptr<directory_store> open_store(const std::string& path, bool read_only = false,
                                            const primcache::fleet_key* key = nullptr) {
  primcache::directory_store_options o;
  o.path = path;
  o.read_only = read_only;
  o.format.library_version = "test-1";
  o.format.key = key;
  return directory_store::open(o);
}

}  // namespace

TEST_CASE("verify's hooks see every entry and every good one", "[persist][archive]") {
  temp_dir dir;
  auto s = open_store(dir.path());
  for (int i = 0; i < 4; ++i) s->put(as_bytes(std::to_string(i)), payload_of("p", 100));
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ticks;
  std::vector<std::string> keys;
  primcache::verify_options o;
  o.progress = [&](std::uint64_t d, std::uint64_t t) { ticks.emplace_back(d, t); };
  o.on_good = [&](std::span<const std::byte> k, std::span<const std::byte> e) {
    keys.emplace_back(reinterpret_cast<const char*>(k.data()), k.size());
    CHECK(primcache::decode_entry(s->format(), k, e).ok());
  };
  auto rep = s->verify(o);
  CHECK(rep.good == 4);
  CHECK(keys.size() == 4);
  REQUIRE(ticks.size() == 4);
  CHECK(ticks.back() == std::make_pair(std::uint64_t{4}, std::uint64_t{4}));
}

TEST_CASE("an archive carries a store's entries to another", "[persist][archive]") {
  temp_dir a, b, c;
  const auto fleet = primcache::fleet_key::from_bytes(as_bytes("0123456789abcdef-fleet")).value();
  auto src = open_store(a.path(), false, &fleet);
  for (int i = 0; i < 6; ++i) {
    const std::string k = std::to_string(i) + "-key";
    src->put(as_bytes(k), payload_of(k, 1000 * static_cast<std::size_t>(i)));
  }
  const std::string file = c.path() + "/archive.pcar";
  // A read-only store can be exported (an image's baked cache).
  auto ro = open_store(a.path(), true, &fleet);
  std::uint64_t last_done = 0;
  auto rep =
      primcache::export_archive(*ro, file, [&](std::uint64_t d, std::uint64_t) { last_done = d; });
  CHECK(rep.entries == 6);
  CHECK(rep.skipped.empty());
  CHECK(last_done == 6);

  SECTION("imported with the same fleet key") {
    auto dst = open_store(b.path(), false, &fleet);
    std::uint64_t done = 0, total = 0;
    auto in = primcache::import_archive(file, *dst, [&](std::uint64_t d, std::uint64_t t) {
      done = d;
      total = t;
    });
    CHECK(in.entries == 6);
    CHECK(in.stored == 6);
    CHECK(done == 12);
    CHECK(total == 12);
    for (int i = 0; i < 6; ++i) {
      const std::string k = std::to_string(i) + "-key";
      CHECK(*dst->get(as_bytes(k)) == payload_of(k, 1000 * static_cast<std::size_t>(i)));
    }
  }
  SECTION("without the fleet key's signature check, signed entries still verify by checksum") {
    auto dst = open_store(b.path());
    CHECK(primcache::import_archive(file, *dst).stored == 6);
  }
  SECTION("refused by a store with another fleet key, nothing published") {
    const auto other = primcache::fleet_key::from_bytes(as_bytes("another-fleet-key-0000")).value();
    auto dst = open_store(b.path(), false, &other);
    try {
      primcache::import_archive(file, *dst);
      FAIL("imported");
    } catch (const primcache::error& e) {
      CHECK(e.code() == primcache::status::corrupt_data);
      CHECK_THAT(e.message(), Catch::Contains("signature_bad"));
      CHECK_THAT(e.message(), Catch::Contains("nothing was imported"));
    }
    CHECK(dst->verify(false).entries == 0);
  }
  SECTION("refused by a read-only store") {
    auto dst = open_store(b.path(), true);
    try {
      primcache::import_archive(file, *dst);
      FAIL("imported");
    } catch (const primcache::error& e) {
      CHECK(e.code() == primcache::status::permission_denied);
    }
  }
}

TEST_CASE("an export never writes through a file planted beside its target", "[persist][archive]") {
  temp_dir a, c, elsewhere;
  auto src = open_store(a.path());
  src->put(as_bytes("k"), payload_of("k", 100));
  const std::string victim = elsewhere.path() + "/victim";
  std::ofstream(victim) << "keep me";
  const std::string file = c.path() + "/archive.pcar";
  // Where an export once put its temporary, a symlink to someone's file.
  const std::string planted = file + ".tmp-" + std::to_string(::getpid());
  REQUIRE(::symlink(victim.c_str(), planted.c_str()) == 0);
  const auto rep = primcache::export_archive(*src, file);
  CHECK(rep.entries == 1);
  std::ifstream in(victim);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "keep me");
  CHECK(std::filesystem::is_regular_file(std::filesystem::symlink_status(file)));
  CHECK(std::filesystem::is_symlink(std::filesystem::symlink_status(planted)));
  temp_dir b;
  auto dst = open_store(b.path());
  CHECK(primcache::import_archive(file, *dst).stored == 1);
}
