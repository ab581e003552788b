#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "primcache/keyhash/key.hpp"
#include "primcache/tensor/memory_desc.hpp"

using primcache::data_type;
using primcache::format_tag;
using primcache::key;
using primcache::key_writer;
using primcache::memory_desc;

namespace {

key key_of(const memory_desc& md) {
  key_writer w;
  md.write_key(w);
  return w.finish();
}

std::vector<int> bytes_of(const memory_desc& md) {
  const key k = key_of(md);
  std::vector<int> out;
  for (std::byte b : k.bytes()) out.push_back(static_cast<int>(b));
  return out;
}

struct variant_case {
  std::string what;
  memory_desc md;
};

}  // namespace

TEST_CASE("a tag and its explicit strides give equal descriptors and key bytes",
          "[tensor][memory_desc][key]") {
  SECTION("nchw") {
    const memory_desc tagged({2, 3, 4, 5}, data_type::f32, format_tag::nchw);
    const memory_desc strided({2, 3, 4, 5}, data_type::f32, {60, 20, 5, 1});
    CHECK(tagged == strided);
    CHECK(key_of(tagged) == key_of(strided));
    CHECK(key_of(tagged).hash() == key_of(strided).hash());
  }
  SECTION("nhwc") {
    const memory_desc tagged({2, 3, 4, 5}, data_type::s8, format_tag::nhwc);
    const memory_desc strided({2, 3, 4, 5}, data_type::s8, {60, 1, 15, 3});
    CHECK(tagged == strided);
    CHECK(key_of(tagged) == key_of(strided));
  }
  SECTION("aliases are the same tag") {
    CHECK(key_of(memory_desc({8, 8, 3, 3}, data_type::f32, format_tag::oihw)) ==
          key_of(memory_desc({8, 8, 3, 3}, data_type::f32, format_tag::nchw)));
  }
  SECTION("the stride of a size-1 dimension is ignored") {
    const memory_desc a({1, 1, 5, 5}, data_type::f32, format_tag::nchw);
    const memory_desc b({1, 1, 5, 5}, data_type::f32, format_tag::nhwc);
    const memory_desc c({1, 1, 5, 5}, data_type::f32, {999, 0, 5, 1});
    CHECK(a == b);
    CHECK(a == c);
    CHECK(key_of(a) == key_of(b));
    CHECK(key_of(a) == key_of(c));
    CHECK(a.size_bytes() == c.size_bytes());
  }
}

TEST_CASE("descriptors that differ in any one field differ, and so do their keys",
          "[tensor][memory_desc][key]") {
  const memory_desc base({2, 32, 4, 5}, data_type::f32, format_tag::nchw);
  const auto c = GENERATE_COPY(values<variant_case>({
      {"dims", memory_desc({2, 32, 4, 6}, data_type::f32, format_tag::nchw)},
      {"ndims", memory_desc({2, 32, 20}, data_type::f32, format_tag::abc)},
      {"data type", base.with_data_type(data_type::bf16)},
      {"format kind", memory_desc({2, 32, 4, 5}, data_type::f32, format_tag::any)},
      {"strides", memory_desc({2, 32, 4, 5}, data_type::f32, format_tag::nhwc)},
      {"padding strides", memory_desc({2, 32, 4, 5}, data_type::f32, {1280, 20, 5, 1})},
      {"inner blocks", memory_desc({2, 32, 4, 5}, data_type::f32, format_tag::nChw16c)},
      {"offset0", base.with_offset0(1)},
      {"the empty descriptor", memory_desc()},
  }));
  CAPTURE(c.what);
  CHECK_FALSE(base == c.md);
  CHECK(base != c.md);
  CHECK(key_of(base) != key_of(c.md));
}

