#include "support/allocation_counter.hpp"

#include <cstdlib>
#include <new>

namespace primcache_test {
namespace {

struct thread_state {
  bool counting = false;
  bool failed = false;
  std::size_t fail_at = static_cast<std::size_t>(-1);
  std::size_t count = 0;
};

// Per thread, so that other threads' allocations never reach a scope; plain
// data, so reading it from operator new allocates nothing.
thread_local thread_state state;

#if PRIMCACHE_TEST_REPLACES_NEW
void note_allocation() {
  if (!state.counting) return;
  if (state.count++ == state.fail_at) {
    state.failed = true;
    throw std::bad_alloc();
  }
}

void* allocate(std::size_t n) {
  note_allocation();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

void* allocate_aligned(std::size_t n, std::align_val_t alignment) {
  note_allocation();
  const auto a = static_cast<std::size_t>(alignment);
  if (void* p = std::aligned_alloc(a, (n + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
#endif

}  // namespace

allocation_scope::allocation_scope() {
  state = thread_state{.counting = true};
}
allocation_scope::~allocation_scope() {
  state = thread_state{};
}
std::size_t allocation_scope::count() const {
  return state.count;
}
void allocation_scope::fail_after(std::size_t n) {
  state.fail_at = state.count + n;
}
bool allocation_scope::failed() const {
  return state.failed;
}

}  // namespace primcache_test

#if PRIMCACHE_TEST_REPLACES_NEW
void* operator new(std::size_t n) {
  return primcache_test::allocate(n);
}
void* operator new[](std::size_t n) {
  return primcache_test::allocate(n);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return primcache_test::allocate_aligned(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return primcache_test::allocate_aligned(n, a);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return primcache_test::allocate(n);
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
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
#endif  // PRIMCACHE_TEST_REPLACES_NEW
