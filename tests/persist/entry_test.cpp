// The entry format: round trips, and every way a stored entry can be wrong
// (truncated, foreign, altered, unsigned or mis-signed, another version or
// key) refused with its reason. Also the fleet key file's checks.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "persist_test_support.hpp"
#include "primcache/persist/entry.hpp"
#include "primcache/persist/fleet_key.hpp"

using primcache::decode_entry;
using primcache::encode_entry;
using primcache::encoded_entry_size;
using primcache::entry_fault;
using primcache::entry_format;
using primcache::test::as_bytes;
using primcache::test::payload_of;
using primcache::test::temp_dir;

namespace {

primcache::fleet_key key_of(const std::string& s) {
  return primcache::fleet_key::from_bytes(as_bytes(s)).value();
}

}  // namespace

TEST_CASE("an entry decodes to its payload", "[persist][entry]") {
  const auto fleet = key_of("0123456789abcdef-fleet");
  entry_format fmt{.library_version = "0.1.0+abc", .key = nullptr};
  SECTION("unsigned") {}
  SECTION("signed") {
    fmt.key = &fleet;
  }
  auto payload = GENERATE(std::string(), std::string("x"), std::string(100000, 'k'));
  auto bytes = encode_entry(fmt, as_bytes("the key"), as_bytes(payload));
  auto d = decode_entry(fmt, as_bytes("the key"), bytes);
  REQUIRE(d.ok());
  CHECK(d.message.empty());
  CHECK(d.payload == as_bytes(payload));
}

TEST_CASE("encoded_entry_size is the size encode_entry writes", "[persist][entry]") {
  const auto fleet = key_of("0123456789abcdef-fleet");
  entry_format fmt{.library_version = GENERATE(std::string(), std::string("0.1.0+abc")),
                   .key = nullptr};
  SECTION("unsigned") {}
  SECTION("signed") {
    fmt.key = &fleet;
  }
  for (std::string key : {"", "the key"}) {
    for (std::size_t n : {0u, 1u, 4097u}) {
      INFO("key '" << key << "', payload " << n);
      CHECK(encoded_entry_size(fmt, key.size(), n) ==
            encode_entry(fmt, as_bytes(key), payload_of(key, n)).size());
    }
  }
  CHECK(encoded_entry_size(fmt, 1, UINT64_MAX - 10) == UINT64_MAX);
  CHECK(encoded_entry_size(fmt, UINT64_MAX, UINT64_MAX) == UINT64_MAX);
}

TEST_CASE("a damaged or foreign entry is refused with its reason", "[persist][entry]") {
  entry_format fmt{.library_version = "0.1.0+abc", .key = nullptr};
  const std::string payload(1000, 'p');
  auto good = encode_entry(fmt, as_bytes("k1"), as_bytes(payload));

  SECTION("every truncation is 'truncated'") {
    for (std::size_t n = 0; n < good.size(); n += (n < 64 ? 1 : 97)) {
      std::vector<std::byte> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
      auto d = decode_entry(fmt, as_bytes("k1"), cut);
      INFO("length " << n);
      CHECK(d.fault == entry_fault::truncated);
      CHECK(d.message.rfind("truncated: ", 0) == 0);
      CHECK(d.payload.empty());
    }
  }
  SECTION("bad magic") {
    good[0] = std::byte{'X'};
    auto d = decode_entry(fmt, as_bytes("k1"), good);
    CHECK(d.fault == entry_fault::bad_magic);
    CHECK_THAT(d.message, Catch::Contains("XCENTRY"));
  }
  SECTION("another format version") {
    good[8] = std::byte{2};
    auto d = decode_entry(fmt, as_bytes("k1"), good);
    CHECK(d.fault == entry_fault::other_format_version);
    CHECK_THAT(d.message, Catch::Contains("version 2"));
  }
  SECTION("every flipped bit in the body or checksum") {
    // From the first byte after the header's fixed part (flags flips would
    // read as "signed" and truncated; covered below).
    for (std::size_t i = 16; i < good.size(); i += 7) {
      auto bad = good;
      bad[i] ^= std::byte{0x10};
      auto d = decode_entry(fmt, as_bytes("k1"), bad);
      INFO("byte " << i);
      CHECK_FALSE(d.ok());
      CHECK((d.fault == entry_fault::checksum_mismatch || d.fault == entry_fault::truncated));
    }
  }
  SECTION("trailing bytes") {
    good.push_back(std::byte{0});
    CHECK(decode_entry(fmt, as_bytes("k1"), good).fault == entry_fault::checksum_mismatch);
  }
  SECTION("another library version") {
    entry_format other{.library_version = "0.2.0", .key = nullptr};
    auto d = decode_entry(other, as_bytes("k1"), good);
    CHECK(d.fault == entry_fault::other_library_version);
    CHECK_THAT(d.message, Catch::Contains("'0.1.0+abc'") && Catch::Contains("'0.2.0'"));
  }
  SECTION("another key") {
    auto d = decode_entry(fmt, as_bytes("k2"), good);
    CHECK(d.fault == entry_fault::key_mismatch);
  }
}

