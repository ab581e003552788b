// PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY through the runtime's API: read
// once, before any setting; a malformed part leaves its kind at the default;
// the API wins. CTest runs this binary with the variable set (see
// CMakeLists.txt); without it the case fails.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "primcache/runtime/constant_cache.hpp"

using primcache::engine_kind;
using primcache::get_constant_tensor_cache_capacity;

TEST_CASE("the variable sets the default capacities and the API wins over it", "[constant][env]") {
  // Meant for CTest, which sets the variable; run by hand it says so and fails.
  const char* value = std::getenv("PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY");
  INFO("run with PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY='cpu:64;gpu:-1' (as CTest does)");
  REQUIRE(value != nullptr);
  REQUIRE(std::string(value) == "cpu:64;gpu:-1");
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 64);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::gpu) ==
        primcache::constant_tensor_cache_unlimited);  // malformed: its default
  CHECK(primcache::constant_tensor_cache_for(engine_kind::cpu).capacity() == 64);

  ::setenv("PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY", "cpu:1", 1);  // read once: not seen
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 64);

  primcache::set_constant_tensor_cache_capacity(engine_kind::cpu, 128);  // the API wins
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 128);
  primcache::set_constant_tensor_cache(0);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::cpu) == 0);
  CHECK(get_constant_tensor_cache_capacity(engine_kind::gpu) == 0);
}
