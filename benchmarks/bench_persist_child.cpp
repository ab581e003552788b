// The process BM_NewProcess spawns (bench_persist.cpp): creates and runs
// ResNet-50's convolutions once each, as a restarted service does, and
// exits after the first outputs. With PRIMCACHE_PERSISTENT_CACHE_DIR set it
// takes the code from that directory; without, it compiles. Given
// --ready-fd=N it writes one byte to descriptor N once the last layer's
// outputs are there (what BM_NewProcess times to), before it finishes the
// store's writes and exits. Prints the objects it found in the store
// ("persistent hits N") and exits non-zero if a creation failed, or, given
// --expect-hits, if the store served nothing.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "primcache/runtime/runtime.hpp"

namespace {

struct layer {
  std::int64_t ic, oc, in, k, stride, pad;
  std::int64_t out() const { return (in + 2 * pad - k) / stride + 1; }
};

// bench_conv.cpp's ResNet-50 layers.
constexpr layer kLayers[] = {
    {3, 64, 224, 7, 2, 3},   {64, 64, 56, 3, 1, 1},   {64, 256, 56, 1, 1, 0},
    {256, 64, 56, 1, 1, 0},  {128, 128, 28, 3, 1, 1}, {128, 128, 56, 3, 2, 1},
    {512, 128, 28, 1, 1, 0}, {256, 256, 14, 3, 1, 1}, {1024, 256, 14, 1, 1, 0},
    {512, 512, 7, 3, 1, 1},  {2048, 512, 7, 1, 1, 0},
};

}  // namespace

int main(int argc, char** argv) {
  bool expect_hits = false;
  int ready_fd = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    if (a == "--expect-hits") {
      expect_hits = true;
    } else if (a.starts_with("--ready-fd=")) {
      ready_fd = std::atoi(argv[i] + 11);
    } else {
      std::fprintf(stderr, "bench_persist_child: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  namespace pc = primcache;
  using tag = pc::format_tag;
  try {
    pc::engine eng(pc::engine_kind::cpu, 0);
    pc::stream strm(eng);
    float checksum = 0.f;
    for (const layer& l : kLayers) {
      pc::memory::desc src_md({1, l.ic, l.in, l.in}, pc::data_type::f32, tag::nChw16c);
      pc::memory::desc wei_any({l.oc, l.ic, l.k, l.k}, pc::data_type::f32, tag::any);
      pc::memory::desc bias_md({l.oc}, pc::data_type::f32, tag::a);
      pc::memory::desc dst_md({1, l.oc, l.out(), l.out()}, pc::data_type::f32, tag::nChw16c);
      pc::convolution_forward::primitive_desc pd(
          pc::convolution_forward::desc(
              pc::prop_kind::forward_inference, pc::algorithm::convolution_direct, src_md, wei_any,
              bias_md, dst_md, {l.stride, l.stride}, {l.pad, l.pad}, {l.pad, l.pad}),
          eng);
      pc::memory src(src_md, eng), wei(pd.weights_desc(), eng), bias(bias_md, eng),
          dst(dst_md, eng);
      for (pc::memory* m : {&src, &wei, &bias}) {
        auto* p = static_cast<float*>(m->get_data_handle());
        for (std::size_t i = 0; i < m->get_desc().size_bytes() / 4; ++i) p[i] = 0.001f * (i % 7);
      }
      pc::convolution_forward(pd).execute(strm, {{PRIMCACHE_ARG_SRC, src},
                                                 {PRIMCACHE_ARG_WEIGHTS, wei},
                                                 {PRIMCACHE_ARG_BIAS, bias},
                                                 {PRIMCACHE_ARG_DST, dst}});
      strm.wait();
      checksum += static_cast<const float*>(dst.get_data_handle())[0];
    }
    if (ready_fd >= 0) {
      const char byte = 1;
      if (::write(ready_fd, &byte, 1) != 1) return 1;
      ::close(ready_fd);
    }
    pc::flush_persistent_cache_writes();
    std::printf("persistent hits %llu checksum %g\n",
                static_cast<unsigned long long>(pc::get_persistent_cache_stats().hits),
                static_cast<double>(checksum));
    if (expect_hits && pc::get_persistent_cache_stats().hits == 0) return 2;
  } catch (const pc::error& e) {
    std::fprintf(stderr, "bench_persist_child: %s\n", e.what());
    return 1;
  }
  return 0;
}
