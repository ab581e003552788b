// primcache/tensor/format_tag.hpp — names for the layouts a user may ask for.
//
// A format tag is shorthand for a layout: memory_desc turns (dims, tag) into
// resolved strides and inner blocks, and from then on the tag is forgotten —
// keys and equality see only the resolved form. Tags are spelled by letters,
// one per logical dimension ('a' is dimension 0), from the outermost in
// memory to the innermost; an upper-case letter marks a dimension that is
// also split into inner blocks, listed after the letters from outer to inner
// as <size><letter>. So aBcd16b is dims (a, b, c, d) stored as a, b/16, c, d,
// then 16 consecutive b; ABcd16b16a stores a/16, b/16, c, d, then a 16x16
// block with b outer and a inner.
//
// The aliases give the same tags in the vocabulary of activations (n, c, d,
// h, w), weights (g, o, i, d, h, w) and sequences (t, n, c): nchw is abcd,
// nhwc is acdb, nChw16c is aBcd16b, OIhw16i16o is ABcd16b16a. An alias is the
// same enumerator value as its canonical tag, so to_string prints the
// canonical name.
//
//   primcache::format_tag t = primcache::format_tag::nChw16c;
//   primcache::to_string(t);                    // "aBcd16b"
//   primcache::ndims_of(t);                     // 4
//   primcache::parse_format_tag("OIhw16i16o");  // format_tag::ABcd16b16a
//
// Enumerator values are not stable across versions (nothing persistent holds
// a tag). Thread-safety: pure functions over values. Exceptions: none.
#pragma once

#include <optional>
#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache {

enum class format_tag {
  undef,  // no layout: rejected by memory_desc
  any,    // let the primitive descriptor choose
  // Plain layouts: a permutation of the dimensions, no inner blocks.
  a,
  ab,
  ba,
  abc,
  acb,
  bac,
  bca,
  cba,
  abcd,
  abdc,
  acbd,
  acdb,
  bacd,
  bcda,
  cdba,
  dcab,
  abcde,
  abdec,
  acbde,
  acdeb,
  bacde,
  bcdea,
  cdeba,
  decab,
  abcdef,
  // Blocked layouts.
  aBc8b,
  aBc16b,
  aBcd8b,
  aBcd16b,
  aBcde8b,
  aBcde16b,
  Acdb8a,
  Acdb16a,
  ABc16a16b,
  ABc16b16a,
  ABcd8a8b,
  ABcd8b8a,
  ABcd16a16b,
  ABcd16b16a,
  ABcde16a16b,
  ABcde16b16a,
  Abcde8a,
  Abcde16a,
  aBCde8c8b,
  aBCde16b16c,
  aBCde16c16b,

  // Aliases. 1-D and 2-D.
  x = a,
  nc = ab,
  cn = ba,
  oi = ab,
  io = ba,
  tn = ab,
  nt = ba,
  // 3-D: 1-D spatial activations and weights, sequences.
  ncw = abc,
  nwc = acb,
  oiw = abc,
  owi = acb,
  wio = cba,
  iwo = bca,
  tnc = abc,
  ntc = bac,
  // 4-D: 2-D spatial activations and weights, grouped 1-D weights.
  nchw = abcd,
  nhwc = acdb,
  chwn = bcda,
  oihw = abcd,
  ohwi = acdb,
  hwio = cdba,
  ihwo = bcda,
  iohw = bacd,
  goiw = abcd,
  gowi = abdc,
  wigo = dcab,
  // 5-D: 3-D spatial activations and weights, grouped 2-D weights.
  ncdhw = abcde,
  ndhwc = acdeb,
  oidhw = abcde,
  odhwi = acdeb,
  dhwio = cdeba,
  idhwo = bcdea,
  iodhw = bacde,
  goihw = abcde,
  gohwi = abdec,
  giohw = acbde,
  hwigo = decab,
  // 6-D: grouped 3-D weights.
  goidhw = abcdef,
  // Blocked activations.
  nCw8c = aBc8b,
  nCw16c = aBc16b,
  nChw8c = aBcd8b,
  nChw16c = aBcd16b,
  nCdhw8c = aBcde8b,
  nCdhw16c = aBcde16b,
  // Blocked weights.
  Ohwi8o = Acdb8a,
  Ohwi16o = Acdb16a,
  OIw16o16i = ABc16a16b,
  OIw16i16o = ABc16b16a,
  OIhw8o8i = ABcd8a8b,
  OIhw8i8o = ABcd8b8a,
  OIhw16o16i = ABcd16a16b,
  OIhw16i16o = ABcd16b16a,
  OIdhw16o16i = ABcde16a16b,
  OIdhw16i16o = ABcde16b16a,
  Goihw8g = Abcde8a,
  Goihw16g = Abcde16a,
  gOIhw8i8o = aBCde8c8b,
  gOIhw16o16i = aBCde16b16c,
  gOIhw16i16o = aBCde16c16b,
};

// The canonical name ("aBcd16b", "abcd", "any", "undef"); "unknown" for a
// value outside the enum.
PRIMCACHE_API std::string_view to_string(format_tag tag) noexcept;

// How many dimensions the tag lays out; 0 for undef, any and unknown values.
PRIMCACHE_API int ndims_of(format_tag tag) noexcept;

// True when the tag splits some dimension into inner blocks.
PRIMCACHE_API bool is_blocked(format_tag tag) noexcept;

// A tag by canonical name or alias ("abcd", "nchw", "nChw16c", "any");
// case-sensitive, since nChw16c and nchw differ. nullopt for anything else,
// including "undef".
PRIMCACHE_API std::optional<format_tag> parse_format_tag(std::string_view name) noexcept;

}  // namespace primcache
