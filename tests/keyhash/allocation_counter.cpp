#include "allocation_counter.hpp"

#include <cstdlib>
#include <new>

namespace keyhash_test {
namespace {

struct thread_state {
  bool counting = false;
  bool fail_next = false;
  std::size_t count = 0;
};

// Per thread, so that other threads' allocations never reach a scope; plain
// data, so reading it from operator new allocates nothing.
thread_local thread_state state;

}  // namespace

allocation_scope::allocation_scope() {
  state = thread_state{true, false, 0};
}
allocation_scope::~allocation_scope() {
  state = thread_state{};
}
std::size_t allocation_scope::count() const {
  return state.count;
}
void allocation_scope::fail_next() {
  state.fail_next = true;
}

#if PRIMCACHE_TEST_REPLACES_NEW
namespace {
void* allocate(std::size_t n) {
  if (state.counting) {
    ++state.count;
    if (state.fail_next) {
      state.fail_next = false;
      throw std::bad_alloc();
    }
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
}  // namespace
#endif

}  // namespace keyhash_test

#if PRIMCACHE_TEST_REPLACES_NEW
// The aligned forms are left to the standard library: its aligned new and
// delete pair with each other, and keys never ask for extended alignment.
void* operator new(std::size_t n) {
  return keyhash_test::allocate(n);
}
void* operator new[](std::size_t n) {
  return keyhash_test::allocate(n);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return keyhash_test::allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return ::operator new(n, std::nothrow);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
#endif  // PRIMCACHE_TEST_REPLACES_NEW
