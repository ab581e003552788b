// Transform plans on memory of a user's OpenCL context (an interop engine,
// ocl_interop::make_engine): every step works with the engines the memories
// are on, never the default engine of their place, whose context is another.
// Skipped without an OpenCL device.
#include <CL/cl.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/engine.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/runtime/reorder.hpp"
#include "primcache/runtime/stream.hpp"
#include "primcache/transform/transform_registry.hpp"
#include "support/ocl_user_context.hpp"

using namespace primcache;
using primcache::test::ocl_user_context;

namespace {

// The f32 buffer of an OpenCL memory, read on a queue of its own engine.
std::vector<float> read_buffer(const memory& m) {
  std::vector<float> out(m.get_desc().size_bytes() / sizeof(float));
  const stream strm(m.get_engine());
  REQUIRE(clEnqueueReadBuffer(
              ocl_interop::get_queue(strm), static_cast<cl_mem>(m.get_data_handle()), CL_TRUE, 0,
              m.get_desc().size_bytes(), out.data(), 0, nullptr, nullptr) == CL_SUCCESS);
  return out;
}

void write_buffer(const memory& m, const std::vector<float>& data) {
  REQUIRE(data.size() * sizeof(float) == m.get_desc().size_bytes());
  const stream strm(m.get_engine());
  REQUIRE(clEnqueueWriteBuffer(
              ocl_interop::get_queue(strm), static_cast<cl_mem>(m.get_data_handle()), CL_TRUE, 0,
              m.get_desc().size_bytes(), data.data(), 0, nullptr, nullptr) == CL_SUCCESS);
}

// The logical elements (row-major over dims) of an f32 buffer laid out as md.
std::vector<float> logical(const memory_desc& md, const float* p) {
  const auto dims = md.dims();
  std::vector<float> out;
  std::vector<std::int64_t> idx(dims.size(), 0);
  for (;;) {
    out.push_back(p[md.offset_of(idx)]);
    int d = static_cast<int>(dims.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return out;
  }
}

std::vector<float> logical_f32(const memory& m) {
  REQUIRE(m.get_desc().data_type() == data_type::f32);
  if (m.get_engine().get_kind() == engine_kind::cpu) {
    return logical(m.get_desc(), static_cast<const float*>(m.get_data_handle()));
  }
  const auto buffer = read_buffer(m);
  return logical(m.get_desc(), buffer.data());
}

std::vector<transform_kind> kinds(const transform_plan& p) {
  std::vector<transform_kind> k;
  for (const auto& s : p.steps) k.push_back(s.kind);
  return k;
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, int bits) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - want[i]) > std::ldexp(std::fabs(want[i]), -bits) && bad++ < 3) {
      UNSCOPED_INFO("element " << i << ": " << got[i] << ", expected " << want[i]);
    }
  }
  CHECK(bad == 0);
}

kernel_type kt(const char* text) {
  return kernel_type::parse(text);
}

using tk = transform_kind;

}  // namespace

