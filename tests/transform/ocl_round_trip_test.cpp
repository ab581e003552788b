// CPU -> OpenCL -> CPU through transform plans, on whatever OpenCL device
// the ICD loader finds (PoCL's CPU device here). Skipped without one.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "primcache/runtime/engine.hpp"
#include "primcache/runtime/memory.hpp"
#include "primcache/transform/transform_registry.hpp"

using namespace primcache;

namespace {

std::vector<transform_kind> kinds(const transform_plan& p) {
  std::vector<transform_kind> k;
  for (const auto& s : p.steps) k.push_back(s.kind);
  return k;
}

// The logical element i (row-major over dims) of a host memory as float.
std::vector<float> logical_f32(const memory& m) {
  const auto& md = m.get_desc();
  REQUIRE(md.data_type() == data_type::f32);
  const auto dims = md.dims();
  std::vector<float> out;
  std::vector<std::int64_t> idx(dims.size(), 0);
  const auto* p = static_cast<const float*>(m.get_data_handle());
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

using tk = transform_kind;

}  // namespace

TEST_CASE("tensors go to an OpenCL device and come back", "[transform][ocl]") {
  if (engine::get_count(engine_kind::gpu) == 0) {
    WARN("no OpenCL device: skipped");
    return;
  }
  const engine cpu(engine_kind::cpu, 0);
  const kernel_type host = kernel_type::parse("cpu/f32/abcd/jit");
  memory src(host.layout.desc_for({2, 19, 5, 3}, data_type::f32), cpu);
  auto* s = static_cast<float*>(src.get_data_handle());
  for (std::int64_t i = 0; i < src.get_desc().nelems(); ++i) {
    s[i] = static_cast<float>(i % 97) * 0.37f - 11.f;
  }
  const auto original = logical_f32(src);

  SECTION("f32, relaid out on the device") {
    const kernel_type dev = kernel_type::parse("gpu:0/f32/acdb/jit");
    const auto up = plan_transform(host, dev);
    CHECK(kinds(*up) == std::vector<tk>{tk::layout, tk::place});
    const memory on_device = execute_plan(*up, src);
    CHECK(on_device.get_engine().get_kind() == engine_kind::gpu);
    const auto down = plan_transform(dev, host);
    CHECK(kinds(*down) == std::vector<tk>{tk::layout, tk::place});
    CHECK(logical_f32(execute_plan(*down, on_device)) == original);
  }
  SECTION("bf16: narrowed before the copy, widened after") {
    const kernel_type dev = kernel_type::parse("gpu:0/bf16/aBcd16b/jit");
    const auto up = plan_transform(host, dev);
    CHECK(kinds(*up) == std::vector<tk>{tk::layout_and_data_type, tk::place});
    const memory on_device = execute_plan(*up, src);
    const auto down = plan_transform(dev, host);
    CHECK(kinds(*down) == std::vector<tk>{tk::place, tk::layout_and_data_type});
    const auto back = logical_f32(execute_plan(*down, on_device));
    REQUIRE(back.size() == original.size());
    // Into the caller's memory: the copy lands in a fresh host buffer, the
    // widening reorder in `into`.
    memory into(host.layout.desc_for({2, 19, 5, 3}, data_type::f32), cpu);
    execute_plan(*down, on_device, into);
    CHECK(logical_f32(into) == back);
    for (std::size_t i = 0; i < back.size(); ++i) {
      INFO("element " << i);
      CHECK(std::fabs(back[i] - original[i]) <= std::ldexp(std::fabs(original[i]), -8));
    }
  }
  SECTION("a bf16 relayout on the device goes through the host") {
    const kernel_type a = kernel_type::parse("gpu:0/bf16/abcd/jit");
    const kernel_type b = kernel_type::parse("gpu:0/bf16/acdb/jit");
    const memory on_a = transform(src, host, a);
    const auto p = plan_transform(a, b);
    CHECK(kinds(*p) == std::vector<tk>{tk::place, tk::layout, tk::place});
    const memory on_b = execute_plan(*p, on_a);
    const auto back = logical_f32(transform(on_b, b, host));
    for (std::size_t i = 0; i < back.size(); ++i) {
      CHECK(std::fabs(back[i] - original[i]) <= std::ldexp(std::fabs(original[i]), -8));
    }
  }
}
