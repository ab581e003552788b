#include "primcache/tensor/format_tag.hpp"

#include <array>
#include <cstddef>
#include <utility>

#include "tag_layout.hpp"

namespace primcache {

namespace tensor_internal {

namespace {

// Canonical names in enumerator order, from format_tag::a on.
constexpr std::pair<format_tag, std::string_view> concrete_tags[] = {
    {format_tag::a, "a"},
    {format_tag::ab, "ab"},
    {format_tag::ba, "ba"},
    {format_tag::abc, "abc"},
    {format_tag::acb, "acb"},
    {format_tag::bac, "bac"},
    {format_tag::bca, "bca"},
    {format_tag::cba, "cba"},
    {format_tag::abcd, "abcd"},
    {format_tag::abdc, "abdc"},
    {format_tag::acbd, "acbd"},
    {format_tag::acdb, "acdb"},
    {format_tag::bacd, "bacd"},
    {format_tag::bcda, "bcda"},
    {format_tag::cdba, "cdba"},
    {format_tag::dcab, "dcab"},
    {format_tag::abcde, "abcde"},
    {format_tag::abdec, "abdec"},
    {format_tag::acbde, "acbde"},
    {format_tag::acdeb, "acdeb"},
    {format_tag::bacde, "bacde"},
    {format_tag::bcdea, "bcdea"},
    {format_tag::cdeba, "cdeba"},
    {format_tag::decab, "decab"},
    {format_tag::abcdef, "abcdef"},
    {format_tag::aBc8b, "aBc8b"},
    {format_tag::aBc16b, "aBc16b"},
    {format_tag::aBcd8b, "aBcd8b"},
    {format_tag::aBcd16b, "aBcd16b"},
    {format_tag::aBcde8b, "aBcde8b"},
    {format_tag::aBcde16b, "aBcde16b"},
    {format_tag::Acdb8a, "Acdb8a"},
    {format_tag::Acdb16a, "Acdb16a"},
    {format_tag::ABc16a16b, "ABc16a16b"},
    {format_tag::ABc16b16a, "ABc16b16a"},
    {format_tag::ABcd8a8b, "ABcd8a8b"},
    {format_tag::ABcd8b8a, "ABcd8b8a"},
    {format_tag::ABcd16a16b, "ABcd16a16b"},
    {format_tag::ABcd16b16a, "ABcd16b16a"},
    {format_tag::ABcde16a16b, "ABcde16a16b"},
    {format_tag::ABcde16b16a, "ABcde16b16a"},
    {format_tag::Abcde8a, "Abcde8a"},
    {format_tag::Abcde16a, "Abcde16a"},
    {format_tag::aBCde8c8b, "aBCde8c8b"},
    {format_tag::aBCde16b16c, "aBCde16b16c"},
    {format_tag::aBCde16c16b, "aBCde16c16b"},
};

constexpr std::size_t first_concrete = first_concrete_tag;
constexpr std::size_t concrete_count = std::size(concrete_tags);
static_assert(concrete_count == concrete_tag_count, "concrete_tags must list every tag");

constexpr bool table_is_in_enum_order() {
  for (std::size_t i = 0; i < concrete_count; ++i) {
    if (static_cast<std::size_t>(concrete_tags[i].first) != first_concrete + i) return false;
  }
  return static_cast<std::size_t>(format_tag::aBCde16c16b) + 1 == first_concrete + concrete_count;
}
static_assert(table_is_in_enum_order(), "concrete_tags must list every tag in enum order");

// Parses "<letters><size><letter>...": an upper-case letter marks a blocked
// dimension. Returns ndims == 0 when the name is malformed.
constexpr tag_layout parse_layout(std::string_view name) {
  tag_layout l;
  l.name = name;
  std::size_t i = 0;
  bool seen[max_ndims] = {};
  bool upper[max_ndims] = {};
  int n = 0;
  for (; i < name.size(); ++i) {
    const char c = name[i];
    int d;
    bool up;
    if (c >= 'a' && c <= 'z') {
      d = c - 'a';
      up = false;
    } else if (c >= 'A' && c <= 'Z') {
      d = c - 'A';
      up = true;
    } else {
      break;
    }
    if (d >= max_ndims || n >= max_ndims || seen[d]) return {};
    seen[d] = true;
    upper[d] = up;
    l.outer[n++] = static_cast<std::size_t>(d);
  }
  for (int d = 0; d < n; ++d) {
    if (!seen[d]) return {};  // letters must be a, b, ... without gaps
  }
  bool blocked[max_ndims] = {};
  while (i < name.size()) {
    std::int64_t size = 0;
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) {
      size = size * 10 + (name[i] - '0');
    }
    if (i >= name.size() || size < 2 || l.nblks >= max_ndims) return {};
    const int d = name[i++] - 'a';
    if (d < 0 || d >= n || !upper[d]) return {};
    blocked[d] = true;
    l.blks[l.nblks] = size;
    l.idxs[l.nblks] = d;
    ++l.nblks;
  }
  for (int d = 0; d < n; ++d) {
    if (upper[d] != blocked[d]) return {};
    l.block[d] = 1;
  }
  for (int k = 0; k < l.nblks; ++k) {
    l.block[static_cast<std::size_t>(l.idxs[k])] *= l.blks[k];
    l.inner *= l.blks[k];
  }
  for (int d = 0; d < n; ++d) {
    while ((std::int64_t{1} << l.block_shift[d]) < l.block[d]) ++l.block_shift[d];
  }
  l.ndims = n;
  return l;
}

constexpr std::array<tag_layout, concrete_count> make_layouts() {
  std::array<tag_layout, concrete_count> out{};
  for (std::size_t i = 0; i < concrete_count; ++i) out[i] = parse_layout(concrete_tags[i].second);
  return out;
}

}  // namespace

// Declared extern in tag_layout.hpp, so this constant has external linkage
// (within the library: symbols are hidden by default).
constexpr std::array<tag_layout, concrete_tag_count> tag_layouts = make_layouts();

namespace {

constexpr bool all_layouts_parse() {
  for (const tag_layout& l : tag_layouts) {
    if (l.ndims == 0) return false;
  }
  return true;
}
static_assert(all_layouts_parse(), "a concrete tag's name is not a valid layout");

// The descriptor's hot path rounds dims up to whole blocks by shifts.
constexpr bool all_blocks_are_powers_of_two() {
  for (const tag_layout& l : tag_layouts) {
    for (int d = 0; d < l.ndims; ++d) {
      if ((std::int64_t{1} << l.block_shift[d]) != l.block[d]) return false;
    }
  }
  return true;
}
static_assert(all_blocks_are_powers_of_two(), "a tag's block size is not a power of two");

}  // namespace

}  // namespace tensor_internal

