// primcache/base/utf8.hpp — checking that text is well-formed UTF-8, and
// making it so, for text that goes where only UTF-8 may: metric label
// values and help text (a Prometheus scrape with one Latin-1 byte is
// refused whole).
//
//   if (std::size_t at = primcache::invalid_utf8_at(text); at != std::string_view::npos) {
//     fail("not UTF-8 at byte " + std::to_string(at));
//   }
//   labels.emplace("graph", primcache::escape_invalid_utf8(user_name));  // "r\xe9sum\xe9"
//
// Well-formed follows Unicode's table 3-7: no overlong forms, no surrogates
// (U+D800..U+DFFF), nothing past U+10FFFF, no sequence cut short by the end
// or by a byte that does not continue it.
//
// Thread-safety: free functions over their arguments. Exceptions: none,
// but std::bad_alloc from escape_invalid_utf8.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache {

// The length of the well-formed sequence `text` starts with (1 to 4), or 0
// when it starts with none (or is empty).
PRIMCACHE_API std::size_t utf8_sequence_length(std::string_view text) noexcept;

// The offset of the first byte that begins no well-formed sequence, or
// std::string_view::npos when the whole text is UTF-8.
PRIMCACHE_API std::size_t invalid_utf8_at(std::string_view text) noexcept;

// `text` with each byte that is no part of a well-formed sequence written
// as the four characters \xNN (lowercase hex); UTF-8 text comes back as it
// is. Escaping rather than U+FFFD keeps two different Latin-1 names apart.
PRIMCACHE_API std::string escape_invalid_utf8(std::string_view text);

}  // namespace primcache
