// POST /api/v1/caches/{name}/capacity/preview: what a capacity would drop,
// as the cache tells through control; the same token and body rules as the
// capacity POST; changes nothing; "known": false for caches without a
// preview.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <string>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "primcache/admin/handle_request.hpp"
#include "primcache/base/error.hpp"
#include "test_support.hpp"

namespace http = boost::beast::http;
namespace json = boost::json;
using primcache::admin_request;
using primcache::admin_response;

namespace {

// The RFC's rule, as the constant caches have it: the first setting and any
// decrease empty the cache; refuses capacities above 1000.
struct flushing_cache : admin_test::toy_cache {
  primcache::capacity_preview preview_capacity(std::uint64_t n) const {
    previews.fetch_add(1);
    if (n > 1000) throw primcache::error(primcache::status::invalid_arguments, "1000 MB at most");
    if (n >= capacity()) return {};
    return {.flushes = true, .entries = size(), .bytes = size() << 20};
  }
  mutable std::atomic<int> previews{0};
};

struct preview_fixture : admin_test::fixture {
  flushing_cache flushing;
  primcache::cache_registration r3 =
      registry.register_cache("constant.gpu.0", flushing, primcache::capacity_unit::megabytes);
  primcache::admin_context ctx{&registry, "s3cret"};

  admin_response run(http::verb method, const std::string& target, const std::string& body = "",
                     const char* token = "s3cret") {
    admin_request req{method, target, 11};
    if (token != nullptr) req.set(http::field::authorization, std::string("Bearer ") + token);
    req.body() = body;
    req.prepare_payload();
    return primcache::handle_request(req, ctx);
  }
  admin_response preview(const std::string& name, const std::string& body,
                         const char* token = "s3cret") {
    return run(http::verb::post, "/api/v1/caches/" + name + "/capacity/preview", body, token);
  }
};

json::value parsed(const admin_response& res) {
  return json::parse(res.body());
}

std::string error_of(const admin_response& res) {
  const json::value v = parsed(res);
  const auto& s = v.at("error").as_string();
  return std::string(s.data(), s.size());
}

}  // namespace

TEST_CASE_METHOD(preview_fixture, "a preview tells what a capacity would drop and changes nothing",
                 "[admin][handler][preview]") {
  auto res = preview("constant.gpu.0", R"({"capacity": 100})");
  REQUIRE(res.result() == http::status::ok);
  CHECK(res[http::field::content_type] == "application/json");
  auto v = parsed(res);
  CHECK(v.at("name") == "constant.gpu.0");
  CHECK(v.at("unit") == "MB");
  CHECK(v.at("capacity") == 1024);
  CHECK(v.at("size") == 17);
  CHECK(v.at("new_capacity") == 100);
  CHECK(v.at("known") == true);
  CHECK(v.at("flushes") == true);
  CHECK(v.at("entries") == 17);
  CHECK(v.at("bytes") == 17 << 20);
  CHECK(flushing.capacity() == 1024);
  CHECK(flushing.size() == 17);

  v = parsed(preview("constant.gpu.0", R"({"capacity": 1000})"));  // below: still a decrease
  CHECK(v.at("flushes") == true);
  flushing.capacity_ = 10;
  v = parsed(preview("constant.gpu.0", R"({"capacity": 20})"));  // an increase keeps
  CHECK(v.at("known") == true);
  CHECK(v.at("flushes") == false);
  CHECK(v.at("entries") == 0);
  CHECK(v.at("bytes") == 0);
  CHECK(flushing.capacity() == 10);
}

TEST_CASE_METHOD(preview_fixture, "a cache without a preview answers known: false",
                 "[admin][handler][preview]") {
  const auto res = preview("primitive", R"({"capacity": 8})");
  REQUIRE(res.result() == http::status::ok);
  const auto v = parsed(res);
  CHECK(v.at("known") == false);
  CHECK(v.at("flushes").is_null());
  CHECK(v.at("entries").is_null());
  CHECK(v.at("bytes").is_null());
  CHECK(v.at("size") == 17);
  CHECK(v.at("new_capacity") == 8);
  CHECK(primitive.capacity() == 1024);
  CHECK(primitive.size() == 17);
}

TEST_CASE_METHOD(preview_fixture, "a preview needs the token, like every POST",
                 "[admin][handler][preview][auth]") {
  auto res = preview("constant.gpu.0", R"({"capacity": 1})", nullptr);
  CHECK(res.result() == http::status::unauthorized);
  CHECK(res[http::field::www_authenticate] == "Bearer");
  CHECK(preview("constant.gpu.0", R"({"capacity": 1})", "wrong").result() ==
        http::status::unauthorized);
  CHECK(preview("nope", R"({"capacity": 1})", nullptr).result() ==
        http::status::unauthorized);  // says nothing about names without the token
  CHECK(flushing.previews == 0);
}

TEST_CASE_METHOD(preview_fixture, "a preview refuses what the capacity POST refuses",
                 "[admin][handler][preview]") {
  auto res = preview("constant.gpu.0", R"({"capacity": -1})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(error_of(res) == "capacity -1 is negative; it must be >= 0");
  res = preview("constant.gpu.0", R"({"capacity": 2.5})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(error_of(res) == "capacity must be an integer; got 2.5E0");
  res = preview("constant.gpu.0", R"({"capacity": 9007199254740993})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(preview("constant.gpu.0", "{").result() == http::status::bad_request);
  CHECK(error_of(preview("constant.gpu.0", "{}")) == "the body has no \"capacity\" field");
  CHECK(flushing.previews == 0);
  // The cache's own refusal: its status, its message.
  res = preview("constant.gpu.0", R"({"capacity": 5000})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(error_of(res) == "1000 MB at most");
  res = preview("nope", R"({"capacity": 1})");
  CHECK(res.result() == http::status::not_found);
  CHECK(error_of(res) == "cache 'nope' is not registered");
}

TEST_CASE_METHOD(preview_fixture, "a GET on the preview path is 405 and previews nothing",
                 "[admin][handler][preview]") {
  const auto res = run(http::verb::get, "/api/v1/caches/constant.gpu.0/capacity/preview");
  CHECK(res.result() == http::status::method_not_allowed);
  CHECK(res[http::field::allow] == "POST");
  CHECK(flushing.previews == 0);
}
