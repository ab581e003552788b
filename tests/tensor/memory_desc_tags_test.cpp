// Every concrete tag, over a sweep of sizes (1, block-aligned, ragged), gives
// the layout its name spells: checked against a reference built here from
// the name alone, so the descriptor's table-driven construction is held to
// the tag grammar documented in format_tag.hpp.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/keyhash/key.hpp"
#include "primcache/tensor/memory_desc.hpp"

using primcache::data_type;
using primcache::format_kind;
using primcache::format_tag;
using primcache::memory_desc;

namespace {

using i64s = std::vector<std::int64_t>;

i64s to_vec(std::span<const std::int64_t> s) {
  return i64s(s.begin(), s.end());
}

// The layout a tag's name spells for `dims`, computed the slow, obvious way.
struct reference_layout {
  i64s padded;
  i64s strides;
  i64s blks;
  i64s idxs;
  std::int64_t elements = 1;  // padded elements
};

reference_layout reference(std::string_view name, const i64s& dims) {
  std::vector<int> order;
  std::size_t i = 0;
  for (; i < name.size() && !(name[i] >= '0' && name[i] <= '9'); ++i) {
    const char c = name[i];
    order.push_back(c >= 'a' ? c - 'a' : c - 'A');
  }
  reference_layout r;
  i64s block(dims.size(), 1);
  while (i < name.size()) {
    std::int64_t size = 0;
    for (; name[i] >= '0' && name[i] <= '9'; ++i) size = size * 10 + (name[i] - '0');
    const int d = name[i++] - 'a';
    r.blks.push_back(size);
    r.idxs.push_back(d);
    block[static_cast<std::size_t>(d)] *= size;
  }
  std::int64_t inner = 1;
  for (std::int64_t b : r.blks) inner *= b;
  r.padded.resize(dims.size());
  r.strides.resize(dims.size());
  for (std::size_t d = 0; d < dims.size(); ++d) {
    r.padded[d] = (dims[d] + block[d] - 1) / block[d] * block[d];
  }
  std::int64_t stride = inner;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const auto d = static_cast<std::size_t>(*it);
    r.strides[d] = stride;
    stride *= r.padded[d] / block[d];
  }
  for (std::int64_t p : r.padded) r.elements *= p;
  return r;
}

std::vector<format_tag> concrete_tags() {
  std::vector<format_tag> tags;
  for (int v = static_cast<int>(format_tag::a);
       primcache::to_string(static_cast<format_tag>(v)) != "unknown"; ++v) {
    tags.push_back(static_cast<format_tag>(v));
  }
  return tags;
}

}  // namespace

TEST_CASE("every concrete tag builds the layout its name spells, for every size",
          "[tensor][memory_desc][tags]") {
  const format_tag tag = GENERATE(from_range(concrete_tags()));
  const std::string_view name = primcache::to_string(tag);
  const auto ndims = static_cast<std::size_t>(primcache::ndims_of(tag));
  // Each dimension takes 1, an odd size, a multiple of 16, and one past it.
  const std::int64_t sizes[] = {1, 3, 16, 17};
  const data_type dt = GENERATE(data_type::f32, data_type::bf16, data_type::s8);
  CAPTURE(name, static_cast<int>(dt));

  std::size_t combos = 1;
  for (std::size_t d = 0; d < ndims; ++d) combos *= std::size(sizes);
  for (std::size_t c = 0; c < combos; ++c) {
    i64s dims(ndims);
    for (std::size_t d = 0, rest = c; d < ndims; ++d, rest /= std::size(sizes)) {
      dims[d] = sizes[rest % std::size(sizes)];
    }
    CAPTURE(dims);
    const reference_layout r = reference(name, dims);
    const memory_desc md(dims, dt, tag);

    CHECK(md.ndims() == static_cast<int>(ndims));
    CHECK(md.data_type() == dt);
    CHECK(md.format_kind() == format_kind::blocked);
    CHECK(to_vec(md.dims()) == dims);
    CHECK(to_vec(md.padded_dims()) == r.padded);
    CHECK(to_vec(md.padded_offsets()) == i64s(ndims, 0));
    CHECK(md.offset0() == 0);
    CHECK(to_vec(md.strides()) == r.strides);
    CHECK(to_vec(md.inner_blks()) == r.blks);
    CHECK(to_vec(md.inner_idxs()) == r.idxs);
    CHECK(md.size_bytes() == static_cast<std::size_t>(r.elements) * primcache::size_of(dt));
    CHECK(md.matches(tag));
    CHECK(md.is_dense(true));
    // Entries past ndims stay zero, so equality and keys see nothing stale.
    for (std::size_t d = ndims; d < static_cast<std::size_t>(primcache::max_ndims); ++d) {
      CHECK(md.blocking().strides[d] == 0);
    }
    for (std::size_t k = r.blks.size(); k < static_cast<std::size_t>(primcache::max_ndims); ++k) {
      CHECK(md.blocking().inner_blks[k] == 0);
      CHECK(md.blocking().inner_idxs[k] == 0);
    }

    const auto made = memory_desc::make(dims, dt, tag);
    REQUIRE(made.has_value());
    CHECK(made.value() == md);
    primcache::key_writer a, b;
    md.write_key(a);
    made.value().write_key(b);
    CHECK(a.finish() == b.finish());
  }
}

TEST_CASE("format_tag::any keeps dims and data type for every rank",
          "[tensor][memory_desc][tags]") {
  const auto ndims = GENERATE(range(1, primcache::max_ndims + 1));
  const i64s dims(static_cast<std::size_t>(ndims), 7);
  const memory_desc md(dims, data_type::u8, format_tag::any);
  CHECK(md.format_kind() == format_kind::any);
  CHECK(to_vec(md.dims()) == dims);
  CHECK(to_vec(md.padded_dims()) == dims);
  CHECK(md.strides().empty());
  CHECK(md.inner_nblks() == 0);
  CHECK(md.size_bytes() == 0);
  CHECK(md == memory_desc::make(dims, data_type::u8, format_tag::any).value());
}
