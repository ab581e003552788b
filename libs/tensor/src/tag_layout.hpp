// tag_layout.hpp (private) — the parsed form of a format tag's name.
//
// Every concrete tag's layout is parsed from its canonical name at compile
// time (format_tag.cpp), so the name is the single source of truth and a
// malformed name fails the build.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "primcache/tensor/dims.hpp"
#include "primcache/tensor/format_tag.hpp"

namespace primcache::tensor_internal {

struct tag_layout {
  std::string_view name;
  int ndims = 0;
  // Dimension indices from the outermost in memory to the innermost.
  std::array<int, max_ndims> outer{};
  // Inner blocks from the outermost to the innermost.
  int nblks = 0;
  std::array<std::int64_t, max_ndims> blks{};
  std::array<int, max_ndims> idxs{};
};

// The layout of a concrete tag; nullptr for undef, any and values outside
// the enum.
const tag_layout* layout_of(format_tag tag) noexcept;

}  // namespace primcache::tensor_internal
