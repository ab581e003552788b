// Label values and help texts reach the Prometheus exposition as they are
// registered; one that is not UTF-8 would make the whole scrape unparseable,
// so registration refuses it (metric.hpp).
#include <catch2/catch.hpp>

#include <string>

#include "error_from.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"

using primcache::control_registry;
using primcache::status;
using primcache::test::error_from;

namespace {

bool listed(const control_registry& r, const std::string& name) {
  for (const auto& f : r.list_metrics()) {
    if (f.name == name) return true;
  }
  return false;
}

// The build info set's value for `key` ("" when absent).
std::string info_value(const control_registry& r, const std::string& key) {
  for (const auto& info : r.list_info()) {
    for (const auto& [k, v] : info.labels) {
      if (info.name == "build" && k == key) return v;
    }
  }
  return "";
}

// Byte sequences that are not UTF-8 (Unicode 15, table 3-7), each named.
struct bad_value {
  const char* what;
  std::string bytes;
};

}  // namespace

TEST_CASE("a label value that is not UTF-8 is refused, naming the metric and the label",
          "[control][metrics][utf8]") {
  const bad_value bad = GENERATE(values<bad_value>({
      {"Latin-1 text", "r\xe9sum\xe9"},
      {"a lone continuation byte", "\x80"},
      {"a continuation byte after a complete character", "\xc3\xa9\xbf"},
      {"an overlong two-byte '/'", "\xc0\xaf"},
      {"an overlong two-byte U+007F", "\xc1\xbf"},
      {"an overlong three-byte '/'", "\xe0\x80\xaf"},
      {"an overlong three-byte U+07FF", "\xe0\x9f\xbf"},
      {"an overlong four-byte '/'", "\xf0\x80\x80\xaf"},
      {"an overlong four-byte U+FFFF", "\xf0\x8f\xbf\xbf"},
      {"the surrogate U+D800", "\xed\xa0\x80"},
      {"the surrogate U+DFFF", "\xed\xbf\xbf"},
      {"a surrogate pair in CESU-8", "\xed\xa0\xbd\xed\xb8\x80"},
      {"U+110000, past U+10FFFF", "\xf4\x90\x80\x80"},
      {"a lead byte F5", "\xf5\x80\x80\x80"},
      {"a five-byte form", "\xf8\x88\x80\x80\x80"},
      {"the byte FE", "a\xfe"},
      {"the byte FF", "\xff"},
      {"a two-byte sequence cut at the end", "ok\xc3"},
      {"a three-byte sequence cut at the end", "\xe2\x82"},
      {"a four-byte sequence cut at the end", "\xf0\x9f\x98"},
      {"a three-byte sequence cut by ASCII", "\xe2\x82x"},
      {"a four-byte sequence cut by a new lead byte", "\xf0\x9f\xc3\xa9"},
  }));
  INFO(bad.what);
  control_registry r;

  SECTION("counter") {
    const auto e = error_from([&] {
      (void)r.counter("primcache_graph_runs_total", "Graph executor runs", {{"graph", bad.bytes}});
    });
    CHECK(e.code() == status::invalid_arguments);
    CHECK(e.message().find("primcache_graph_runs_total") != std::string::npos);
    CHECK(e.message().find("'graph'") != std::string::npos);
    CHECK(e.message().find("UTF-8") != std::string::npos);
    CHECK_FALSE(listed(r, "primcache_graph_runs_total"));
  }
  SECTION("gauge, among valid labels") {
    const auto e = error_from([&] {
      (void)r.gauge("depth", "h", {{"a", "fine"}, {"b", bad.bytes}, {"c", "fine"}});
    });
    CHECK(e.code() == status::invalid_arguments);
    CHECK(e.message().find("'depth'") != std::string::npos);
    CHECK(e.message().find("'b'") != std::string::npos);
    CHECK_FALSE(listed(r, "depth"));
  }
  SECTION("histogram") {
    CHECK(error_from([&] {
            (void)r.histogram("seconds", "h", {{"source", bad.bytes}});
          }).code() == status::invalid_arguments);
    CHECK_FALSE(listed(r, "seconds"));
  }
  SECTION("a second series of a registered family") {
    (void)r.counter("runs_total", "h", {{"graph", "good"}});
    CHECK(error_from([&] {
            (void)r.counter("runs_total", "h", {{"graph", bad.bytes}});
          }).code() == status::invalid_arguments);
    const auto all = r.list_metrics();
    REQUIRE(all.size() == 1);
    CHECK(all[0].samples.size() == 1);
  }
  SECTION("help text") {
    const auto e = error_from([&] { (void)r.counter("runs_total", bad.bytes); });
    CHECK(e.code() == status::invalid_arguments);
    CHECK(e.message().find("'runs_total'") != std::string::npos);
    CHECK(e.message().find("help") != std::string::npos);
    CHECK_FALSE(listed(r, "runs_total"));
  }
  SECTION("info value: the value before stands") {
    CHECK(error_from([&] { r.set_info("build", "isa", bad.bytes); }).code() ==
          status::invalid_arguments);
    CHECK(info_value(r, "isa") == "unknown");
  }
}

TEST_CASE("a label value of any UTF-8 text is accepted and kept byte for byte",
          "[control][metrics][utf8]") {
  const std::string value = GENERATE(values<std::string>({
      "", "plain ascii, with \"quotes\", \\ and a\nnewline",
      "r\xc3\xa9sum\xc3\xa9",               // résumé
      "\xc2\x80 \xdf\xbf",                  // U+0080, U+07FF
      "\xe0\xa0\x80 \xe2\x82\xac",          // U+0800, the euro sign
      "\xed\x9f\xbf \xee\x80\x80",          // U+D7FF, U+E000: either side of the surrogates
      "\xef\xbf\xbd \xef\xbf\xbf",          // U+FFFD, U+FFFF
      "\xf0\x90\x80\x80 \xf0\x9f\x98\x80",  // U+10000, an emoji
      "\xf4\x8f\xbf\xbf",                   // U+10FFFF, the last code point
  }));
  control_registry r;
  (void)r.counter("runs_total", "Runs \xe2\x80\x94 any UTF-8 help", {{"graph", value}});
  r.set_info("build", "isa", value);
  const auto all = r.list_metrics();
  REQUIRE(all.size() == 1);
  REQUIRE(all[0].samples.size() == 1);
  CHECK(all[0].samples[0].labels == primcache::metric_labels{{"graph", value}});
  CHECK(all[0].help == "Runs \xe2\x80\x94 any UTF-8 help");
  CHECK(info_value(r, "isa") == value);
}
