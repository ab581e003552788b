// primcache/runtime/version.hpp — which primcache this is: the library
// version, the LLVM version its CPU kernels are compiled with, and the build
// identity.
//
//   const primcache::version_info& v = primcache::version();
//   std::printf("primcache %s (LLVM %s, build %s)\n", v.version, v.llvm, v.build_identity);
//
// The build identity is a hash, made when the library is built, of every
// source that generates or compiles kernels plus the LLVM version: two builds
// with the same identity generate the same code, so kernel binaries (the
// persistent cache) are interchangeable between them; any change to code
// generation gives a new identity, and a rebuild of the same sources keeps it.
//
// Thread-safety: the object is immutable and lives for the whole process.
// Exceptions: none.
#pragma once

#include "primcache/base/export.hpp"

namespace primcache {

struct version_info {
  int major;
  int minor;
  int patch;
  const char* version;         // "major.minor.patch"
  const char* llvm;            // the LLVM version, "15.0.6"
  const char* build_identity;  // 16 hex digits
};

PRIMCACHE_API const version_info& version() noexcept;

}  // namespace primcache
