// The constant tensor cache's C API (primcache_constant.h): the same rules
// as the C++ API, every error a status with a message, never a crash.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "primcache/const_cache/constant_buffer.hpp"
#include "primcache/runtime/constant_cache.hpp"
#include "primcache/runtime/primcache.h"

namespace {

bool mentions(const char* text, const std::string& part) {
  return std::string(text).find(part) != std::string::npos;
}

void add_tensor(const std::string& name) {
  primcache::constant_tensor_cache_for(primcache::engine_kind::cpu).get_or_add(42, name, 2048, [] {
    return primcache::make_constant_buffer(
        2048, [](std::size_t n) { return std::malloc(n); },
        [](void* p, std::size_t) { std::free(p); });
  });
}

}  // namespace

static_assert(PC_CONSTANT_TENSOR_CACHE_UNLIMITED == primcache::constant_tensor_cache_unlimited);

TEST_CASE("C: capacities are set, read and previewed per kind", "[constant][c_api]") {
  REQUIRE(pc_set_constant_tensor_cache_capacity(pc_engine_cpu, 512) == pc_success);
  int64_t mb = -1;
  REQUIRE(pc_get_constant_tensor_cache_capacity(pc_engine_cpu, &mb) == pc_success);
  CHECK(mb == 512);
  REQUIRE(pc_set_constant_tensor_cache_capacity(pc_engine_gpu,
                                                PC_CONSTANT_TENSOR_CACHE_UNLIMITED) == pc_success);
  REQUIRE(pc_get_constant_tensor_cache_capacity(pc_engine_gpu, &mb) == pc_success);
  CHECK(mb == PC_CONSTANT_TENSOR_CACHE_UNLIMITED);

  add_tensor("x");
  add_tensor("y");
  int flushes = -1;
  int64_t tensors = -1, bytes = -1;
  REQUIRE(pc_preview_constant_tensor_cache_capacity(pc_engine_cpu, 10, &flushes, &tensors,
                                                    &bytes) == pc_success);
  CHECK(flushes == 1);
  CHECK(tensors == 2);
  CHECK(bytes == 4096);
  REQUIRE(pc_preview_constant_tensor_cache_capacity(pc_engine_cpu, 1024, &flushes, &tensors,
                                                    &bytes) == pc_success);
  CHECK(flushes == 0);
  CHECK(tensors == 0);
  CHECK(bytes == 0);
  REQUIRE(pc_set_constant_tensor_cache_capacity(pc_engine_cpu, 1024) == pc_success);  // keeps
  CHECK(primcache::constant_tensor_cache_for(primcache::engine_kind::cpu).tensor_count() == 2);
  REQUIRE(pc_set_constant_tensor_cache_capacity(pc_engine_cpu, 10) == pc_success);  // flushes
  CHECK(primcache::constant_tensor_cache_for(primcache::engine_kind::cpu).tensor_count() == 0);
}

TEST_CASE("C: the old switch", "[constant][c_api]") {
  int flag = -1;
  REQUIRE(pc_set_constant_tensor_cache(0) == pc_success);
  REQUIRE(pc_get_constant_tensor_cache(&flag) == pc_success);
  CHECK(flag == 0);
  int64_t mb = -1;
  REQUIRE(pc_get_constant_tensor_cache_capacity(pc_engine_gpu, &mb) == pc_success);
  CHECK(mb == 0);
  REQUIRE(pc_set_constant_tensor_cache(1) == pc_success);
  REQUIRE(pc_get_constant_tensor_cache(&flag) == pc_success);
  CHECK(flag == 1);
  REQUIRE(pc_get_constant_tensor_cache_capacity(pc_engine_cpu, &mb) == pc_success);
  CHECK(mb == PC_CONSTANT_TENSOR_CACHE_UNLIMITED);
}

TEST_CASE("C: every error is a status and a message, and changes nothing", "[constant][c_api]") {
  REQUIRE(pc_set_constant_tensor_cache_capacity(pc_engine_cpu, 256) == pc_success);
  int64_t mb = 0;
  int flag = 0;
  int flushes = 0;
  int64_t tensors = 0, bytes = 0;

  CHECK(pc_set_constant_tensor_cache_capacity(pc_engine_cpu, -1) == pc_invalid_arguments);
  CHECK(mentions(pc_last_error_message(), "-1 MB is negative"));
  CHECK(pc_set_constant_tensor_cache_capacity(pc_engine_cpu, INT64_MAX - 1) ==
        pc_invalid_arguments);
  CHECK(mentions(pc_last_error_message(), "too large"));
  CHECK(pc_set_constant_tensor_cache_capacity(static_cast<pc_engine_kind_t>(3), 10) ==
        pc_invalid_arguments);
  CHECK(mentions(pc_last_error_message(), "engine kind 3"));
  CHECK(pc_set_constant_tensor_cache_capacity(static_cast<pc_engine_kind_t>(0x7ffffffe), 10) ==
        pc_invalid_arguments);
  CHECK(pc_get_constant_tensor_cache_capacity(static_cast<pc_engine_kind_t>(0), &mb) ==
        pc_invalid_arguments);
  CHECK(pc_get_constant_tensor_cache_capacity(pc_engine_cpu, nullptr) == pc_invalid_arguments);
  CHECK(mentions(pc_last_error_message(), "capacity_mb is NULL"));
  CHECK(pc_preview_constant_tensor_cache_capacity(pc_engine_cpu, -3, &flushes, &tensors, &bytes) ==
        pc_invalid_arguments);
  CHECK(pc_preview_constant_tensor_cache_capacity(pc_engine_cpu, 3, nullptr, &tensors, &bytes) ==
        pc_invalid_arguments);
  CHECK(pc_preview_constant_tensor_cache_capacity(pc_engine_cpu, 3, &flushes, nullptr, &bytes) ==
        pc_invalid_arguments);
  CHECK(pc_preview_constant_tensor_cache_capacity(pc_engine_cpu, 3, &flushes, &tensors, nullptr) ==
        pc_invalid_arguments);
  CHECK(pc_set_constant_tensor_cache(-2) == pc_invalid_arguments);
  CHECK(mentions(pc_last_error_message(), "flag -2 is negative"));
  CHECK(pc_get_constant_tensor_cache(nullptr) == pc_invalid_arguments);

  REQUIRE(pc_get_constant_tensor_cache_capacity(pc_engine_cpu, &mb) == pc_success);
  CHECK(mb == 256);
  REQUIRE(pc_get_constant_tensor_cache(&flag) == pc_success);
  CHECK(flag == 1);
}
