// Golden keys: each case writes the fields a hand-written listing in golden/
// documents, and the key must reproduce the listing's bytes exactly and the
// hashes the reference tool (xxhsum) recorded for them. An accidental change
// of the byte format or of the hash fails here. To add or change a case, see
// golden/regenerate.sh and docs/keyhash.md.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "primcache/keyhash/key.hpp"

namespace {

namespace fs = std::filesystem;
const fs::path kGoldenDir = PRIMCACHE_KEYHASH_GOLDEN_DIR;

enum class small_enum : std::uint8_t { three = 3 };
enum class signed16_enum : std::int16_t { minus_one = -1 };
enum class wide_enum : std::uint32_t { value = 0x11223344 };
enum plain_enum : int { plain_minus_two = -2 };
enum class i64_enum : std::int64_t { value = 0x0102030405060708 };
enum class data_type : std::uint8_t { undef = 0, f32 = 1 };

struct golden_case {
  std::string name;  // golden/<name>.hex, .bin
  std::function<primcache::key()> build;
};

// The fields of each listing, in the listing's order.
std::vector<golden_case> golden_cases() {
  return {
      {"empty", [] { return primcache::key_writer().finish(); }},
      {"integers",
       [] {
         return primcache::key_writer()
             .u8(0x01)
             .u16(0x0203)
             .u32(0x04050607)
             .u64(0x08090a0b0c0d0e0f)
             .i32(-2)
             .i32(std::numeric_limits<std::int32_t>::min())
             .i64(-3)
             .u64(std::numeric_limits<std::uint64_t>::max())
             .boolean(true)
             .boolean(false)
             .finish();
       }},
      {"floats",
       [] {
         return primcache::key_writer()
             .f32(1.0f)
             .f32(0.0f)
             .f32(-0.0f)
             .f32(std::bit_cast<float>(std::uint32_t{0x7fc00001}))
             .f32(-std::numeric_limits<float>::infinity())
             .f64(0.5)
             .f64(-2.0)
             .f64(0.1)
             .finish();
       }},
      {"enums",
       [] {
         return primcache::key_writer()
             .enumeration(small_enum::three)
             .enumeration(signed16_enum::minus_one)
             .enumeration(wide_enum::value)
             .enumeration(plain_minus_two)
             .enumeration(i64_enum::value)
             .finish();
       }},
      {"strings",
       [] { return primcache::key_writer().str("jit:avx512").str("").str("\xc3\xa9").finish(); }},
      {"arrays",
       [] {
         const std::int64_t dims[] = {1, -1, 256};
         const std::byte raw[] = {std::byte{0xde}, std::byte{0xad}, std::byte{0xbe},
                                  std::byte{0xef}};
         return primcache::key_writer().i64s(dims).i64s({}).raw(raw).finish();
       }},
      {"primitive",
       [] {
         const std::int64_t dims[] = {64, 128};
         return primcache::key_writer()
             .u32(3)
             .i64s(dims)
             .enumeration(data_type::f32)
             .f32(1.0f)
             .boolean(true)
             .str("jit:avx512")
             .i32(16)
             .finish();
       }},
      {"long",
       [] {
         std::vector<std::int64_t> values(40);
         for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int64_t>(i);
         return primcache::key_writer().i64s(values).finish();
       }},
  };
}

std::vector<std::byte> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  for (std::size_t i = 0; i < chars.size(); ++i) out[i] = static_cast<std::byte>(chars[i]);
  return out;
}

// file name -> hex digest, from either xxhsum output style:
//   BSD tag ("XXH3 (name.bin) = 2d06800538d394c2"), written by -H3
//   GNU style ("99aa06d3014798d86001c324468d497f  name.bin"), written by -H2
std::map<std::string, std::string> read_manifest(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::map<std::string, std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto open = line.find(" (");
    auto close = line.find(") = ");
    if (open != std::string::npos && close != std::string::npos) {
      out[line.substr(open + 2, close - open - 2)] = line.substr(close + 4);
    } else if (auto gap = line.find("  "); gap != std::string::npos) {
      out[line.substr(gap + 2)] = line.substr(0, gap);
    } else {
      throw std::runtime_error("unreadable manifest line in " + path.string() + ": " + line);
    }
  }
  return out;
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string hex_dump(std::span<const std::byte> bytes) {
  std::ostringstream out;
  for (std::byte b : bytes) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%02x ", static_cast<unsigned>(b));
    out << buf;
  }
  return out.str();
}

}  // namespace

TEST_CASE("a golden key reproduces its hand-written bytes and the hashes xxhsum recorded",
          "[keyhash][golden]") {
  const auto xxh3_64 = read_manifest(kGoldenDir / "xxh3_64.txt");
  const auto xxh3_128 = read_manifest(kGoldenDir / "xxh3_128.txt");
  auto cases = golden_cases();
  const std::size_t index = GENERATE_COPY(range<std::size_t>(0, cases.size()));
  const golden_case& c = cases[index];
  const std::string file = c.name + ".bin";
  INFO("golden case: " << c.name);

  const primcache::key k = c.build();
  const auto expected = read_bytes(kGoldenDir / file);

  SECTION("the bytes match the listing byte for byte") {
    INFO("written:  " << hex_dump(k.bytes()));
    INFO("expected: " << hex_dump(expected));
    CHECK(k.size() == expected.size());
    CHECK(std::equal(k.bytes().begin(), k.bytes().end(), expected.begin(), expected.end()));
  }
  SECTION("hash() is the XXH3-64 that xxhsum -H3 printed") {
    REQUIRE(xxh3_64.count(file) == 1);
    CHECK(hex64(k.hash()) == xxh3_64.at(file));
    CHECK(std::hash<primcache::key>{}(k) == static_cast<std::size_t>(k.hash()));
  }
  SECTION("digest().hex() is the XXH3-128 that xxhsum -H2 printed") {
    REQUIRE(xxh3_128.count(file) == 1);
    CHECK(k.digest().hex() == xxh3_128.at(file));
  }
  SECTION("a key read back from the file's bytes equals the written key, hash included") {
    const primcache::key read_back{std::span<const std::byte>(expected)};
    CHECK(read_back == k);
    CHECK(read_back.hash() == k.hash());
    CHECK(read_back.digest() == k.digest());
  }
}

TEST_CASE("every golden file has a case, a listing and both recorded hashes", "[keyhash][golden]") {
  const auto xxh3_64 = read_manifest(kGoldenDir / "xxh3_64.txt");
  const auto xxh3_128 = read_manifest(kGoldenDir / "xxh3_128.txt");
  std::set<std::string> covered;
  for (const auto& c : golden_cases()) covered.insert(c.name + ".bin");

  std::set<std::string> on_disk;
  for (const auto& entry : fs::directory_iterator(kGoldenDir)) {
    if (entry.path().extension() != ".bin") continue;
    const std::string file = entry.path().filename().string();
    on_disk.insert(file);
    INFO("golden file: " << file);
    CHECK(covered.count(file) == 1);
    CHECK(fs::exists(kGoldenDir / entry.path().filename().replace_extension(".hex")));
    CHECK(xxh3_64.count(file) == 1);
    CHECK(xxh3_128.count(file) == 1);
  }
  CHECK(on_disk == covered);
}