TEST_CASE("with a fleet key, unsigned and mis-signed entries are refused",
          "[persist][entry][security]") {
  const auto fleet = key_of("the fleet's secret key");
  const auto other = key_of("another fleet's secret");
  entry_format signing{.library_version = "v", .key = &fleet};
  entry_format plain{.library_version = "v", .key = nullptr};
  entry_format forger{.library_version = "v", .key = &other};

  SECTION("unsigned") {
    auto d =
        decode_entry(signing, as_bytes("k"), encode_entry(plain, as_bytes("k"), as_bytes("x")));
    CHECK(d.fault == entry_fault::signature_missing);
  }
  SECTION("signed with another key") {
    auto d =
        decode_entry(signing, as_bytes("k"), encode_entry(forger, as_bytes("k"), as_bytes("x")));
    CHECK(d.fault == entry_fault::signature_bad);
  }
  SECTION("a flipped bit in the signature") {
    auto e = encode_entry(signing, as_bytes("k"), as_bytes("x"));
    e[e.size() - 5] ^= std::byte{1};
    CHECK(decode_entry(signing, as_bytes("k"), e).fault == entry_fault::signature_bad);
  }
  SECTION("without a key a signed entry is accepted on its checksum") {
    auto d =
        decode_entry(plain, as_bytes("k"), encode_entry(signing, as_bytes("k"), as_bytes("x")));
    CHECK(d.ok());
  }
}

TEST_CASE("the fleet key file must be private", "[persist][entry][security]") {
  temp_dir dir;
  const std::string path = dir.path() + "/key";
  {
    std::ofstream f(path);
    f << "0123456789abcdef0123456789abcdef\n";
  }
  SECTION("mode 0600 is accepted; the trailing newline is not part of the key") {
    ::chmod(path.c_str(), 0600);
    auto k = primcache::fleet_key::from_file(path);
    REQUIRE(k);
    CHECK(k.value().secret().size() == 32);
  }
  SECTION("readable by group") {
    ::chmod(path.c_str(), 0640);
    auto k = primcache::fleet_key::from_file(path);
    REQUIRE_FALSE(k);
    CHECK(k.why().code == primcache::status::permission_denied);
    CHECK_THAT(k.why().message,
               Catch::Contains(path) && Catch::Contains("by group") && Catch::Contains("0640"));
  }
  SECTION("readable by others") {
    ::chmod(path.c_str(), 0604);
    auto k = primcache::fleet_key::from_file(path);
    REQUIRE_FALSE(k);
    CHECK_THAT(k.why().message, Catch::Contains("by others"));
  }
  SECTION("owned by another user, even with mode 0600") {
    // Its owner can read it, and so sign whatever code they like.
    if (::geteuid() != 0) {
      WARN("not root: cannot give the key file to another user; ownership check not exercised");
      return;
    }
    ::chmod(path.c_str(), 0600);
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
    auto k = primcache::fleet_key::from_file(path);
    REQUIRE_FALSE(k);
    CHECK(k.why().code == primcache::status::permission_denied);
    CHECK_THAT(k.why().message, Catch::Contains(path) && Catch::Contains("uid 65534"));
  }
  SECTION("too short") {
    ::chmod(path.c_str(), 0600);
    std::ofstream(path) << "short\n";
    auto k = primcache::fleet_key::from_file(path);
    REQUIRE_FALSE(k);
    CHECK(k.why().code == primcache::status::invalid_arguments);
  }
  SECTION("a FIFO is refused at once, not waited on") {
    const std::string fifo = dir.path() + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto pending =
        std::async(std::launch::async, [&] { return primcache::fleet_key::from_file(fifo); });
    if (pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      // Blocked in open() until a writer comes: be that writer, then fail.
      const int w = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
      if (w >= 0) ::close(w);
      pending.wait();
      FAIL("from_file waited on a FIFO");
    }
    auto k = pending.get();
    REQUIRE_FALSE(k);
    CHECK(k.why().code == primcache::status::invalid_arguments);
    CHECK_THAT(k.why().message, Catch::Contains("is not a regular file"));
  }
  SECTION("a file over 64 KiB is refused before it is read") {
    ::chmod(path.c_str(), 0600);
    std::ofstream(path) << std::string(primcache::fleet_key::max_file_bytes + 1, 'k');
    auto k = primcache::fleet_key::from_file(path);
    REQUIRE_FALSE(k);
    CHECK(k.why().code == primcache::status::invalid_arguments);
    CHECK_THAT(k.why().message, Catch::Contains("65537 bytes"));
    std::ofstream(path) << std::string(primcache::fleet_key::max_file_bytes, 'k');
    CHECK(primcache::fleet_key::from_file(path));
  }
  SECTION("missing") {
    auto k = primcache::fleet_key::from_file(path + ".nope");
    REQUIRE_FALSE(k);
    CHECK(k.why().code == primcache::status::not_found);
  }
  SECTION("through the environment") {
    ::chmod(path.c_str(), 0644);
    ::setenv(primcache::persistent_cache_key_file_env, path.c_str(), 1);
    auto k = primcache::fleet_key_from_env();
    ::unsetenv(primcache::persistent_cache_key_file_env);
    REQUIRE_FALSE(k);
    CHECK_THAT(k.why().message, Catch::Contains("PRIMCACHE_PERSISTENT_CACHE_KEY_FILE"));
    auto unset = primcache::fleet_key_from_env();
    REQUIRE(unset);
    CHECK_FALSE(unset.value().has_value());
  }
}