namespace {

constexpr std::pair<std::string_view, format_tag> aliases[] = {
    {"x", format_tag::x},
    {"nc", format_tag::nc},
    {"cn", format_tag::cn},
    {"oi", format_tag::oi},
    {"io", format_tag::io},
    {"tn", format_tag::tn},
    {"nt", format_tag::nt},
    {"ncw", format_tag::ncw},
    {"nwc", format_tag::nwc},
    {"oiw", format_tag::oiw},
    {"owi", format_tag::owi},
    {"wio", format_tag::wio},
    {"iwo", format_tag::iwo},
    {"tnc", format_tag::tnc},
    {"ntc", format_tag::ntc},
    {"nchw", format_tag::nchw},
    {"nhwc", format_tag::nhwc},
    {"chwn", format_tag::chwn},
    {"oihw", format_tag::oihw},
    {"ohwi", format_tag::ohwi},
    {"hwio", format_tag::hwio},
    {"ihwo", format_tag::ihwo},
    {"iohw", format_tag::iohw},
    {"goiw", format_tag::goiw},
    {"gowi", format_tag::gowi},
    {"wigo", format_tag::wigo},
    {"ncdhw", format_tag::ncdhw},
    {"ndhwc", format_tag::ndhwc},
    {"oidhw", format_tag::oidhw},
    {"odhwi", format_tag::odhwi},
    {"dhwio", format_tag::dhwio},
    {"idhwo", format_tag::idhwo},
    {"iodhw", format_tag::iodhw},
    {"goihw", format_tag::goihw},
    {"gohwi", format_tag::gohwi},
    {"giohw", format_tag::giohw},
    {"hwigo", format_tag::hwigo},
    {"goidhw", format_tag::goidhw},
    {"nCw8c", format_tag::nCw8c},
    {"nCw16c", format_tag::nCw16c},
    {"nChw8c", format_tag::nChw8c},
    {"nChw16c", format_tag::nChw16c},
    {"nCdhw8c", format_tag::nCdhw8c},
    {"nCdhw16c", format_tag::nCdhw16c},
    {"Ohwi8o", format_tag::Ohwi8o},
    {"Ohwi16o", format_tag::Ohwi16o},
    {"OIw16o16i", format_tag::OIw16o16i},
    {"OIw16i16o", format_tag::OIw16i16o},
    {"OIhw8o8i", format_tag::OIhw8o8i},
    {"OIhw8i8o", format_tag::OIhw8i8o},
    {"OIhw16o16i", format_tag::OIhw16o16i},
    {"OIhw16i16o", format_tag::OIhw16i16o},
    {"OIdhw16o16i", format_tag::OIdhw16o16i},
    {"OIdhw16i16o", format_tag::OIdhw16i16o},
    {"Goihw8g", format_tag::Goihw8g},
    {"Goihw16g", format_tag::Goihw16g},
    {"gOIhw8i8o", format_tag::gOIhw8i8o},
    {"gOIhw16o16i", format_tag::gOIhw16o16i},
    {"gOIhw16i16o", format_tag::gOIhw16i16o},
};

}  // namespace

std::string_view to_string(format_tag tag) noexcept {
  if (tag == format_tag::undef) return "undef";
  if (tag == format_tag::any) return "any";
  const auto* l = tensor_internal::layout_of(tag);
  return l ? l->name : "unknown";
}

int ndims_of(format_tag tag) noexcept {
  const auto* l = tensor_internal::layout_of(tag);
  return l ? l->ndims : 0;
}

bool is_blocked(format_tag tag) noexcept {
  const auto* l = tensor_internal::layout_of(tag);
  return l && l->nblks > 0;
}

std::optional<format_tag> parse_format_tag(std::string_view name) noexcept {
  if (name == "any") return format_tag::any;
  for (const auto& [tag, canonical] : tensor_internal::concrete_tags) {
    if (canonical == name) return tag;
  }
  for (const auto& [alias, tag] : aliases) {
    if (alias == name) return tag;
  }
  return std::nullopt;
}

}  // namespace primcache
