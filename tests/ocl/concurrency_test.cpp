#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "host_reference.hpp"
#include "primcache/ocl/ocl.hpp"

using namespace primcache;

TEST_CASE("many threads creating one OpenCL primitive build it once and all run it",
          "[ocl][concurrency]") {
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  const float alpha = GENERATE(0.125f, 0.0625f, 0.03125f);  // a fresh key each round
  const memory::desc md({3, 29}, data_type::f32, format_tag::ab);
  const auto before = ocl_interop::get_program_counts();
  std::atomic<int> correct{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      stream strm(eng);
      eltwise_forward prim(eltwise_forward::primitive_desc(
          eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_linear, md, alpha,
                                1.f),
          eng));
      memory src(md, eng), dst(md, eng);
      const auto in = ocl_test::pattern(md.size_bytes() / 4, 17);
      ocl_test::write_all(src, in);
      prim.execute(strm, {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
      strm.wait();
      const auto out = ocl_test::read_all(dst);
      bool ok = true;
      // alpha is a power of two: alpha * v + 1 rounds once, as on the host.
      for (std::size_t i = 0; i < in.size(); ++i) ok = ok && out[i] == alpha * in[i] + 1.f;
      if (ok) correct.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(correct.load() == 6);
  REQUIRE(ocl_interop::get_program_counts().source_builds == before.source_builds + 1);
}
