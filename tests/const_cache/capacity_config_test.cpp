// PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY: good strings apply, and each
// malformed part is reported with its reason and ignored for its kind only.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "primcache/base/env.hpp"
#include "primcache/const_cache/capacity_config.hpp"
#include "primcache/const_cache/constant_tensor_cache.hpp"

using primcache::cache_policy;
using primcache::constant_capacity_config;
using primcache::parse_constant_capacity;

namespace {

bool mentions(const std::string& message, std::string_view what) {
  return message.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("the RFC's form parses", "[const_cache][env]") {
  const constant_capacity_config c = parse_constant_capacity("cpu:10240;gpu:2048");
  CHECK(c.messages.empty());
  REQUIRE(c.entries.size() == 2);
  CHECK(c.entries[0].kind == "cpu");
  CHECK(c.entries[0].megabytes == 10240);
  CHECK_FALSE(c.entries[0].policy);
  CHECK(c.entries[1].kind == "gpu");
  CHECK(c.entries[1].megabytes == 2048);
}

TEST_CASE("a kind may name its policy", "[const_cache][env]") {
  const auto c = parse_constant_capacity("cpu:10240:lru;gpu:0:no_evict");
  CHECK(c.messages.empty());
  REQUIRE(c.entries.size() == 2);
  CHECK(c.entries[0].policy == cache_policy::lru);
  CHECK(c.entries[1].megabytes == 0);
  CHECK(c.entries[1].policy == cache_policy::no_evict);
}

TEST_CASE("spaces around parts and fields are ignored; empty means unset", "[const_cache][env]") {
  const auto c = parse_constant_capacity(" cpu : 1 : lru ; gpu:2 ");
  CHECK(c.messages.empty());
  REQUIRE(c.entries.size() == 2);
  CHECK(c.entries[0].megabytes == 1);
  CHECK(c.entries[0].policy == cache_policy::lru);
  CHECK(parse_constant_capacity("").entries.empty());
  CHECK(parse_constant_capacity("  ").messages.empty());
}

TEST_CASE("the largest capacity parses; one more is too large", "[const_cache][env]") {
  const std::string max = std::to_string(primcache::constant_tensor_cache::max_megabytes);
  const auto ok = parse_constant_capacity("cpu:" + max);
  REQUIRE(ok.entries.size() == 1);
  CHECK(ok.entries[0].megabytes == primcache::constant_tensor_cache::max_megabytes);
  const std::string over = std::to_string(primcache::constant_tensor_cache::max_megabytes + 1);
  const auto bad = parse_constant_capacity("cpu:" + over);
  CHECK(bad.entries.empty());
  REQUIRE(bad.messages.size() == 1);
  CHECK(mentions(bad.messages[0], "too large"));
}

TEST_CASE("a malformed part is reported and ignored for its kind only", "[const_cache][env]") {
  struct bad_case {
    std::string text;
    std::string reason;
  };
  const bad_case bad = GENERATE(values<bad_case>({
      {"tpu:5", "unknown engine kind 'tpu' (known: cpu, gpu)"},
      {"cpu:-1", "size '-1' is negative"},
      {"cpu:abc", "size 'abc' is not a number of MB"},
      {"cpu:1e3", "size '1e3' is not a number of MB"},
      {"cpu:+5", "size '+5' is not a number of MB"},
      {"cpu:--1", "size '--1' is not a number of MB"},
      {"cpu:99999999999999999999999", "is too large"},
      {"cpu:10:fifo", "unknown policy 'fifo' (known: lru, no_evict"},
      {"cpu:10:", "the policy is empty"},
      {"cpu:10:lru:x", "too many ':'"},
      {"cpu", "no size"},
      {"cpu:", "the size is empty"},
      {":10", "the engine kind is empty"},
  }));
  CAPTURE(bad.text);
  const auto c = parse_constant_capacity(bad.text + ";gpu:7");
  REQUIRE(c.messages.size() == 1);
  CHECK(mentions(c.messages[0], bad.reason));
  CHECK(mentions(c.messages[0], "part 1"));
  REQUIRE(c.entries.size() == 1);  // the other kind still applies
  CHECK(c.entries[0].kind == "gpu");
  CHECK(c.entries[0].megabytes == 7);
}

TEST_CASE("stray and doubled separators are reported; the parts around them apply",
          "[const_cache][env]") {
  const std::string text =
      GENERATE(as<std::string>{}, "cpu:1;;gpu:7", ";cpu:1;gpu:7", "cpu:1;gpu:7;");
  CAPTURE(text);
  const auto c = parse_constant_capacity(text);
  REQUIRE(c.messages.size() == 1);
  CHECK(mentions(c.messages[0], "stray or doubled ';'"));
  REQUIRE(c.entries.size() == 2);
  CHECK(c.entries[0].megabytes == 1);
  CHECK(c.entries[1].megabytes == 7);
}

TEST_CASE("a kind given twice keeps its default", "[const_cache][env]") {
  const std::string text = GENERATE(as<std::string>{}, "cpu:1;cpu:2;gpu:7", "cpu:x;cpu:2;gpu:7");
  CAPTURE(text);
  const auto c = parse_constant_capacity(text);
  CHECK_FALSE(c.messages.empty());
  CHECK(mentions(c.messages.back(), "cpu is given more than once; cpu keeps its default"));
  REQUIRE(c.entries.size() == 1);
  CHECK(c.entries[0].kind == "gpu");
}

TEST_CASE("the known kinds are the caller's", "[const_cache][env]") {
  const std::string_view kinds[] = {"cpu", "gpu", "npu"};
  const auto c = parse_constant_capacity("npu:3", kinds);
  CHECK(c.messages.empty());
  REQUIRE(c.entries.size() == 1);
  CHECK(c.entries[0].kind == "npu");
}

TEST_CASE("policy names come from the cache library", "[const_cache][env]") {
  CHECK(primcache::constant_cache_policy_from_string("lru") == cache_policy::lru);
  CHECK(primcache::constant_cache_policy_from_string("no_evict") == cache_policy::no_evict);
  CHECK_FALSE(primcache::constant_cache_policy_from_string("LRU"));
  CHECK_FALSE(primcache::constant_cache_policy_from_string("unknown"));
  CHECK(mentions(primcache::constant_cache_policy_names(), "lru, no_evict"));
}

TEST_CASE("the variable is read once and its problems reported once", "[const_cache][env]") {
  ::setenv(primcache::constant_capacity_env, "cpu:64:lru;tpu:1;gpu:-3", 1);
  const auto c = primcache::read_constant_capacity_env();
  const auto again = primcache::read_constant_capacity_env();
  ::unsetenv(primcache::constant_capacity_env);
  REQUIRE(c.entries.size() == 1);
  CHECK(c.entries[0].kind == "cpu");
  CHECK(c.messages.size() == 2);
  CHECK(again.messages.size() == 2);
  int reports = 0;
  for (const std::string& r : primcache::env_reports()) {
    if (!mentions(r, primcache::constant_capacity_env)) continue;
    ++reports;
    CHECK(mentions(r, "unknown engine kind 'tpu'"));
    CHECK(mentions(r, "size '-3' is negative"));
  }
  CHECK(reports == 1);
  CHECK(primcache::read_constant_capacity_env().entries.empty());  // unset
}
