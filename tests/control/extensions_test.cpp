#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "error_from.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"

using primcache::control_registry;
using primcache::metric_kind;
using primcache::setting_spec;
using primcache::setting_type;
using primcache::setting_value;
using primcache::status;
using primcache::test::error_from;

namespace {

struct plain_stats {
  std::uint64_t hits = 1, misses = 2, evictions = 3;
};

// The existing concept's members only.
struct plain_cache {
  std::uint64_t capacity() const { return 10; }
  void set_capacity(std::uint64_t) {}
  std::uint64_t size() const { return 4; }
  plain_stats stats() const { return {}; }
  void clear() {}
};

// With the optional weight() and extra_stats().
struct weighed_cache : plain_cache {
  std::uint64_t weight() const { return 4096; }
  std::map<std::string, std::uint64_t> extra_stats() const {
    return {{"refreshes", 7}, {"Bad Name", 1}, {"disk_reads", 2}};
  }
};

const primcache::metric_family_info& family(const std::vector<primcache::metric_family_info>& all,
                                            const std::string& name) {
  for (const auto& f : all) {
    if (f.name == name) return f;
  }
  FAIL("no metric " << name);
  throw 0;
}

}  // namespace

static_assert(primcache::controllable_cache<plain_cache>);
static_assert(!primcache::weighed_cache<plain_cache>);
static_assert(primcache::weighed_cache<weighed_cache>);
static_assert(primcache::cache_with_extra_stats<weighed_cache>);

TEST_CASE("a cache without weight or extras reports none of them", "[control][extras]") {
  control_registry r;
  plain_cache c;
  auto reg = r.register_cache("plain", c);
  const auto info = r.find_cache("plain").info();
  CHECK_FALSE(info.weight_bytes.has_value());
  CHECK(info.extra.empty());
  CHECK_FALSE(r.find_cache("plain").weight().has_value());
}

TEST_CASE("a cache with weight and extras reports them, extras sorted and names checked",
          "[control][extras]") {
  control_registry r;
  weighed_cache c;
  auto reg = r.register_cache("weighed", c, primcache::capacity_unit::bytes);
  const auto list = r.list_caches();
  REQUIRE(list.size() == 1);
  REQUIRE(list[0].weight_bytes == std::uint64_t{4096});
  const primcache::extra_stat_list expected{{"disk_reads", 2}, {"refreshes", 7}};
  CHECK(list[0].extra == expected);
  CHECK(r.find_cache("weighed").extra_stats() == expected);
  CHECK(r.find_cache("weighed").weight() == std::uint64_t{4096});
}

TEST_CASE("counters sum every thread's shard and the same name and labels give one series",
          "[control][metrics]") {
  control_registry r;
  auto a = r.counter("executions_total", "help", {{"kind", "matmul"}});
  auto b = r.counter("executions_total", "other help", {{"kind", "matmul"}});
  a.add();
  std::thread t([&] { b.add(41); });
  t.join();
  CHECK(a.value() == 42);
  const auto all = r.list_metrics();
  const auto& f = family(all, "executions_total");
  CHECK(f.kind == metric_kind::counter);
  CHECK(f.help == "help");
  REQUIRE(f.samples.size() == 1);
  CHECK(f.samples[0].value == 42.0);
  CHECK(f.samples[0].labels == primcache::metric_labels{{"kind", "matmul"}});
}

TEST_CASE("a series registered and never recorded is listed as zero", "[control][metrics]") {
  control_registry r;
  (void)r.counter("c_total", "h", {{"kind", "conv"}});
  (void)r.histogram("h_seconds", "h", {{"engine", "cpu"}, {"source", "memory"}});
  const auto all = r.list_metrics();
  CHECK(family(all, "c_total").samples.at(0).value == 0.0);
  const auto& h = family(all, "h_seconds").samples.at(0);
  CHECK(h.count == 0);
  CHECK(h.cumulative_counts.size() == primcache::default_latency_buckets().size() + 1);
}

