#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "primcache/base/json_keys.hpp"

using primcache::duplicate_json_key;
using primcache::find_duplicate_json_key;

namespace {

// The duplicate's key and object pointer, "" when none is found.
std::string found(std::string_view text) {
  const std::optional<duplicate_json_key> d = find_duplicate_json_key(text);
  if (!d) return "";
  return "\"" + d->key + "\" in \"" + d->object_pointer + "\"";
}

std::string repeat(std::string_view s, std::size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("a key given twice in one object is found with its object and offset",
          "[base][json_keys]") {
  const std::optional<duplicate_json_key> d = find_duplicate_json_key(R"({"a":1,"a":2})");
  REQUIRE(d);
  CHECK(d->key == "a");
  CHECK(d->object_pointer == "");
  CHECK(d->offset == 7);

  SECTION("whitespace anywhere JSON allows it") {
    const std::string text = " \t\r\n{ \"a\" : 1 ,\n  \"a\" : 2 } \n";
    const auto w = find_duplicate_json_key(text);
    REQUIRE(w);
    CHECK(w->key == "a");
    CHECK(w->offset == text.find("\"a\"", 8));
  }
  SECTION("the first in text order, not the last or the innermost") {
    CHECK(found(R"({"a":1,"a":2,"b":1,"b":2})") == R"("a" in "")");
    CHECK(found(R"({"a":{"b":1,"b":2},"a":3})") == R"("b" in "/a")");
    CHECK(found(R"({"x":1,"x":{"b":1,"b":2}})") == R"("x" in "")");
    CHECK(found(R"({"a":1,"b":2,"c":3,"a":4,"a":5})") == R"("a" in "")");
  }
  SECTION("keys that differ are not duplicates") {
    CHECK(found(R"({"a":1,"a ":2,"A":3,"\u0062":4,"ab":5,"b":{}})") == R"("b" in "")");
    CHECK(found(R"({"a":1,"a ":2,"A":3,"ab":5,"b":{}})") == "");
  }
}

TEST_CASE("keys compare after unescaping", "[base][json_keys]") {
  CHECK(found(R"({"a":1,"\u0061":2})") == R"("a" in "")");
  CHECK(found(R"({"\u0061":1,"a":2})") == R"("a" in "")");
  CHECK(found(R"({"\n":1,"\u000a":2})") == "\"\n\" in \"\"");
  CHECK(found(R"({"\/":1,"/":2})") == R"("/" in "")");
  CHECK(found(R"({"\"q\\":1,"\u0022q\u005C":2})") == R"(""q\" in "")");
  CHECK(found(R"({"\b\f\r\t":1,"\u0008\u000C\u000d\u0009":2})") == "\"\b\f\r\t\" in \"\"");
  CHECK(found(R"({"é":1,"\u00e9":2})") == R"("é" in "")");
  CHECK(found(R"({"€":1,"\u20AC":2})") == R"("€" in "")");
  // A NUL is a character like another.
  const auto nul = find_duplicate_json_key(R"({"\u0000":1,"\u0000":2})");
  REQUIRE(nul);
  CHECK(nul->key == std::string(1, '\0'));
  CHECK(found(R"({"\u0000":1,"":2})") == "");
  CHECK(found(R"({"\u0000a":1,"\u0000b":2})") == "");
}

TEST_CASE("surrogate pairs are one character; lone surrogates are characters of their own",
          "[base][json_keys]") {
  // U+1F600 as raw UTF-8, as a pair in either case of hex digits.
  CHECK(found("{\"\xF0\x9F\x98\x80\":1,\"\\ud83d\\ude00\":2}") == "\"\xF0\x9F\x98\x80\" in \"\"");
  CHECK(found(R"({"\uD83D\uDE00":1,"\ud83d\ude00":2})") == "\"\xF0\x9F\x98\x80\" in \"\"");
  CHECK(found(R"({"\ud83d\ude00":1,"\ud83d\ude01":2})") == "");
  // A lone high or low surrogate, and a pair that is not one.
  CHECK(found(R"({"\ud800":1,"\uD800":2})") == "\"\xED\xA0\x80\" in \"\"");
  CHECK(found(R"({"\ud800":1,"\udc00":2})") == "");
  CHECK(found(R"({"\ud83d\ude00":1,"\ud83d":2})") == "");
  CHECK(found(R"({"\ud83d\ude00":1,"\ude00":2})") == "");
  CHECK(found(R"({"\ud83dx":1,"\ud83d\u0078":2})") == "\"\xED\xA0\xBDx\" in \"\"");
  CHECK(found(R"({"\ud83d\ud83d":1,"\ud83d\ud83d":2})") == "\"\xED\xA0\xBD\xED\xA0\xBD\" in \"\"");
}

TEST_CASE("nested objects: a key repeats only within the one object", "[base][json_keys]") {
  SECTION("the same key in different objects is fine") {
    CHECK(found(R"({"a":{"a":{"a":1}},"b":{"a":1,"b":2},"c":[{"a":1},{"a":2}]})") == "");
    CHECK(found(R"({"a":{"x":1},"b":{"x":1},"c":{"x":1}})") == "");
    // A sibling's keys are forgotten when it closes.
    CHECK(found(R"({"a":{"x":1,"y":2},"b":{"y":1,"x":2}})") == "");
  }
  SECTION("the object is named by a JSON pointer") {
    CHECK(found(R"({"ops":[{"name":"x"},{"name":"y","kind":"a","kind":"b"}]})") ==
          R"("kind" in "/ops/1")");
    CHECK(found(R"({"ops":[{},{},{},{"attributes":{"algorithm":"relu","algorithm":"tanh"}}]})") ==
          R"("algorithm" in "/ops/3/attributes")");
    CHECK(found(R"({"a":{"b":{"c":[1,[2,{"k":0,"k":1}]]}}})") == R"("k" in "/a/b/c/1/1")");
    // '~' and '/' in a pointer's keys are escaped (RFC 6901).
    CHECK(found(R"({"a/b~c":{"k":0,"k":1}})") == R"("k" in "/a~1b~0c")");
    // The pointer names the key as it reads unescaped.
    CHECK(found(R"({"\u0061":{"k":0,"k":1}})") == R"("k" in "/a")");
  }
  SECTION("an object after a closed sibling at the same depth starts afresh") {
    CHECK(found(R"([{"a":1,"b":2},{"b":1,"a":1,"a":2}])") == R"("a" in "/1")");
  }
}

TEST_CASE("arrays of objects", "[base][json_keys]") {
  CHECK(found(R"([{"a":1},{"a":1},{"b":1,"b":2}])") == R"("b" in "/2")");
  CHECK(found(R"([{"a":1},{"a":1},{"a":1}])") == "");
  CHECK(found(R"([[],[{}],[1,2,{"x":[{"y":0},{"y":0,"y":1}]}]])") == R"("y" in "/2/2/x/1")");
}

TEST_CASE("the empty key is a key like another", "[base][json_keys]") {
  const auto d = find_duplicate_json_key(R"({"":1,"":2})");
  REQUIRE(d);
  CHECK(d->key == "");
  CHECK(d->object_pointer == "");
  CHECK(found(R"({"":{"x":1,"x":2}})") == R"("x" in "/")");
  CHECK(found(R"({"":1,"a":2})") == "");
}

TEST_CASE("objects with many keys", "[base][json_keys]") {
  std::string text = "{";
  for (int i = 0; i < 5000; ++i)
    text += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  SECTION("all distinct") {
    text += "\"last\":0}";
    CHECK(found(text) == "");
  }
  SECTION("one repeated at the end") {
    text += "\"k17\":0}";
    CHECK(found(text) == R"("k17" in "")");
  }
  SECTION("one repeated at the end, escaped") {
    text += "\"\\u006b4999\":0}";
    CHECK(found(text) == R"("k4999" in "")");
  }
  SECTION("the same keys again in a nested object") {
    std::string inner = "{";
    for (int i = 0; i < 5000; ++i) inner += "\"k" + std::to_string(i) + "\":0,";
    text += "\"inner\":" + inner + "\"x\":0},\"x\":0}";
    CHECK(found(text) == "");
  }
}

TEST_CASE("text that is not JSON yields nothing, and never crashes", "[base][json_keys]") {
  // Each has a duplicate before (or around) the fault.
  const char* const bad[] = {
      R"({"a":1,"a":2)",
      R"({"a":1,"a":2}x)",
      R"({"a":1,"a":2} {})",
      R"({"a":1,"a":2,})",
      R"({"a":1,"a":2]})",
      R"({"a":1,"a":02})",
      R"({"a":1,"a":-})",
      R"({"a":1,"a":1.})",
      R"({"a":1,"a":.5})",
      R"({"a":1,"a":1e})",
      R"({"a":1,"a":1e+})",
      R"({"a":1,"a":+1})",
      R"({"a":1,"a":tru})",
      R"({"a":1,"a":nul})",
      R"({"a":1,"a":True})",
      R"({"a":1,"a":NaN})",
      R"({"a" 1,"a":2})",
      R"({"a":1 "a":2})",
      R"({"a":1,,"a":2})",
      R"({"a":1,"a":"\x"})",
      R"({"a":1,"a":"\u12"})",
      R"({"a":1,"a":"\u12g4"})",
      R"({"a":1,"a\u":2})",
      R"({"a":1,"a":"\)",
      R"({"a":1,"a":")",
      R"({"a":1,'a':2})",
      R"({"a":1,a:2})",
      R"({"a":1,"a":2,1:3})",
      R"([{"a":1,"a":2}],)",
      R"(["a":1])",
      R"({"a":1,"a":2}])",
      R"({"a":1,"a":[}})",
      "{\"a\":1,\"a\":\"\x01\"}",
      "{\"a\":1,\"a\":\"\n\"}",
      "{\"a\":1,\"a\n\":2}",
      "",
      " ",
      "{",
      "}",
      "[",
      "]",
      ":",
      ",",
      "\"",
  };
  for (const char* text : bad) {
    INFO(text);
    CHECK_FALSE(find_duplicate_json_key(text));
  }
  CHECK_FALSE(find_duplicate_json_key(std::string_view("{\"a\":1,\"a\":2}\0", 14)));
  // Every proper prefix of a document is not JSON.
  const std::string doc =
      R"({"x": [1, -2.5e+3, true, false, null, "s\"\u00e9\ud83d\ude00"], "o": {"k": {}, "k": []}})";
  REQUIRE(found(doc) == R"("k" in "/o")");
  for (std::size_t n = 0; n < doc.size(); ++n) {
    INFO(doc.substr(0, n));
    CHECK_FALSE(find_duplicate_json_key(std::string_view(doc).substr(0, n)));
  }
  // Random bytes, and random picks from JSON's own punctuation.
  std::uint64_t state = 42;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<unsigned>(state >> 33);
  };
  const std::string_view alphabet = "{}[]:,\"\\u0a1e-. \n";
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const unsigned size = next() % 64;
    for (unsigned i = 0; i < size; ++i) {
      text += round % 2 ? static_cast<char>(next() & 0xff) : alphabet[next() % alphabet.size()];
    }
    (void)find_duplicate_json_key(text);  // no crash, no hang: the test is that this returns
  }
}

