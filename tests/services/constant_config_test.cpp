// primcached and the constant tensor caches: the config's constant_caches
// (capacity per engine kind, through the runtime's API), constant.cpu
// registered at start, and the workloads' weights marked constant; and the
// config's persistent_cache section.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "config.hpp"
#include "embedded_defaults.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/runtime/backend/primitive_impl.hpp"
#include "primcache/runtime/runtime.hpp"
#include "workload.hpp"

namespace {

using namespace primcache;
using namespace primcache::primcached;

std::string refusal(const std::string& text) {
  try {
    apply_capacities(load_config(text, "primcached.json", ""));
  } catch (const error& e) {
    CHECK(e.code() == status::invalid_arguments);
    return e.message();
  }
  FAIL("the config was accepted: " << text);
  return "";
}

}  // namespace

TEST_CASE("The config sets the constant tensor caches' capacities by kind",
          "[services][config][constant]") {
  const daemon_config c = load_config(R"({"constant_caches": {"cpu": 300, "gpu": "unlimited"}})",
                                      "primcached.json", "");
  REQUIRE(c.constant_caches.size() == 2);
  CHECK(c.constant_caches[0] == std::pair{engine_kind::cpu, std::int64_t{300}});
  CHECK(c.constant_caches[1] == std::pair{engine_kind::gpu, constant_tensor_cache_unlimited});
  apply_capacities(c);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 300);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::gpu) == constant_tensor_cache_unlimited);
  // constant.cpu is registered from the start, so the console shows it.
  CHECK(control().find_cache("constant.cpu").capacity() == 300);
  // And the generic "caches" can name it too (after the kinds are set).
  apply_capacities(load_config(R"({"constant_caches": {"cpu": 300},
      "caches": {"constant.cpu": 400}})",
                               "primcached.json", ""));
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 400);
}

TEST_CASE("The embedded and shipped configs give the CPU constant cache a capacity",
          "[services][config][constant]") {
  const daemon_config c = load_config(embedded_config(), "primcached.json", "");
  REQUIRE(c.constant_caches.size() == 1);
  CHECK(c.constant_caches[0].first == engine_kind::cpu);
  CHECK(c.constant_caches[0].second > 0);
}

TEST_CASE("A malformed constant_caches is refused naming the field",
          "[services][config][constant]") {
  CHECK(refusal(R"({"constant_caches": {"tpu": 1}})") ==
        "primcached.json: constant_caches.tpu: unknown engine kind (expected cpu or gpu)");
  CHECK(refusal(R"({"constant_caches": {"cpu": -1}})") ==
        "primcached.json: constant_caches.cpu: expected an integer in [0, " +
            std::to_string(max_constant_tensor_cache_capacity) + "]");
  CHECK(refusal(R"({"constant_caches": {"cpu": "lots"}})") ==
        "primcached.json: constant_caches.cpu: expected MB (an integer >= 0) or \"unlimited\"");
  CHECK(refusal(R"({"constant_caches": {"cpu": 1.5}})") ==
        "primcached.json: constant_caches.cpu: expected an integer");
  CHECK(refusal(R"({"constant_caches": {"cpu": true}})") ==
        "primcached.json: constant_caches.cpu: expected MB (an integer >= 0) or \"unlimited\"");
  CHECK(refusal(R"({"constant_caches": [1]})") ==
        "primcached.json: constant_caches: expected an object");
}