TEST_CASE("blocked descriptors differ by block size and padding", "[tensor][memory_desc][key]") {
  const memory_desc b16({2, 17, 4, 5}, data_type::f32, format_tag::nChw16c);
  const memory_desc b8({2, 17, 4, 5}, data_type::f32, format_tag::nChw8c);
  const memory_desc c18({2, 18, 4, 5}, data_type::f32, format_tag::nChw16c);
  const memory_desc o({17, 33, 3, 3}, data_type::f32, format_tag::OIhw16i16o);
  const memory_desc i({17, 33, 3, 3}, data_type::f32, format_tag::OIhw16o16i);
  CHECK(b16 != b8);
  CHECK(b16 != c18);  // same padded dims, different logical dims
  CHECK(o != i);      // same padding and block sizes, blocks in another order
  CHECK(key_of(b16) != key_of(b8));
  CHECK(key_of(b16) != key_of(c18));
  CHECK(key_of(o) != key_of(i));
  CHECK(b16 == memory_desc({2, 17, 4, 5}, data_type::f32, format_tag::nChw16c));
  CHECK(key_of(b16) == key_of(memory_desc({2, 17, 4, 5}, data_type::f32, format_tag::nChw16c)));
}

TEST_CASE("the key bytes follow the documented encoding", "[tensor][memory_desc][key]") {
  SECTION("a plain 2-D descriptor") {
    // ndims, data type, format kind | dims | flags, inner_nblks | strides
    CHECK(bytes_of(memory_desc({2, 3}, data_type::f32, format_tag::ab)) ==
          std::vector<int>{2, 1, 2, 2, 3, 0, 0, 3, 1});
  }
  SECTION("a blocked descriptor with padding") {
    // strides 0 (padded size 1), 400 (LEB128 0x90 0x03), 80, 16; padded dims
    // because flag bit 0 is set; one block: dimension 1 by 16.
    CHECK(bytes_of(memory_desc({1, 17, 5, 5}, data_type::f32, format_tag::nChw16c)) ==
          std::vector<int>{4, 1, 2, 1, 17, 5, 5, 1, 1, 0, 0x90, 0x03, 80, 16, 1, 32, 5, 5, 1, 16});
  }
  SECTION("an offset") {
    CHECK(bytes_of(memory_desc({2, 3}, data_type::u8, format_tag::ab).with_offset0(300)) ==
          std::vector<int>{2, 5, 2, 2, 3, 4, 0, 3, 1, 0xac, 0x02});
  }
  SECTION("any and the empty descriptor carry no layout") {
    CHECK(bytes_of(memory_desc({2, 3}, data_type::bf16, format_tag::any)) ==
          std::vector<int>{2, 3, 1, 2, 3});
    CHECK(bytes_of(memory_desc()) == std::vector<int>{0, 0, 0});
  }
}

TEST_CASE("keys of several descriptors in a row stay unambiguous", "[tensor][memory_desc][key]") {
  // Descriptors are written back to back into one primitive key.
  const memory_desc a({2, 3}, data_type::f32, format_tag::ab);
  const memory_desc b({4}, data_type::f32, format_tag::a);
  key_writer w1;
  a.write_key(w1);
  b.write_key(w1);
  key_writer w2;
  b.write_key(w2);
  a.write_key(w2);
  key_writer w3;
  a.write_key(w3);
  memory_desc().write_key(w3);
  b.write_key(w3);
  const key k1 = w1.finish();
  const key k2 = w2.finish();
  const key k3 = w3.finish();
  CHECK(k1 != k2);
  CHECK(k1 != k3);
  CHECK(k1.size() == key_of(a).size() + key_of(b).size());
}

TEST_CASE("a primitive's worth of descriptors fits a key's inline buffer",
          "[tensor][memory_desc][key]") {
  // src, weights, bias, dst of a convolution: the key stays inline (no
  // allocation) with room for the rest of the op descriptor.
  const memory_desc src({32, 256, 56, 56}, data_type::f32, format_tag::nChw16c);
  const memory_desc wei({512, 256, 3, 3}, data_type::f32, format_tag::OIhw16i16o);
  const memory_desc bias({512}, data_type::f32, format_tag::a);
  const memory_desc dst({32, 512, 56, 56}, data_type::f32, format_tag::nChw16c);
  key_writer w;
  for (const memory_desc* md : {&src, &wei, &bias, &dst}) md->write_key(w);
  CHECK(w.size() <= 96);
  CHECK(w.size() < key::inline_capacity / 2);
}