TEST_CASE("scalars and valid documents without objects", "[base][json_keys]") {
  for (const char* text : {"1", "-0", "0.5e-7", "true", "false", "null", R"("a")", "[]", "{}",
                           "[1,[2,[3]],{}]", " 1 "}) {
    INFO(text);
    CHECK_FALSE(find_duplicate_json_key(text));
  }
}

TEST_CASE("deep nesting is fine and fast", "[base][json_keys]") {
  constexpr std::size_t n = 1'000'000;
  const auto start = std::chrono::steady_clock::now();
  SECTION("a million '[' (not JSON)") {
    CHECK_FALSE(find_duplicate_json_key(repeat("[", n)));
  }
  SECTION("a million '{\"a\":' (not JSON)") {
    CHECK_FALSE(find_duplicate_json_key(repeat("{\"a\":", n)));
  }
  SECTION("a million arrays, closed") {
    CHECK_FALSE(find_duplicate_json_key(repeat("[", n) + repeat("]", n)));
  }
  SECTION("a million objects, closed, the same key in each") {
    CHECK_FALSE(find_duplicate_json_key(repeat("{\"a\":", n) + "1" + repeat("}", n)));
  }
  SECTION("a duplicate at the bottom of a million objects") {
    const auto d =
        find_duplicate_json_key(repeat("{\"a\":", n) + R"({"k":1,"k":2})" + repeat("}", n));
    REQUIRE(d);
    CHECK(d->key == "k");
    CHECK(d->object_pointer == repeat("/a", n));
  }
  SECTION("a duplicate at the bottom of a million arrays") {
    const auto d = find_duplicate_json_key(repeat("[", n) + R"({"k":1,"k":2})" + repeat("]", n));
    REQUIRE(d);
    CHECK(d->object_pointer == repeat("/0", n));
  }
  SECTION("a duplicate at the bottom, and the text unclosed") {
    CHECK_FALSE(find_duplicate_json_key(repeat("[", n) + R"({"k":1,"k":2})" + repeat("]", n - 1)));
  }
  // Generous for sanitizer and debug builds: a recursive or quadratic
  // scanner takes far longer (or overflows its stack).
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}
