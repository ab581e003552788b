// UTF-8 well-formedness (primcache/base/utf8.hpp): the boundaries of
// Unicode's table 3-7, and the escaping metric labels use.
#include <catch2/catch.hpp>
#include <string>
#include <string_view>

#include "primcache/base/utf8.hpp"

using primcache::escape_invalid_utf8;
using primcache::invalid_utf8_at;
using primcache::utf8_sequence_length;
using namespace std::string_view_literals;

TEST_CASE("well-formed UTF-8 is accepted up to each boundary of table 3-7", "[utf8]") {
  CHECK(invalid_utf8_at("") == std::string_view::npos);
  CHECK(invalid_utf8_at("plain ascii\x7f") == std::string_view::npos);
  CHECK(invalid_utf8_at("\xc2\x80\xdf\xbf") == std::string_view::npos);  // U+0080, U+07FF
  CHECK(invalid_utf8_at("\xe0\xa0\x80\xed\x9f\xbf\xef\xbf\xbf") ==
        std::string_view::npos);  // U+0800, U+D7FF, U+FFFF
  CHECK(invalid_utf8_at("\xf0\x90\x80\x80\xf4\x8f\xbf\xbf") ==
        std::string_view::npos);  // U+10000, U+10FFFF
  CHECK(utf8_sequence_length("\xe2\x82\xac rest") == 3);
  CHECK(utf8_sequence_length("") == 0);
}

TEST_CASE("ill-formed UTF-8 is found at the byte that begins no sequence", "[utf8]") {
  CHECK(invalid_utf8_at("ab\x80") == 2);            // a lone continuation byte
  CHECK(invalid_utf8_at("\xc0\xaf") == 0);          // overlong '/'
  CHECK(invalid_utf8_at("x\xc1\xbf") == 1);         // overlong
  CHECK(invalid_utf8_at("\xe0\x9f\xbf") == 0);      // overlong three-byte form
  CHECK(invalid_utf8_at("\xed\xa0\x80") == 0);      // a surrogate, U+D800
  CHECK(invalid_utf8_at("\xf0\x8f\xbf\xbf") == 0);  // overlong four-byte form
  CHECK(invalid_utf8_at("\xf4\x90\x80\x80") == 0);  // past U+10FFFF
  CHECK(invalid_utf8_at("\xf5\x80\x80\x80") == 0);  // F5..FF begin nothing
  CHECK(invalid_utf8_at("ok\xe2\x82") == 2);        // cut short by the end
  CHECK(invalid_utf8_at("\xe2(\xac") == 0);         // cut short by a byte that does not continue it
  CHECK(invalid_utf8_at("r\xe9sum\xe9") == 1);      // Latin-1
  CHECK(utf8_sequence_length("\xe9") == 0);
}

TEST_CASE("escaping writes each ill-formed byte as \\xNN and leaves UTF-8 as it is", "[utf8]") {
  CHECK(escape_invalid_utf8("r\xe9sum\xe9") == "r\\xe9sum\\xe9");
  CHECK(escape_invalid_utf8("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(escape_invalid_utf8("\xed\xa0\x80!") == "\\xed\\xa0\\x80!");
  CHECK(escape_invalid_utf8("\xe2\x82") == "\\xe2\\x82");
  CHECK(escape_invalid_utf8("") == "");
  CHECK(escape_invalid_utf8("\x00\xff"sv) == std::string("\0\\xff", 5));
  // The escaped text is UTF-8 itself.
  CHECK(invalid_utf8_at(escape_invalid_utf8("\x80\xc0\xf8 \xf4\x90")) == std::string_view::npos);
}
