#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "primcache/runtime/primcache.h"
#include "primcache/runtime/version.hpp"

TEST_CASE("version() reports the library version, LLVM and the build identity",
          "[runtime][version]") {
  const primcache::version_info& v = primcache::version();
  CHECK(std::string(v.version) == PRIMCACHE_TEST_VERSION);
  CHECK(std::string(v.version) ==
        std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch));
  CHECK(std::string(v.llvm).rfind(PRIMCACHE_TEST_LLVM_MAJOR ".", 0) == 0);
  const std::string id = v.build_identity;
  CHECK(id.size() == 16);
  CHECK(id.find_first_not_of("0123456789abcdef") == std::string::npos);

  SECTION("the C API reports the same") {
    int major = -1, minor = -1, patch = -1;
    const char *version = nullptr, *llvm = nullptr, *build = nullptr;
    pc_get_version(&major, &minor, &patch, &version, &llvm, &build);
    CHECK(major == v.major);
    CHECK(minor == v.minor);
    CHECK(patch == v.patch);
    CHECK(std::strcmp(version, v.version) == 0);
    CHECK(std::strcmp(llvm, v.llvm) == 0);
    CHECK(std::strcmp(build, v.build_identity) == 0);
    pc_get_version(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);  // all optional
  }
}
