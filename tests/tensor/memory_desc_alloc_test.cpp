// Counts heap allocations through a replaced global operator new, to hold the
// descriptor's hot path (build from dims and a tag, compare, write the key)
// to its promise of allocating nothing.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "primcache/keyhash/key.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace {
std::atomic<long> allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

using primcache::data_type;
using primcache::format_tag;
using primcache::memory_desc;

TEST_CASE("building, comparing and keying descriptors allocates nothing",
          "[tensor][memory_desc][alloc]") {
  const std::int64_t dims[] = {32, 256, 56, 56};
  const std::int64_t strides[] = {802816, 3136, 56, 1};
  primcache::key_writer w;
  bool equal = false;
  bool matched = false;
  std::size_t bytes = 0;

  const long before = allocations.load();
  {
    const memory_desc a(dims, data_type::f32, format_tag::nChw16c);
    const memory_desc b(dims, data_type::f32, format_tag::nchw);
    const memory_desc c(dims, data_type::f32, strides);
    const memory_desc d(dims, data_type::bf16, format_tag::any);
    equal = b == c;
    matched = c.matches(format_tag::nchw) && !a.matches(format_tag::nChw8c);
    bytes = a.size_bytes() + d.nelems();
    auto r = memory_desc::make(dims, data_type::s8, format_tag::nhwc);
    equal = equal && r.has_value();
    a.write_key(w);
    b.write_key(w);
    d.write_key(w);
  }
  const long after = allocations.load();

  CHECK(after == before);
  CHECK(equal);
  CHECK(matched);
  CHECK(bytes > 0);
  CHECK(w.size() > 0);
}

TEST_CASE("a rejected descriptor allocates only for its message", "[tensor][memory_desc][alloc]") {
  // The failure path formats a message; a probe such as matches() does not.
  const std::int64_t dims[] = {2, 3, 4};
  const memory_desc md(dims, data_type::f32, format_tag::abc);
  const long before = allocations.load();
  const bool m = md.matches(format_tag::nchw);
  const long after = allocations.load();
  CHECK_FALSE(m);
  CHECK(after == before);
  CHECK_THROWS_AS(memory_desc(dims, data_type::f32, format_tag::nchw), primcache::error);
  CHECK(allocations.load() > after);  // the counter sees the message (and the exception)
}