TEST_CASE("Workload weights are constant unless an entry says otherwise",
          "[services][workload][constant]") {
  const workload w = load_workload(R"({"primitives": [
      {"kind": "matmul", "shapes": {"src": [4, 8], "weights": [8, 2]}},
      {"kind": "matmul", "shapes": {"src": [4, 8], "weights": [8, 2]},
       "attributes": {"constant_weights": false}},
      {"kind": "convolution", "shapes": {"src": [1, 16, 8, 8], "weights": [16, 16, 3, 3]},
       "padding": [1, 1]}]})",
                                   "w.json");
  REQUIRE(w.primitives.size() == 3);
  CHECK(w.primitives[0].constant_weights);
  CHECK_FALSE(w.primitives[1].constant_weights);
  CHECK(w.primitives[2].constant_weights);
  const engine cpu(engine_kind::cpu, 0);
  const auto constant = [&](std::size_t i) {
    return backend::impl_of(make_primitive_desc(w.primitives[i], cpu))
        .attr()
        .get_constant_weights();
  };
  CHECK(constant(0));
  CHECK_FALSE(constant(1));
  CHECK(constant(2));

  // Executed, the constant matmul's weights go to constant.cpu once.
  set_constant_tensor_cache_capacity(engine_kind::cpu, 0);  // empty
  set_constant_tensor_cache_capacity(engine_kind::cpu, 64);
  const primitive_desc pd = make_primitive_desc(w.primitives[0], cpu);
  const primitive prim = make_primitive(pd);
  stream strm(cpu);
  primitive::args args;
  for (int arg : {PRIMCACHE_ARG_SRC, PRIMCACHE_ARG_WEIGHTS, PRIMCACHE_ARG_DST}) {
    memory m(pd.query_md(arg), cpu);
    std::memset(m.get_data_handle(), 0, pd.query_md(arg).size_bytes());
    args.emplace(arg, m);
  }
  constant_tensor_cache& cache = constant_tensor_cache_for(engine_kind::cpu);
  const auto before = cache.stats();
  prim.execute(strm, args);
  prim.execute(strm, args);
  strm.wait();
  CHECK(cache.tensor_count() == 1);
  CHECK(cache.stats().misses == before.misses + 1);
  CHECK(cache.stats().hits == before.hits + 1);

  try {
    (void)load_workload(R"({"primitives": [{"kind": "eltwise", "algorithm": "relu",
        "shapes": {"src": [4, 8]}, "attributes": {"constant_weights": true}}]})",
                        "w.json");
    FAIL("accepted");
  } catch (const error& e) {
    CHECK(e.message() ==
          "w.json: primitives[0].attributes.constant_weights: only matmul and convolution have "
          "weights");
  }
  try {
    (void)load_workload(R"({"primitives": [{"kind": "matmul",
        "shapes": {"src": [4, 8], "weights": [8, 2]}, "attributes": {"constant_weights": 1}}]})",
                        "w.json");
    FAIL("accepted");
  } catch (const error& e) {
    CHECK(e.message() ==
          "w.json: primitives[0].attributes.constant_weights: expected true or false");
  }
}

// The persistent cache section lives beside the constant caches' in the
// config (and in this file, to keep tests/services/CMakeLists.txt as it is).
TEST_CASE("The config's persistent_cache is read, checked and attached",
          "[services][config][persistent]") {
  const daemon_config c = load_config(
      R"({"persistent_cache": {"dir": "pc", "capacity_mb": 64, "redis": "redis://127.0.0.1:6379/x"}})",
      "primcached.json", "/etc/primcache");
  REQUIRE(c.persistent.has_value());
  CHECK(c.persistent->dir == "/etc/primcache/pc");
  CHECK(c.persistent->capacity_mb == 64);
  CHECK(c.persistent->redis == "redis://127.0.0.1:6379/x");
  CHECK_FALSE(load_config("{}", "primcached.json", "").persistent.has_value());
  CHECK(attach_persistent_cache(load_config("{}", "primcached.json", "")).empty());  // nothing

  CHECK(refusal(R"({"persistent_cache": {}})") ==
        "primcached.json: persistent_cache: expected \"dir\", \"redis\" or both");
  CHECK(refusal(R"({"persistent_cache": {"dir": ""}})") ==
        "primcached.json: persistent_cache.dir: expected a directory path (leave the field out "
        "for none)");
  CHECK(refusal(R"({"persistent_cache": {"redis": "http://x"}})") ==
        "primcached.json: persistent_cache.redis: expected a redis://host:port/prefix URL");
  CHECK(refusal(R"({"persistent_cache": {"dir": "/tmp/x", "capacity_mb": -1}})") ==
        "primcached.json: persistent_cache.capacity_mb: expected an integer in [0, "
        "17592186044416]");
  CHECK_THAT(refusal(R"({"persistent_cache": {"path": "/tmp/x"}})"),
             Catch::StartsWith("primcached.json: persistent_cache.path: unknown field"));

  // Attached: the runtime registers it in control as "persistent"; detached
  // again at the end. A directory that cannot be made is a reason, not a
  // crash, and leaves nothing attached.
  char tmpl[] = "/tmp/primcached_pc_XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = std::string(tmpl) + "/store";
  const daemon_config good =
      load_config(R"({"persistent_cache": {"dir": ")" + dir + R"(", "capacity_mb": 16}})",
                  "primcached.json", "");
  CHECK(attach_persistent_cache(good).empty());
  CHECK(control().find_cache("persistent").capacity() == 16);
  detach_persistent_cache();
  const daemon_config bad =
      load_config(R"({"persistent_cache": {"dir": "/proc/version/store"}})", "primcached.json", "");
  CHECK_THAT(attach_persistent_cache(bad),
             Catch::StartsWith("primcached.json: persistent_cache: "));
  CHECK_THROWS(control().find_cache("persistent"));
  std::filesystem::remove_all(tmpl);
}
