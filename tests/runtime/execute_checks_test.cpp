// execute() checks every argument against the primitive descriptor before a
// kernel sees a pointer; these tests pass arguments that would make the fake
// copy read or write out of bounds, with buffers that end at a guard page.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "fake_backend.hpp"
#include "primcache/base/error.hpp"
#include "primcache/runtime/backend/engine_impl.hpp"
#include "primcache/runtime/runtime.hpp"

using namespace primcache;
using Catch::Matchers::Contains;

namespace {

// `bytes` of readable, writable memory ending exactly at a PROT_NONE page:
// one byte past the end faults.
class guarded_buffer {
 public:
  explicit guarded_buffer(std::size_t bytes) {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t data_pages = (bytes + page - 1) / page;
    total_ = (data_pages + 1) * page;
    void* p = ::mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    base_ = static_cast<char*>(p);
    REQUIRE(::mprotect(base_ + data_pages * page, page, PROT_NONE) == 0);
    data_ = base_ + data_pages * page - bytes;
    std::memset(data_, 0, bytes);
  }
  ~guarded_buffer() { ::munmap(base_, total_); }
  guarded_buffer(const guarded_buffer&) = delete;
  guarded_buffer& operator=(const guarded_buffer&) = delete;
  void* data() const { return data_; }

 private:
  char* base_ = nullptr;
  char* data_ = nullptr;
  std::size_t total_ = 0;
};

memory::desc f32(memory::dims dims) {
  return {dims, data_type::f32, format_tag::ab};
}

}  // namespace

TEST_CASE("execute refuses arguments that do not match the primitive descriptor",
          "[runtime][execute]") {
  fake::install();
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  reorder copy(fake::copy_pd(64, 64));  // copies 16 KiB
  memory src(f32({64, 64}), eng), dst(f32({64, 64}), eng);

  SECTION("matching arguments run") {
    static_cast<float*>(src.get_data_handle())[4095] = 3.f;
    copy.execute(strm, src, dst);
    CHECK(static_cast<float*>(dst.get_data_handle())[4095] == 3.f);
  }
  SECTION("a source smaller than the descriptor, ending at a guard page, is refused") {
    guarded_buffer small(32 * 64 * sizeof(float));
    memory short_src(f32({32, 64}), eng, small.data());
    CHECK_THROWS_WITH(
        copy.execute(strm, short_src, dst),
        Contains("src (PRIMCACHE_ARG_SRC) has descriptor") && Contains("the primitive expects"));
  }
  SECTION("a destination smaller than the descriptor, ending at a guard page, is refused") {
    guarded_buffer small(64 * 63 * sizeof(float));
    memory short_dst(f32({64, 63}), eng, small.data());
    CHECK_THROWS_WITH(copy.execute(strm, src, short_dst), Contains("dst (PRIMCACHE_ARG_DST)"));
  }
  SECTION("the same dims in another layout or data type are refused") {
    memory transposed(memory::desc({64, 64}, data_type::f32, format_tag::ba), eng);
    CHECK_THROWS_WITH(copy.execute(strm, src, transposed), Contains("dst (PRIMCACHE_ARG_DST)"));
    memory halves(memory::desc({64, 64}, data_type::f16, format_tag::ab), eng);
    CHECK_THROWS_WITH(copy.execute(strm, halves, dst), Contains("src (PRIMCACHE_ARG_SRC)"));
  }
  SECTION("a missing or empty argument is named") {
    CHECK_THROWS_WITH(copy.execute(strm, {{PRIMCACHE_ARG_FROM, src}}),
                      Contains("dst (PRIMCACHE_ARG_DST) is missing"));
    CHECK_THROWS_WITH(copy.execute(strm, {{PRIMCACHE_ARG_FROM, src}, {PRIMCACHE_ARG_TO, memory()}}),
                      Contains("dst (PRIMCACHE_ARG_DST) is missing"));
  }
  SECTION("a memory without a buffer is refused") {
    memory null_dst(f32({64, 64}), eng, nullptr);
    CHECK_THROWS_WITH(copy.execute(strm, src, null_dst), Contains("has no buffer"));
  }
  SECTION("a memory of another engine of the same kind is refused") {
    engine other(engine_kind::gpu, 1);
    memory foreign(f32({64, 64}), other);
    CHECK_THROWS_WITH(copy.execute(strm, foreign, dst),
                      Contains("src (PRIMCACHE_ARG_SRC) is a memory of another engine"));
  }
  SECTION("a stream of another engine of the same kind is refused") {
    engine other(engine_kind::gpu, 1);
    CHECK_THROWS_WITH(copy.execute(stream(other), src, dst),
                      Contains("the stream belongs to another engine"));
  }
  SECTION("arguments the primitive does not take are ignored") {
    memory extra(f32({1, 1}), eng);
    CHECK_NOTHROW(
        copy.execute(strm, {{PRIMCACHE_ARG_FROM, src}, {PRIMCACHE_ARG_TO, dst}, {99, extra}}));
  }
}