TEST_CASE("histograms count each value in the first bucket at or above it, cumulatively",
          "[control][metrics]") {
  control_registry r;
  auto h = r.histogram("t_seconds", "h", {}, {0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);
  h.observe(0.5);
  h.observe(3.0);
  const auto all = r.list_metrics();
  const auto& s = family(all, "t_seconds").samples.at(0);
  CHECK(s.cumulative_counts == std::vector<std::uint64_t>{2, 3, 4});
  CHECK(s.count == 4);
  CHECK(s.sum == Approx(3.65));
}

TEST_CASE("gauges are set and added", "[control][metrics]") {
  control_registry r;
  auto g = r.gauge("depth", "h");
  g.set(3);
  g.add(1.5);
  CHECK(g.value() == 4.5);
  CHECK(family(r.list_metrics(), "depth").samples.at(0).value == 4.5);
}

TEST_CASE("metric registrations that conflict or break the naming rules are refused",
          "[control][metrics]") {
  control_registry r;
  (void)r.counter("x_total", "h", {{"kind", "a"}});
  CHECK(error_from([&] {
          (void)r.gauge("x_total", "h", {{"kind", "a"}});
        }).code() == status::already_exists);
  CHECK(error_from([&] {
          (void)r.counter("x_total", "h", {{"engine", "a"}});
        }).code() == status::invalid_arguments);
  CHECK(error_from([&] { (void)r.counter("bad.name", "h"); }).code() == status::invalid_arguments);
  CHECK(error_from([&] {
          (void)r.counter("ok", "h", {{"Bad", "v"}});
        }).code() == status::invalid_arguments);
  CHECK(error_from([&] {
          (void)r.histogram("hh", "h", {}, {1.0, 0.5});
        }).code() == status::invalid_arguments);
  (void)r.histogram("hb", "h", {}, {1.0});
  CHECK(error_from([&] { (void)r.histogram("hb", "h", {}, {2.0}); }).code() ==
        status::invalid_arguments);
}

TEST_CASE("a default-constructed metric handle records nothing", "[control][metrics]") {
  primcache::metric_counter c;
  primcache::metric_histogram h;
  primcache::metric_gauge g;
  c.add();
  h.observe(1);
  g.set(1);
  CHECK(c.value() == 0);
  CHECK(g.value() == 0.0);
}

TEST_CASE("build info holds the version from the start, and backends add labels",
          "[control][info]") {
  control_registry r;
  r.set_info("build", "isa", "avx2");
  const auto info = r.list_info();
  REQUIRE(info.size() == 1);
  CHECK(info[0].name == "build");
  const primcache::metric_labels expected{
      {"isa", "avx2"}, {"llvm", "unknown"}, {"version", "0.1.0"}};
  CHECK(info[0].labels == expected);
  CHECK(error_from([&] { r.set_info("build", "Bad-Key", "x"); }).code() ==
        status::invalid_arguments);
}

TEST_CASE("an int setting accepts values within its bounds and names the bounds otherwise",
          "[control][settings]") {
  control_registry r;
  std::vector<std::int64_t> seen;
  auto spec = setting_spec::integer("threads", "worker threads", 4, 1, 64);
  spec.on_change = [&](const setting_value& v) { seen.push_back(std::get<std::int64_t>(v)); };
  auto reg = r.register_setting(std::move(spec));
  r.set_setting("threads", std::int64_t{8});
  CHECK(reg.int_value() == 8);
  CHECK(seen == std::vector<std::int64_t>{8});
  auto e = error_from([&] { r.set_setting("threads", std::int64_t{100}); });
  CHECK(e.code() == status::invalid_arguments);
  CHECK(e.message() == "setting 'threads' must be between 1 and 64; got 100");
  e = error_from([&] { r.set_setting("threads", std::string("8")); });
  CHECK(e.message() == "setting 'threads' is an int; got a string");
  CHECK(reg.int_value() == 8);
  const auto info = r.get_setting("threads");
  CHECK(info.type == setting_type::integer);
  CHECK(info.min == 1);
  CHECK(info.max == 64);
  CHECK(std::get<std::int64_t>(info.initial) == 4);
}

TEST_CASE("an enum setting accepts only its choices", "[control][settings]") {
  control_registry r;
  auto reg = r.register_setting(
      setting_spec::choice("jit_mode", "how kernels compile", "tiered", {"tiered", "sync"}));
  r.set_setting("jit_mode", std::string("sync"));
  CHECK(reg.string_value() == "sync");
  const auto e = error_from([&] { r.set_setting("jit_mode", std::string("fast")); });
  CHECK(e.message() == "setting 'jit_mode' is an enum of tiered, sync; 'fast' is not one of them");
  CHECK(reg.string_value() == "sync");
}

TEST_CASE("string and bool settings check types, and validators give their reason",
          "[control][settings]") {
  control_registry r;
  auto spec = setting_spec::string("table_path", "tune table", "/tmp/t.json");
  spec.validator = [](const setting_value& v) -> std::string {
    return std::get<std::string>(v).empty() ? "the path is empty" : "";
  };
  auto s = r.register_setting(std::move(spec));
  auto b = r.register_setting(setting_spec::boolean("verbose", "trace", false));
  CHECK(error_from([&] { r.set_setting("table_path", std::string()); }).message() ==
        "setting 'table_path': the path is empty");
  CHECK(error_from([&] { r.set_setting("verbose", std::int64_t{1}); }).message() ==
        "setting 'verbose' is a bool; got an integer");
  r.set_setting("verbose", true);
  CHECK(b.bool_value());
  CHECK(error_from([&] { r.set_setting("nope", true); }).code() == status::not_found);
  const auto list = r.list_settings();
  REQUIRE(list.size() == 2);
  CHECK(list[0].name == "table_path");
  CHECK(list[1].name == "verbose");
}

TEST_CASE("settings whose spec fails its own checks, or whose name is taken, are refused",
          "[control][settings]") {
  control_registry r;
  CHECK(error_from([&] {
          (void)r.register_setting(setting_spec::integer("n", "", 0, 1, 2));
        }).code() == status::invalid_arguments);
  CHECK(error_from([&] {
          (void)r.register_setting(setting_spec::choice("m", "", "x", {"a"}));
        }).code() == status::invalid_arguments);
  CHECK(error_from([&] {
          (void)r.register_setting(setting_spec::boolean("Bad Name", "", true));
        }).code() == status::invalid_arguments);
  auto a = r.register_setting(setting_spec::boolean("b", "", true));
  CHECK(error_from([&] {
          (void)r.register_setting(setting_spec::boolean("b", "", true));
        }).code() == status::already_exists);
  a.reset();
  CHECK(error_from([&] { (void)r.get_setting("b"); }).code() == status::not_found);
}

TEST_CASE("an on_change that throws leaves the old value", "[control][settings]") {
  control_registry r;
  auto spec = setting_spec::integer("n", "", 1, 0, 10);
  spec.on_change = [](const setting_value&) { throw std::runtime_error("cannot apply"); };
  auto reg = r.register_setting(std::move(spec));
  CHECK_THROWS_AS(r.set_setting("n", std::int64_t{2}), std::runtime_error);
  CHECK(reg.int_value() == 1);
}

TEST_CASE("events are numbered from 1, read after a sequence number, oldest first",
          "[control][events]") {
  control_registry r;
  auto page = r.events_since(0);
  CHECK(page.events.empty());
  CHECK(page.next == 0);
  r.record_event({.kind = "create", .name = "matmul", .source = "compile", .duration_ms = 1.5});
  r.record_event({.kind = "create", .name = "conv", .source = "memory", .detail = "3x3"});
  page = r.events_since(0);
  REQUIRE(page.events.size() == 2);
  CHECK(page.events[0].seq == 1);
  CHECK(page.events[0].name == "matmul");
  CHECK(page.events[0].time_unix_ms > 0);
  CHECK(page.events[1].detail == "3x3");
  CHECK(page.next == 2);
  page = r.events_since(1);
  REQUIRE(page.events.size() == 1);
  CHECK(page.events[0].seq == 2);
  page = r.events_since(99);  // a client from before a restart resynchronizes
  CHECK(page.events.empty());
  CHECK(page.next == 2);
}

TEST_CASE("the event ring keeps only the newest events", "[control][events]") {
  control_registry r;
  const std::size_t total = primcache::event_ring_capacity + 10;
  for (std::size_t i = 0; i < total; ++i) r.record_event({.kind = "create", .name = "n"});
  const auto page = r.events_since(0);
  REQUIRE(page.events.size() == primcache::event_ring_capacity);
  CHECK(page.events.front().seq == 11);
  CHECK(page.events.back().seq == total);
}
