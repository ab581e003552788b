// tag_layout.hpp (private) — the parsed form of a format tag's name.
//
// Every concrete tag's layout is parsed from its canonical name at compile
// time (format_tag.cpp), so the name is the single source of truth and a
// malformed name fails the build. Besides the parse, each entry carries what
// building a descriptor from the tag needs (per-dimension block sizes, their
// product, the inner blocks in the descriptor's own array types), so the
// construction hot path is a table lookup and one pass over the dimensions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "primcache/tensor/dims.hpp"
#include "primcache/tensor/format_tag.hpp"

namespace primcache::tensor_internal {

struct tag_layout {
  std::string_view name;
  int ndims = 0;
  // Dimension indices from the outermost in memory to the innermost.
  std::array<std::size_t, max_ndims> outer{};
  // Inner blocks from the outermost to the innermost; entries past nblks are
  // zero, as in blocking_desc.
  int nblks = 0;
  dims_array blks{};
  dims_array idxs{};
  // Per dimension, the product of its inner blocks (1 when not blocked) and
  // its base-2 logarithm (every block size is a power of two, checked at
  // compile time); the product of all inner blocks (1 for plain tags).
  dims_array block{};
  std::array<int, max_ndims> block_shift{};
  std::int64_t inner = 1;
};

inline constexpr std::size_t first_concrete_tag = static_cast<std::size_t>(format_tag::a);
inline constexpr std::size_t concrete_tag_count =
    static_cast<std::size_t>(format_tag::aBCde16c16b) + 1 - first_concrete_tag;

// In enumerator order from format_tag::a; defined (constexpr) in
// format_tag.cpp.
extern const std::array<tag_layout, concrete_tag_count> tag_layouts;

// The layout of a concrete tag; nullptr for undef, any and values outside
// the enum.
inline const tag_layout* layout_of(format_tag tag) noexcept {
  const std::size_t i = static_cast<std::size_t>(tag) - first_concrete_tag;
  return i < concrete_tag_count ? &tag_layouts[i] : nullptr;
}

}  // namespace primcache::tensor_internal
