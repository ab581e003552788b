#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "primcache/keyhash/key.hpp"
#include "support/allocation_counter.hpp"

using primcache::key;
using primcache::key_writer;

namespace {

enum class kind : std::uint16_t { matmul = 1, convolution = 2 };

std::vector<std::byte> bytes_of(std::size_t n, unsigned seed = 0) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  return out;
}

key key_of_size(std::size_t n, unsigned seed = 0) {
  const auto bytes = bytes_of(n, seed);
  return key_writer().raw(bytes).finish();
}

// One field of every kind the writer knows; `changed` names the one field
// written with a different value (or none, for the baseline).
struct field {
  const char* kind;
  void (*write)(key_writer&, bool changed);
};

const std::vector<field>& all_fields() {
  static const std::vector<field> fields = {
      {"u8", [](key_writer& w, bool c) { w.u8(c ? 0x81 : 0x01); }},
      {"u16", [](key_writer& w, bool c) { w.u16(c ? 0x8002 : 0x0002); }},
      {"u32", [](key_writer& w, bool c) { w.u32(c ? 0x80000003u : 3u); }},
      {"u64", [](key_writer& w, bool c) { w.u64(c ? 0x8000000000000004ull : 4u); }},
      {"i32", [](key_writer& w, bool c) { w.i32(c ? -5 : 5); }},
      {"i64", [](key_writer& w, bool c) { w.i64(c ? -6 : 6); }},
      {"boolean", [](key_writer& w, bool c) { w.boolean(c); }},
      {"f32", [](key_writer& w, bool c) { w.f32(c ? 7.5f : 7.0f); }},
      {"f64", [](key_writer& w, bool c) { w.f64(c ? 8.5 : 8.0); }},
      {"enumeration",
       [](key_writer& w, bool c) { w.enumeration(c ? kind::convolution : kind::matmul); }},
      {"str (same length)", [](key_writer& w, bool c) { w.str(c ? "jit:avx2" : "jit:sse4"); }},
      {"str (other length)", [](key_writer& w, bool c) { w.str(c ? "ref" : "reference"); }},
      {"i64s (one element)",
       [](key_writer& w, bool c) {
         const std::int64_t a[] = {1, 2, 3}, b[] = {1, 2, 4};
         w.i64s(c ? std::span<const std::int64_t>(b) : std::span<const std::int64_t>(a));
       }},
      {"i64s (count)",
       [](key_writer& w, bool c) {
         const std::int64_t a[] = {1, 2, 3};
         w.i64s(std::span<const std::int64_t>(a).first(c ? 2 : 3));
       }},
      {"raw",
       [](key_writer& w, bool c) {
         const std::byte a[] = {std::byte{1}, std::byte{2}}, b[] = {std::byte{1}, std::byte{3}};
         w.raw(c ? b : a);
       }},
  };
  return fields;
}

key write_all_fields(int changed) {
  key_writer w;
  const auto& fields = all_fields();
  for (std::size_t i = 0; i < fields.size(); ++i) {
    fields[i].write(w, static_cast<int>(i) == changed);
  }
  return w.finish();
}

struct constant_hash {
  std::size_t operator()(const key&) const noexcept { return 0; }
};

}  // namespace

TEST_CASE("keys written from equal fields are equal and hash alike", "[keyhash][equality]") {
  const std::size_t padding = GENERATE(0u, 300u);  // inline and heap keys
  INFO("padding: " << padding);
  const auto pad = bytes_of(padding);
  const auto write = [&] {
    const std::int64_t dims[] = {64, 128};
    return key_writer().u32(3).i64s(dims).f32(1.0f).str("jit:avx512").raw(pad).finish();
  };
  const key a = write();
  const key b = write();
  CHECK(a == b);
  CHECK(a.hash() == b.hash());
  CHECK(std::hash<key>{}(a) == std::hash<key>{}(b));
  CHECK(a.digest() == b.digest());
  CHECK(a.digest().hex() == b.digest().hex());
}

TEST_CASE("changing any one field changes the bytes and the key", "[keyhash][equality]") {
  const key baseline = write_all_fields(-1);
  const int changed = GENERATE(range(0, 15));
  REQUIRE(all_fields().size() == 15);
  INFO("changed field: " << all_fields()[static_cast<std::size_t>(changed)].kind);
  const key other = write_all_fields(changed);
  CHECK_FALSE(other == baseline);
  CHECK_FALSE(std::equal(other.bytes().begin(), other.bytes().end(), baseline.bytes().begin(),
                         baseline.bytes().end()));
  CHECK(other.hash() != baseline.hash());
  CHECK_FALSE(other.digest() == baseline.digest());
}

