#include "primcache/runtime/version.hpp"

namespace primcache {
namespace runtime_internal {
// Defined in the generated build_identity.cpp (cmake/build_identity.cmake).
extern const char kBuildIdentity[];
extern const char kLlvmVersion[];
extern const char kLibraryVersion[];
extern const int kLibraryVersionParts[3];
}  // namespace runtime_internal

const version_info& version() noexcept {
  using namespace runtime_internal;
  static const version_info info{kLibraryVersionParts[0],
                                 kLibraryVersionParts[1],
                                 kLibraryVersionParts[2],
                                 kLibraryVersion,
                                 kLlvmVersion,
                                 kBuildIdentity};
  return info;
}

namespace {
// Made at load, not on first use (fork safety: docs/runtime.md).
[[maybe_unused]] const version_info& version_at_load = version();
}  // namespace

}  // namespace primcache
