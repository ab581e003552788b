// primcache/base/json_keys.hpp — finding a key given twice in one JSON
// object, so that every JSON reader in primcache can refuse it.
//
//   if (std::optional<primcache::duplicate_json_key> d =
//           primcache::find_duplicate_json_key(text)) {
//     fail(path + ": duplicate key \"" + d->key + "\" in " + d->object_pointer);
//   }
//
// RFC 8259 leaves a repeated key to the reader, and Boost.JSON (like most
// readers) keeps the last one silently: {"threads": 1, "threads": 1024}
// would run 1024 threads. Readers parse the text as they always have (their
// parser reports syntax errors, with their positions) and then ask this
// scanner, which needs no parser library, whether an object repeats a key.
//
// Keys compare as the strings they denote, after unescaping: "a" and
// "\u0061" are one key, and so are "\uD83D\uDE00" and the raw UTF-8 of
// U+1F600. The same key in two different objects is no duplicate.
//
// Text that is not JSON (RFC 8259's grammar: one value, whitespace around
// it) yields nullopt: reporting it is the real parser's job. The scanner is
// lenient where parsers differ: it does not check that the text is valid
// UTF-8, and it takes a lone surrogate escape ("\uD800") as a character of
// its own. It never recurses (nesting is a stack of 8 bytes a level, so a
// million '[' are fine), reads each byte a bounded number of times, and
// uses memory in proportion to the text at most.
//
// Thread-safety: a free function over its argument. Exceptions:
// std::bad_alloc only.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "primcache/base/export.hpp"

namespace primcache {

struct duplicate_json_key {
  // The key, unescaped (UTF-8; a lone surrogate as its three-byte form).
  std::string key;
  // The object holding it, as a JSON pointer (RFC 6901, '~' and '/' in
  // keys escaped as ~0 and ~1): "" for the top-level object, "/ops/3",
  // "/ops/3/attributes".
  std::string object_pointer;
  // The byte offset in the text of the opening quote of the key's second
  // occurrence (for a line and column in messages).
  std::size_t offset = 0;
};

// The first key, in text order, given a second time in the object that
// holds it; nullopt when there is none or the text is not JSON.
PRIMCACHE_API std::optional<duplicate_json_key> find_duplicate_json_key(std::string_view json_text);

}  // namespace primcache