TEST_CASE("handles made separately for one device are the same engine", "[runtime][engine]") {
  fake::install();
  engine a(engine_kind::gpu, 0), b(engine_kind::gpu, 0), c(engine_kind::gpu, 1);
  CHECK(a == b);
  CHECK_FALSE(a == c);
  reorder copy(fake::copy_pd(4, 4));  // made on its own engine(gpu, 0)
  memory src(f32({4, 4}), a), dst(f32({4, 4}), b);
  CHECK_NOTHROW(copy.execute(stream(b), src, dst));
}

TEST_CASE("output scales are a run-time value: they share compiled code and never leak",
          "[runtime][attr][key]") {
  fake::install();
  engine eng(engine_kind::gpu, 0);
  const auto md = f32({3, 5});
  auto with_scale = [&](float s) {
    primitive_attr attr;
    attr.set_output_scales(0, {s});
    return reorder::primitive_desc(eng, md, eng, md, attr);
  };
  reorder half(with_scale(0.5f));
  const int before = fake::creations.load();
  reorder twice(with_scale(2.f));
  CHECK(fake::creations.load() == before);  // the same key: no new compilation
  CHECK(twice.creation_outcome() == lookup_outcome::hit);

  memory src(md, eng), dst(md, eng);
  static_cast<float*>(src.get_data_handle())[14] = 8.f;
  half.execute(stream(eng), src, dst);
  CHECK(static_cast<float*>(dst.get_data_handle())[14] == 4.f);
  twice.execute(stream(eng), src, dst);
  CHECK(static_cast<float*>(dst.get_data_handle())[14] == 16.f);
  // Descriptors still tell the values apart.
  CHECK(backend::impl_ptr_of(with_scale(0.5f)) != backend::impl_ptr_of(with_scale(2.f)));
}

TEST_CASE("a creation that asks the cache for its own key fails instead of waiting forever",
          "[runtime][cache][nested]") {
  auto pd = fake::copy_pd(11, 3);
  CHECK_THROWS_WITH(reorder(pd), Contains("cannot nest itself"));
  CHECK_FALSE(primitive_cache_contains(pd));
  // Other nested creations are unaffected.
  CHECK_NOTHROW(reorder(fake::copy_pd(7, 3)));
}

TEST_CASE("memory holds a backend storage and streams a backend queue",
          "[runtime][memory][stream]") {
  fake::install();
  engine eng(engine_kind::gpu, 0);
  SECTION("host storage: the handle, map and unmap are the buffer itself") {
    memory m(f32({2, 3}), eng);
    void* mapped = m.map_data();
    CHECK(mapped == m.get_data_handle());
    static_cast<float*>(mapped)[5] = 1.5f;
    m.unmap_data(mapped);
    CHECK(static_cast<float*>(m.get_data_handle())[5] == 1.5f);
  }
  SECTION("set_data_handle frees an owned buffer and wraps the caller's") {
    memory m(f32({2, 3}), eng);  // a leak here fails the AddressSanitizer run
    float user[6] = {};
    m.set_data_handle(user);
    CHECK(m.get_data_handle() == user);
    CHECK(m.map_data() == user);
  }
  SECTION("wait() reaches the backend's stream") {
    stream s(eng);
    const int before = fake::stream_waits.load();
    s.wait();
    s.wait();
    CHECK(fake::stream_waits.load() == before + 2);
  }
  SECTION("a backend stream without device timing says so (stream.hpp's profiling)") {
    stream s(eng);
    CHECK_FALSE(s.reset_profiling());
    CHECK_FALSE(s.profiled_ns().has_value());
    s.stop_profiling();  // harmless
    CHECK_FALSE(s.profiled_ns().has_value());
  }
  SECTION("an empty memory says so") {
    CHECK_THROWS_WITH(memory().map_data(), Contains("empty"));
  }
}

TEST_CASE("backends wrap their own device objects and queues (interop)", "[runtime][engine]") {
  fake::install();
  engine registered(engine_kind::gpu, 0);
  // Equality is identity of the device object: wrapping the registered
  // one gives an equal engine (an interop engine wraps a new one).
  engine wrapped = backend::wrap_engine(
      std::shared_ptr<const backend::engine_impl>(&backend::impl_of(registered), [](auto*) {}));
  CHECK(wrapped == registered);
  CHECK(wrapped.get_kind() == engine_kind::gpu);
  struct counting final : backend::stream_impl {
    int waits = 0;
    void wait() override { ++waits; }
  };
  auto queue = std::make_shared<counting>();
  stream s = backend::wrap_stream(registered, queue);
  s.wait();
  CHECK(queue->waits == 1);
  CHECK(&backend::impl_of(s) == queue.get());
  CHECK_THROWS_WITH(backend::wrap_engine(nullptr), Contains("null"));
  CHECK_THROWS_WITH(backend::wrap_stream(registered, nullptr), Contains("null"));
}