TEST_CASE("length prefixes keep neighbouring strings and arrays apart", "[keyhash][equality]") {
  SECTION("strings split at different places") {
    CHECK_FALSE(key_writer().str("ab").str("c").finish() ==
                key_writer().str("a").str("bc").finish());
  }
  SECTION("an element moved from one array to the next") {
    const std::int64_t one[] = {1};
    CHECK_FALSE(key_writer().i64s(one).i64s({}).finish() ==
                key_writer().i64s({}).i64s(one).finish());
  }
}

TEST_CASE("keys forced to the same hash compare unequal and both live in one map",
          "[keyhash][equality]") {
  const key a = key_writer().u32(1).finish();
  const key b = key_writer().u32(2).finish();           // same size, other bytes
  const key c = key_writer().u32(1).u8(0).finish();     // a's bytes plus one
  const key d = key_of_size(key::inline_capacity + 1);  // on the heap
  REQUIRE(a.size() == b.size());
  CHECK_FALSE(a == b);
  CHECK_FALSE(a == c);
  CHECK_FALSE(c == a);

  std::unordered_map<key, int, constant_hash> m;
  m.emplace(a, 1);
  m.emplace(b, 2);
  m.emplace(c, 3);
  m.emplace(d, 4);
  CHECK(m.size() == 4);
  CHECK(m.at(a) == 1);
  CHECK(m.at(b) == 2);
  CHECK(m.at(c) == 3);
  CHECK(m.at(d) == 4);
  CHECK(m.at(key_writer().u32(2).finish()) == 2);  // found by bytes, not identity
  CHECK(m.count(key_writer().u32(3).finish()) == 0);
}

TEST_CASE("std::hash of a key is its precomputed XXH3-64", "[keyhash][hash]") {
  const key k = key_writer().str("matmul").finish();
  CHECK(std::hash<key>{}(k) == static_cast<std::size_t>(k.hash()));
  std::unordered_map<key, std::string> m;
  m[k] = "found";
  CHECK(m.at(key_writer().str("matmul").finish()) == "found");
}

TEST_CASE("floats are written by bit pattern", "[keyhash][float]") {
  SECTION("-0.0 and 0.0 compare equal as numbers but give different keys") {
    CHECK(key_writer().f32(-0.0f).finish() != key_writer().f32(0.0f).finish());
    CHECK(key_writer().f64(-0.0).finish() != key_writer().f64(0.0).finish());
  }
  SECTION("a NaN keeps its payload, and equal payloads give equal keys") {
    const float nan1 = std::bit_cast<float>(std::uint32_t{0x7fc00001});
    const float nan2 = std::bit_cast<float>(std::uint32_t{0x7fc00002});
    const key k1 = key_writer().f32(nan1).finish();
    REQUIRE(k1.size() == 4);
    CHECK(k1.bytes()[0] == std::byte{0x01});
    CHECK(k1.bytes()[3] == std::byte{0x7f});
    CHECK(k1 == key_writer().f32(nan1).finish());
    CHECK(k1 != key_writer().f32(nan2).finish());
    const double dnan1 = std::bit_cast<double>(std::uint64_t{0x7ff8000000000001});
    const double dnan2 = std::bit_cast<double>(std::uint64_t{0x7ff8000000000002});
    CHECK(key_writer().f64(dnan1).finish() == key_writer().f64(dnan1).finish());
    CHECK(key_writer().f64(dnan1).finish() != key_writer().f64(dnan2).finish());
  }
}

TEST_CASE("keys past the inline capacity copy and move like inline ones", "[keyhash][storage]") {
  const std::size_t size = GENERATE(0u, 1u, 255u, 256u, 257u, 1000u, 70000u);
  INFO("size: " << size);
  const key original = key_of_size(size);
  REQUIRE(original.size() == size);
  const key empty;

  SECTION("a copy equals the original and owns its own bytes") {
    const key copy = original;
    CHECK(copy == original);
    CHECK(copy.hash() == original.hash());
    if (size > 0) CHECK(copy.data() != original.data());
  }
  SECTION("copy assignment over an inline key and over a heap key") {
    key small = key_of_size(8, 1);
    key large = key_of_size(600, 2);
    small = original;
    large = original;
    CHECK(small == original);
    CHECK(large == original);
    CHECK(small.hash() == original.hash());
    CHECK(large.hash() == original.hash());
  }
  SECTION("self-assignment keeps the key") {
    key k = original;
    key& alias = k;
    k = alias;
    CHECK(k == original);
    k = std::move(alias);
    CHECK(k == original);
    CHECK(k.hash() == original.hash());
  }
  SECTION("move construction takes the bytes and leaves the source empty and valid") {
    key source = original;
    const key moved = std::move(source);
    CHECK(moved == original);
    CHECK(moved.hash() == original.hash());
    CHECK(source.size() == 0);  // NOLINT(bugprone-use-after-move): specified state
    CHECK(source == empty);     // NOLINT(bugprone-use-after-move)
    CHECK(source.hash() == empty.hash());
    source = key_of_size(300, 3);  // reusable
    CHECK(source == key_of_size(300, 3));
  }
  SECTION("move assignment over an inline key and over a heap key") {
    key small = key_of_size(8, 1);
    key large = key_of_size(600, 2);
    key source1 = original;
    key source2 = original;
    small = std::move(source1);
    large = std::move(source2);
    CHECK(small == original);
    CHECK(large == original);
    CHECK(large.hash() == original.hash());
    CHECK(source1 == empty);  // NOLINT(bugprone-use-after-move)
    CHECK(source2 == empty);  // NOLINT(bugprone-use-after-move)
  }
  SECTION("a key built from bytes equals the written key") {
    const key from_bytes{original.bytes()};
    CHECK(from_bytes == original);
    CHECK(from_bytes.hash() == original.hash());
  }
}

