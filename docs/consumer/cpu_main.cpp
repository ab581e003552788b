// Uses the runtime and the CPU backend from an installed tree (shared or
// static): linking primcache::cpu is all it takes to get cpu engines.
#include <cstdio>

#include <primcache/runtime/runtime.hpp>

int main() {
  using namespace primcache;
  engine eng(engine_kind::cpu, 0);
  memory::desc md({2, 4}, data_type::f32, format_tag::ab);
  eltwise_forward relu(eltwise_forward::primitive_desc(
      eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_relu, md), eng));
  memory src(md, eng), dst(md, eng);
  auto* in = static_cast<float*>(src.get_data_handle());
  for (int i = 0; i < 8; ++i) in[i] = static_cast<float>(i - 4);
  relu.execute(stream(eng), {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
  const auto* out = static_cast<const float*>(dst.get_data_handle());
  bool ok = true;
  for (int i = 0; i < 8; ++i) ok = ok && out[i] == (i < 4 ? 0.f : static_cast<float>(i - 4));
  std::printf("consumer_cpu: %s (primcache %s, build %s)\n", ok ? "ok" : "FAILED",
              version().version, version().build_identity);
  return ok ? 0 : 1;
}
