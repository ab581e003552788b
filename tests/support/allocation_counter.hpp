// Counts (and on request fails) the calling thread's heap allocations, through
// a replacement of the global operator new linked into the test binary.
//
//   primcache_test::allocation_scope scope;
//   ... code under test ...
//   CHECK(scope.count() == 0);
//   scope.fail_next();           // the next operator new throws std::bad_alloc
//
// Where a sanitizer runtime defines operator new itself, the build sets
// PRIMCACHE_TEST_REPLACES_NEW to 0 (tests/support/CMakeLists.txt), the
// replacement is left out, and tests that count allocations must be too.
//
// Thread-safety: the state is per thread; a scope counts only its own thread.
#pragma once

#include <cstddef>

#ifndef PRIMCACHE_TEST_REPLACES_NEW
#error "link primcache_test_allocation_counter, which defines PRIMCACHE_TEST_REPLACES_NEW"
#endif

namespace primcache_test {

class allocation_scope {
 public:
  allocation_scope();
  ~allocation_scope();
  allocation_scope(const allocation_scope&) = delete;
  allocation_scope& operator=(const allocation_scope&) = delete;

  // operator new calls made by this thread since the scope opened.
  std::size_t count() const;
  // The n-th next operator new on this thread inside the scope (0: the very
  // next) throws std::bad_alloc, once.
  void fail_after(std::size_t n);
  void fail_next() { fail_after(0); }
  // Whether a requested failure has been thrown.
  bool failed() const;
};

}  // namespace primcache_test
