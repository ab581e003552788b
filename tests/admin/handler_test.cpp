#include <catch2/catch.hpp>

#include <string>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "primcache/admin/handle_request.hpp"
#include "test_support.hpp"

namespace http = boost::beast::http;
namespace json = boost::json;
using primcache::admin_request;
using primcache::admin_response;

namespace {

struct handler_fixture : admin_test::fixture {
  primcache::admin_context ctx{&registry, "s3cret"};

  admin_response run(http::verb method, const std::string& target, const std::string& body = "",
                     const char* token = "s3cret") {
    admin_request req{method, target, 11};
    if (token != nullptr) req.set(http::field::authorization, std::string("Bearer ") + token);
    req.body() = body;
    req.prepare_payload();
    return primcache::handle_request(req, ctx);
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

TEST_CASE_METHOD(handler_fixture, "GET /api/v1/caches lists every cache by name with its stats",
                 "[admin][handler]") {
  const auto res = run(http::verb::get, "/api/v1/caches");
  REQUIRE(res.result() == http::status::ok);
  CHECK(res[http::field::content_type] == "application/json");
  const auto caches = parsed(res).at("caches").as_array();
  REQUIRE(caches.size() == 2);
  CHECK(caches[0].at("name") == "constant.cpu");
  CHECK(caches[0].at("unit") == "bytes");
  CHECK(caches[0].at("weight_bytes") == 4096);
  CHECK(caches[0].at("extra").at("disk_reads") == 9);
  const auto& p = caches[1];
  CHECK(p.at("name") == "primitive");
  CHECK(p.at("capacity") == 1024);
  CHECK(p.at("size") == 17);
  CHECK(p.at("weight_bytes").is_null());
  CHECK(p.at("stats").at("hits") == 5);
  CHECK(p.at("stats").at("misses") == 2);
  CHECK(p.at("stats").at("waits") == 1);
  CHECK(p.at("stats").at("evictions") == 3);
  CHECK(p.at("stats").at("failures") == 0);
  CHECK(p.at("extra").as_object().empty());
}

TEST_CASE_METHOD(handler_fixture, "a capacity POST changes the cache and returns it",
                 "[admin][handler]") {
  const auto res = run(http::verb::post, "/api/v1/caches/primitive/capacity", R"({"capacity": 8})");
  REQUIRE(res.result() == http::status::ok);
  CHECK(parsed(res).at("capacity") == 8);
  CHECK(parsed(res).at("size") == 8);
  CHECK(primitive.capacity() == 8);
  CHECK(run(http::verb::post, "/api/v1/caches/primitive/capacity",
            R"({"capacity": 9007199254740992})")
            .result() == http::status::ok);
}

TEST_CASE_METHOD(handler_fixture, "bad capacities are refused with 400 and a reason",
                 "[admin][handler]") {
  const auto post = [&](const std::string& body) {
    return run(http::verb::post, "/api/v1/caches/primitive/capacity", body);
  };
  auto res = post(R"({"capacity": -1})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(error_of(res) == "capacity -1 is negative; it must be >= 0");
  res = post(R"({"capacity": 1.5})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(error_of(res) == "capacity must be an integer; got 1.5E0");
  CHECK(post(R"({"capacity": "10"})").result() == http::status::bad_request);
  res = post(R"({"capacity": 9007199254740993})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(error_of(res).find("out of range") != std::string::npos);
  CHECK(post(R"({"capacity": 18446744073709551616})").result() == http::status::bad_request);
  res = post(R"({"capacity": )");
  CHECK(res.result() == http::status::bad_request);
  CHECK(error_of(res).starts_with("the body is not valid JSON"));
  CHECK(error_of(post("[1]")) == "the body must be a JSON object");
  CHECK(error_of(post("{}")) == "the body has no \"capacity\" field");
  CHECK(primitive.capacity() == 1024);
}

TEST_CASE_METHOD(handler_fixture,
                 "a body with a key given twice is refused with 400 naming the key",
                 "[admin][handler]") {
  // Boost.JSON keeps the last: this set the capacity to 2.
  auto res = run(http::verb::post, "/api/v1/caches/primitive/capacity",
                 R"({"capacity": 8, "capacity": 2})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(res[http::field::content_type] == "application/json");
  CHECK(error_of(res) == "the body has the key \"capacity\" twice");
  CHECK(primitive.capacity() == 1024);
  // Compared unescaped; in any object of the body; for every POST that reads one.
  res = run(http::verb::post, "/api/v1/caches/primitive/capacity",
            R"({"capacity": 8, "\u0063apacity": 2})");
  CHECK(error_of(res) == "the body has the key \"capacity\" twice");
  res = run(http::verb::post, "/api/v1/caches/primitive/capacity",
            R"({"capacity": 8, "note": {"by": "a", "by": "b"}})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(error_of(res) == "the body has the key \"by\" twice (in /note)");
  CHECK(primitive.capacity() == 1024);
  res = run(http::verb::post, "/api/v1/switches/tune", R"({"on": true, "on": false})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(error_of(res) == "the body has the key \"on\" twice");
  CHECK_FALSE(tune.on());
  res = run(http::verb::post, "/api/v1/settings/threads", R"({"value": 8, "value": 9})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(error_of(res) == "the body has the key \"value\" twice");
  CHECK(threads.int_value() == 4);
}

TEST_CASE_METHOD(handler_fixture, "flush reports how many entries went", "[admin][handler]") {
  const auto res = run(http::verb::post, "/api/v1/caches/primitive/flush");
  REQUIRE(res.result() == http::status::ok);
  CHECK(parsed(res).at("flushed_entries") == 17);
  CHECK(parsed(res).at("cache").at("size") == 0);
}

TEST_CASE_METHOD(handler_fixture, "POSTs need the exact bearer token in the Authorization header",
                 "[admin][handler][auth]") {
  auto res = run(http::verb::post, "/api/v1/caches/primitive/flush", "", nullptr);
  CHECK(res.result() == http::status::unauthorized);
  CHECK(res[http::field::www_authenticate] == "Bearer");
  CHECK(run(http::verb::post, "/api/v1/caches/primitive/flush", "", "s3creT").result() ==
        http::status::unauthorized);
  CHECK(run(http::verb::post, "/api/v1/caches/primitive/flush", "", "s3cret2").result() ==
        http::status::unauthorized);
  CHECK(run(http::verb::post, "/api/v1/caches/primitive/flush", "", "").result() ==
        http::status::unauthorized);
  admin_request req{http::verb::post, "/api/v1/caches/primitive/flush?token=s3cret", 11};
  req.set(http::field::authorization, "Basic s3cret");
  CHECK(primcache::handle_request(req, ctx).result() == http::status::unauthorized);
  CHECK(primitive.size() == 17);
  // Before the name is looked at: an invalid name (404 with the token) is
  // 401 without it.
  CHECK(run(http::verb::post, "/api/v1/caches/Bad%20Name/flush").result() ==
        http::status::not_found);
  CHECK(run(http::verb::post, "/api/v1/caches/Bad%20Name/flush", "", nullptr).result() ==
        http::status::unauthorized);
  CHECK(run(http::verb::post, "/api/v1/switches/Nope", R"({"on":true})", nullptr).result() ==
        http::status::unauthorized);
}

TEST_CASE_METHOD(handler_fixture, "a GET on a mutating path is 405 and mutates nothing",
                 "[admin][handler]") {
  const auto res = run(http::verb::get, "/api/v1/caches/primitive/flush");
  CHECK(res.result() == http::status::method_not_allowed);
  CHECK(res[http::field::allow] == "POST");
  CHECK(primitive.size() == 17);
  CHECK(run(http::verb::delete_, "/api/v1/caches").result() == http::status::method_not_allowed);
  CHECK(run(http::verb::post, "/healthz").result() == http::status::method_not_allowed);
}

TEST_CASE_METHOD(handler_fixture, "unknown routes and names are 404", "[admin][handler]") {
  CHECK(run(http::verb::get, "/api/v1/nope").result() == http::status::not_found);
  auto res = run(http::verb::get, "/api/v1/caches/nope");
  CHECK(res.result() == http::status::not_found);
  CHECK(error_of(res) == "cache 'nope' is not registered");
  CHECK(run(http::verb::post, "/api/v1/caches/nope/capacity", R"({"capacity":1})").result() ==
        http::status::not_found);
  CHECK(run(http::verb::post, "/api/v1/switches/nope", R"({"on":true})").result() ==
        http::status::not_found);
  CHECK(run(http::verb::post, "/api/v1/settings/nope", R"({"value":1})").result() ==
        http::status::not_found);
  CHECK(run(http::verb::get, "/api/v1/caches/%2e%2e").result() == http::status::not_found);
  CHECK(run(http::verb::get, "/api/v1/caches/Primitive").result() == http::status::not_found);
}

TEST_CASE_METHOD(handler_fixture, "asset paths come only from the in-binary table",
                 "[admin][handler][assets]") {
  const auto index = run(http::verb::get, "/");
  CHECK(index.result() == http::status::ok);
  CHECK(index[http::field::content_type].starts_with("text/html"));
  for (const char* path :
       {"/assets/../../etc/passwd", "/assets/..%2f..%2fetc%2fpasswd", "/../etc/passwd", "/assets/",
        "/etc/passwd", "//etc/passwd", "/assets/%2e%2e/CMakeLists.txt"}) {
    INFO(path);
    CHECK(run(http::verb::get, path).result() == http::status::not_found);
  }
}

TEST_CASE_METHOD(handler_fixture, "switches are listed and flipped", "[admin][handler]") {
  auto res = run(http::verb::get, "/api/v1/switches");
  CHECK(parsed(res).at("switches").as_array().at(0).at("on") == false);
  res = run(http::verb::post, "/api/v1/switches/tune", R"({"on": true})");
  REQUIRE(res.result() == http::status::ok);
  CHECK(parsed(res).at("on") == true);
  CHECK(parsed(res).at("initial") == false);
  CHECK(tune.on());
  res = run(http::verb::post, "/api/v1/switches/tune", R"({"on": 1})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(error_of(res) == "\"on\" must be true or false");
}

TEST_CASE_METHOD(handler_fixture, "settings are listed and changed, with the validator's message",
                 "[admin][handler]") {
  auto res = run(http::verb::get, "/api/v1/settings");
  const auto settings = parsed(res).at("settings").as_array();
  REQUIRE(settings.size() == 2);
  CHECK(settings[0].at("name") == "jit_mode");
  CHECK(settings[0].at("type") == "enum");
  CHECK(settings[0].at("choices").as_array().size() == 2);
  CHECK(settings[1].at("type") == "int");
  CHECK(settings[1].at("min") == 1);
  CHECK(settings[1].at("max") == 64);
  res = run(http::verb::post, "/api/v1/settings/jit_mode", R"({"value": "sync"})");
  REQUIRE(res.result() == http::status::ok);
  CHECK(parsed(res).at("value") == "sync");
  res = run(http::verb::post, "/api/v1/settings/threads", R"({"value": 100})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(error_of(res) == "setting 'threads' must be between 1 and 64; got 100");
  res = run(http::verb::post, "/api/v1/settings/threads", R"({"value": 2.5})");
  CHECK(res.result() == http::status::bad_request);
  CHECK(threads.int_value() == 4);
}

TEST_CASE_METHOD(handler_fixture, "events are read after a sequence number", "[admin][handler]") {
  auto res = run(http::verb::get, "/api/v1/events?since=1");
  REQUIRE(res.result() == http::status::ok);
  const auto v = parsed(res);
  REQUIRE(v.at("events").as_array().size() == 1);
  CHECK(v.at("events").as_array()[0].at("name") == "conv");
  CHECK(v.at("next") == 2);
  res = run(http::verb::get, "/api/v1/events");
  CHECK(parsed(res).at("events").as_array().size() == 2);
  CHECK(parsed(res).at("events").as_array()[0].at("duration_ms") == 1.5);
  CHECK(run(http::verb::get, "/api/v1/events?since=-1").result() == http::status::bad_request);
  CHECK(run(http::verb::get, "/api/v1/events?since=x").result() == http::status::bad_request);
}

TEST_CASE_METHOD(handler_fixture, "healthz and metrics answer", "[admin][handler]") {
  auto res = run(http::verb::get, "/healthz");
  CHECK(parsed(res).at("status") == "ok");
  CHECK(parsed(res).at("version") == "0.1.0");
  CHECK(parsed(res).at("uptime_seconds").is_double());
  res = run(http::verb::get, "/metrics");
  CHECK(res[http::field::content_type] == "text/plain; version=0.0.4");
  CHECK(res["X-Content-Type-Options"] == "nosniff");
  CHECK(res.body().find("primcache_cache_entries{cache=\"primitive\"} 17") != std::string::npos);
}
