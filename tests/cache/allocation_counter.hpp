// Counts (and on request fails) the global operator new calls the current
// thread makes inside a bounded scope, so tests can say "this does not
// allocate" without counting Catch2's own allocations. allocation_counter.cpp
// replaces the test binary's global operator new/delete; outside a scope they
// behave as the standard ones.
#pragma once

#include <cstddef>

namespace cache_test {

class allocation_scope {
 public:
  allocation_scope();
  ~allocation_scope();
  allocation_scope(const allocation_scope&) = delete;
  allocation_scope& operator=(const allocation_scope&) = delete;

  // operator new calls made by this thread since the scope opened.
  std::size_t count() const;
  // The n-th next operator new on this thread inside the scope (0: the very
  // next) throws std::bad_alloc.
  void fail_after(std::size_t n);
  // Whether a requested failure has been thrown.
  bool failed() const;
};

}  // namespace cache_test