TEST_CASE("a default key is empty and hashes like empty input", "[keyhash][storage]") {
  const key k;
  CHECK(k.size() == 0);
  CHECK(k.bytes().empty());
  CHECK(k == key_writer().finish());
  CHECK(k.hash() == key_writer().finish().hash());
  CHECK(k.hash() == 0x2d06800538d394c2ull);  // XXH3-64 of no bytes
}

TEST_CASE("finish() leaves the writer empty for the next key", "[keyhash][writer]") {
  key_writer w;
  w.u32(1).str("x");
  CHECK(w.size() == 9);
  const key first = w.finish();
  CHECK(w.size() == 0);
  const key second = w.u32(1).str("x").finish();
  CHECK(first == second);
  CHECK(w.finish() == key());

  SECTION("also after a heap-sized key") {
    const auto big = bytes_of(500);
    const key large = w.raw(big).finish();
    CHECK(large.size() == 500);
    CHECK(w.size() == 0);
    CHECK(w.u8(1).finish() == key_writer().u8(1).finish());
  }
}

// Counting and failing allocations needs the test's own operator new, which
// sanitizer builds cannot have (see tests/support/allocation_counter.hpp); the plain build
// runs these.
#if PRIMCACHE_TEST_REPLACES_NEW
TEST_CASE("keys up to the inline capacity never allocate", "[keyhash][storage][allocation]") {
  const std::size_t size = GENERATE(0u, 16u, 255u, 256u);
  INFO("size: " << size);
  const auto bytes = bytes_of(size);
  std::size_t allocations = 0;
  bool equal = false;
  {
    primcache_test::allocation_scope scope;
    key_writer w;
    w.raw(bytes);
    key k = w.finish();
    key copy = k;
    key moved = std::move(copy);
    key assigned;
    assigned = k;
    assigned = std::move(moved);
    equal = assigned == k && std::hash<key>{}(assigned) == k.hash() && k.digest() == k.digest();
    allocations = scope.count();
  }
  CHECK(equal);
  CHECK(allocations == 0);
}

TEST_CASE("the allocation counter sees a key that outgrows the inline buffer",
          "[keyhash][storage][allocation]") {
  const auto bytes = bytes_of(key::inline_capacity + 1);
  std::size_t allocations = 0;
  {
    primcache_test::allocation_scope scope;
    const key k = key_writer().raw(bytes).finish();
    allocations = scope.count();
  }
  CHECK(allocations >= 1);
}

TEST_CASE("a failed allocation leaves keys and writers as they were", "[keyhash][storage][error]") {
  SECTION("a writer that cannot grow keeps what it had") {
    const auto first = bytes_of(200, 1);
    const auto second = bytes_of(100, 2);
    key_writer w;
    w.raw(first);
    bool threw = false;
    {
      primcache_test::allocation_scope scope;
      scope.fail_next();
      try {
        w.raw(second);
      } catch (const std::bad_alloc&) {
        threw = true;
      }
    }
    CHECK(threw);
    CHECK(w.size() == 200);
    CHECK(w.finish() == key_writer().raw(first).finish());
  }
  SECTION("copy assignment that cannot allocate keeps the target's value and hash") {
    const key large = key_of_size(600, 4);
    key target = key_of_size(10, 5);
    const key before = target;
    bool threw = false;
    {
      primcache_test::allocation_scope scope;
      scope.fail_next();
      try {
        target = large;
      } catch (const std::bad_alloc&) {
        threw = true;
      }
    }
    CHECK(threw);
    CHECK(target == before);
    CHECK(target.hash() == before.hash());
  }
  SECTION("a copy or a key from bytes that cannot allocate throws std::bad_alloc") {
    const key large = key_of_size(600, 6);
    int thrown = 0;
    {
      primcache_test::allocation_scope scope;
      scope.fail_next();
      try {
        key copy(large);
      } catch (const std::bad_alloc&) {
        ++thrown;
      }
      scope.fail_next();
      try {
        key from_bytes(large.bytes());
      } catch (const std::bad_alloc&) {
        ++thrown;
      }
    }
    CHECK(thrown == 2);
  }
}
#endif  // PRIMCACHE_TEST_REPLACES_NEW