TEST_CASE("plans run on the engine of the user's OpenCL context", "[transform][ocl][interop]") {
  if (engine::get_count(engine_kind::gpu) == 0) {
    WARN("no OpenCL device: skipped");
    return;
  }
  const ocl_user_context user;
  const engine mine = ocl_interop::make_engine(user.device, user.context);
  REQUIRE_FALSE(mine == engine(engine_kind::gpu, 0));
  REQUIRE(place::of(mine) == place::gpu(0));

  const std::vector<std::int64_t> dims{2, 19, 5, 3};
  const kernel_type dev_abcd = kt("gpu:0/f32/abcd/jit");
  memory src(dev_abcd.layout.desc_for(dims, data_type::f32), mine);
  std::vector<float> data(static_cast<std::size_t>(src.get_desc().nelems()));
  for (std::size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<float>(i % 97) * 0.37f - 11.f;
  }
  write_buffer(src, data);  // abcd: the logical order
  const auto original = logical_f32(src);
  REQUIRE(original == data);

  SECTION("a relayout on the device stays in the user's context") {
    const auto p = plan_transform(dev_abcd, kt("gpu:0/f32/acdb/jit"));
    CHECK(kinds(*p) == std::vector<tk>{tk::layout});
    const memory out = execute_plan(*p, src);
    CHECK(out.get_engine() == mine);
    CHECK(logical_f32(out) == original);
  }
  SECTION("a copy to the host, with and without a relayout there") {
    for (const char* host : {"cpu/f32/abcd/jit", "cpu/f32/acdb/jit"}) {
      INFO(host);
      const memory out = execute_plan(*plan_transform(dev_abcd, kt(host)), src);
      CHECK(out.get_engine().get_kind() == engine_kind::cpu);
      CHECK(logical_f32(out) == original);
    }
  }
  SECTION("a round trip through the host comes back to the user's context") {
    // bf16 changes layout on the host only: place, layout, place.
    const kernel_type a = kt("gpu:0/bf16/abcd/jit"), b = kt("gpu:0/bf16/acdb/jit");
    const memory on_a = transform(src, dev_abcd, a);
    CHECK(on_a.get_engine() == mine);
    const auto p = plan_transform(a, b);
    CHECK(kinds(*p) == std::vector<tk>{tk::place, tk::layout, tk::place});
    const memory on_b = execute_plan(*p, on_a);
    CHECK(on_b.get_engine() == mine);
    const memory back = transform(on_b, b, kt("cpu/f32/abcd/jit"));
    check_close(logical_f32(back), original, 8);
  }
  SECTION("into the user's memory: host -> device -> device") {
    // With 3 channels padded to 16 the plan copies the plain data, then
    // relays out on the device: the copy lands on the destination's engine.
    const std::vector<std::int64_t> small{2, 3, 8, 8};
    const kernel_type host = kt("cpu/f32/abcd/jit"), blocked = kt("gpu:0/f32/aBcd16b/jit");
    memory h(host.layout.desc_for(small, data_type::f32), engine(engine_kind::cpu, 0));
    auto* hp = static_cast<float*>(h.get_data_handle());
    for (std::int64_t i = 0; i < h.get_desc().nelems(); ++i) hp[i] = static_cast<float>(i) - 7.f;
    const auto up = transform_registry::global().plan(host, blocked, small);
    CHECK(kinds(*up) == std::vector<tk>{tk::place, tk::layout});
    memory dst(blocked.layout.desc_for(small, data_type::f32), mine);
    execute_plan(*up, h, dst);
    CHECK(logical_f32(dst) == logical_f32(h));
    // And back into a host memory of the caller's.
    memory again(host.layout.desc_for(small, data_type::f32), engine(engine_kind::cpu, 0));
    execute_plan(*transform_registry::global().plan(blocked, host, small), dst, again);
    CHECK(logical_f32(again) == logical_f32(h));
  }
  SECTION("from one user context into another") {
    const ocl_user_context other;
    const engine theirs = ocl_interop::make_engine(other.device, other.context);
    const kernel_type dev_acdb = kt("gpu:0/f32/acdb/jit");
    memory dst(dev_acdb.layout.desc_for(dims, data_type::f32), theirs);
    execute_plan(*plan_transform(dev_abcd, dev_acdb), src, dst);
    CHECK(logical_f32(dst) == original);
    memory same(src.get_desc(), theirs);
    execute_plan(*plan_transform(dev_abcd, dev_abcd), src, same);  // moves nothing: copies
    CHECK(logical_f32(same) == original);
  }
  SECTION("a user transform gets a stream of the memories' engine") {
    transform_registry reg;
    const kernel_type to = kt("gpu:0/f32/acdb/interop-test");
    int calls = 0;
    reg.add(dev_abcd, to, "reorder_in_place",
            [&](const memory& from, const memory& into, const stream& strm) {
              ++calls;
              CHECK(from.get_engine() == mine);
              CHECK(into.get_engine() == mine);
              CHECK(strm.get_engine() == mine);
              reorder(from, into).execute(strm, from, into);
            });
    const memory out = execute_plan(*reg.plan(dev_abcd, to), src);
    CHECK(calls == 1);
    CHECK(out.get_engine() == mine);
    CHECK(logical_f32(out) == original);
  }
}
