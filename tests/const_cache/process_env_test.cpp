// constant_caches() applies PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY once,
// when the process's set is made; later settings win and later changes of
// the variable do nothing. Alone in its binary (see CMakeLists.txt).
#include <catch2/catch.hpp>

#include <cstdlib>

#include "primcache/const_cache/constant_tensor_caches.hpp"
#include "primcache/control/registry.hpp"

using primcache::cache_policy;
using primcache::constant_tensor_cache;

TEST_CASE("the process's set applies the variable once, when made", "[const_cache][env]") {
  ::setenv(primcache::constant_capacity_env, "cpu:64:lru;gpu:32", 1);
  primcache::constant_tensor_caches& caches = primcache::constant_caches();
  CHECK(caches.capacity("cpu") == 64);
  CHECK(caches.policy("cpu") == cache_policy::lru);
  CHECK(caches.capacity("gpu") == 32);
  CHECK(caches.device("cpu").capacity() == 64);
  CHECK(caches.device("gpu.0").capacity() == 32);
  CHECK(primcache::control().find_cache("constant.cpu").capacity() == 64);

  // Read once: a later value is not seen.
  ::setenv(primcache::constant_capacity_env, "cpu:1", 1);
  CHECK(primcache::constant_caches().capacity("cpu") == 64);
  ::unsetenv(primcache::constant_capacity_env);

  // A setting wins over it.
  caches.set_capacity("cpu", 128);
  CHECK(caches.capacity("cpu") == 128);
  CHECK(caches.device("cpu").capacity() == 128);
}
