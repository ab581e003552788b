// Counts (and on request fails) global operator new calls made by the current
// thread inside a bounded scope, so tests can say "this does not allocate"
// without counting Catch2's own allocations. allocation_counter.cpp replaces
// the global operator new/delete of the test binary; outside a scope they
// behave as the standard ones.
//
// Sanitizer runtimes bring their own operator new (TSan's and clang's ASan's
// are linked whole, so a second definition does not link); under a sanitizer
// nothing is replaced, counted or failed, and counting_available() is false.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PRIMCACHE_TEST_REPLACES_NEW 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PRIMCACHE_TEST_REPLACES_NEW 0
#endif
#endif
#ifndef PRIMCACHE_TEST_REPLACES_NEW
#define PRIMCACHE_TEST_REPLACES_NEW 1
#endif

namespace keyhash_test {

class allocation_scope {
 public:
  allocation_scope();
  ~allocation_scope();
  allocation_scope(const allocation_scope&) = delete;
  allocation_scope& operator=(const allocation_scope&) = delete;

  // operator new calls made by this thread since the scope opened.
  std::size_t count() const;
  // The next operator new on this thread inside the scope throws std::bad_alloc.
  void fail_next();
};

}  // namespace keyhash_test
