#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "host_reference.hpp"
#include "kernel_primitive.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primcache/runtime/backend/registry.hpp"

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

namespace {

// An implementation whose OpenCL C does not compile, for eltwise_exp with
// alpha 1234.5 only (no other test asks for that).
result<std::shared_ptr<const backend::primitive_desc_impl>> make_broken_pd(
    const backend::op_desc& desc, const primitive_attr& attr, const backend::engine_impl& eng) {
  const auto& op = std::get<backend::eltwise_fwd_op>(desc);
  if (op.alg != algorithm::eltwise_exp || op.alpha != 1234.5f) {
    return failure{status::unimplemented, "not the broken test kernel"};
  }
  ocl_internal::kernel_plan plan;
  plan.name = "primcache_broken";
  plan.source = "__kernel void primcache_broken(__global float* p) { p[0] = undeclared_name; }\n";
  plan.args = {PRIMCACHE_ARG_SRC};
  plan.arg_bytes = {op.src.size_bytes()};
  key_writer w;
  op.src.write_key(w);
  return ocl_internal::make_kernel_pd(backend::primitive_kind::eltwise, "test:broken", attr, eng,
                                      {{PRIMCACHE_ARG_SRC, op.src}, {PRIMCACHE_ARG_DST, op.src}},
                                      std::move(plan), std::move(w));
}

}  // namespace

TEST_CASE("a failing program build reaches every waiter and is not cached",
          "[ocl][concurrency][errors]") {
  static const bool registered = [] {
    backend::register_implementation(
        {"test:broken", engine_kind::gpu, backend::primitive_kind::eltwise, 1000, &make_broken_pd});
    return true;
  }();
  REQUIRE(registered);
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  const memory::desc md({4, 4}, data_type::f32, format_tag::ab);
  const eltwise_forward::desc d(prop_kind::forward_inference, algorithm::eltwise_exp, md, 1234.5f);
  const int size_before = get_primitive_cache_size();

  for (int round = 0; round < 3; ++round) {
    const auto before = ocl_interop::get_program_counts();
    std::atomic<int> reported{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
      threads.emplace_back([&] {
        try {
          eltwise_forward prim(eltwise_forward::primitive_desc(d, eng));
        } catch (const error& e) {
          const std::string what = e.what();
          if (what.find("CL_BUILD_PROGRAM_FAILURE") != std::string::npos &&
              what.find("undeclared_name") != std::string::npos) {
            reported.fetch_add(1);
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    REQUIRE(reported.load() == 6);
    REQUIRE(get_primitive_cache_size() == size_before);
    // Waiters share the creator's failure; nothing cached, so each round
    // builds again (a waiter arriving after the failure may build again too).
    REQUIRE(ocl_interop::get_program_counts().source_builds > before.source_builds);
  }
}

TEST_CASE("threads racing on the first execution with constant weights pack them once",
          "[ocl][concurrency][constant]") {
  set_constant_tensor_cache_capacity(engine_kind::gpu, constant_tensor_cache_unlimited);
  engine eng(engine_kind::gpu, 0);
  const memory::desc a({9, 27}, data_type::f32, format_tag::ab);
  const memory::desc w({27, 35}, data_type::f32, format_tag::ab);
  const memory::desc c({9, 35}, data_type::f32, format_tag::ab);
  primitive_attr attr;
  attr.set_constant_weights(true);
  const matmul plain(matmul::primitive_desc(matmul::desc(a, w, c), eng));
  const matmul constant(matmul::primitive_desc(matmul::desc(a, w, c), attr, eng));
  memory ma(a, eng);
  ocl_test::write_all(ma, ocl_test::pattern(a.size_bytes() / 4, 31));
  for (int round = 0; round < 5; ++round) {
    memory mw(w, eng);  // new weights each round: a new memory id
    ocl_test::write_all(mw, ocl_test::pattern(w.size_bytes() / 4, 32 + round));
    std::vector<float> expected;
    {
      stream strm(eng);
      memory mc(c, eng);
      plain.execute(
          strm, {{PRIMCACHE_ARG_SRC, ma}, {PRIMCACHE_ARG_WEIGHTS, mw}, {PRIMCACHE_ARG_DST, mc}});
      strm.wait();
      expected = ocl_test::read_all(mc);
    }
    const auto before = ocl_interop::get_program_counts().weights_packs;
    std::atomic<int> correct{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
      threads.emplace_back([&] {
        stream strm(eng);
        memory mc(c, eng);
        constant.execute(
            strm, {{PRIMCACHE_ARG_SRC, ma}, {PRIMCACHE_ARG_WEIGHTS, mw}, {PRIMCACHE_ARG_DST, mc}});
        strm.wait();
        if (ocl_test::read_all(mc) == expected) correct.fetch_add(1);
      });
    }
    for (auto& t : threads) t.join();
    REQUIRE(correct.load() == 6);
    REQUIRE(ocl_interop::get_program_counts().weights_packs == before + 1);
  }
}

// Engines sharing one context realize a binary once between them: PoCL 3.1
// without its kernel cache (POCL_KERNEL_CACHE=0, as CTest runs it) aborted
// the process ("Can't get stat() on .../_UNCACHED_*/...") when two programs
// of one binary in one context were created and released concurrently, as
// each engine's own program was (docs/ocl.md).
TEST_CASE("threads on engines sharing a context create, run and release one primitive",
          "[ocl][concurrency][interop]") {
  set_primitive_cache_capacity(1024);
  cl_device_id device = ocl_interop::get_device(engine(engine_kind::gpu, 0));
  cl_int err = CL_SUCCESS;
  cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  REQUIRE(err == CL_SUCCESS);
  {
    std::vector<engine> engines;
    for (int t = 0; t < 3; ++t) engines.push_back(ocl_interop::make_engine(device, context));
    clReleaseContext(context);  // the engines hold it
    const memory::desc from({1, 3, 4, 7}, data_type::f32, format_tag::nchw);
    const memory::desc to({1, 3, 4, 7}, data_type::f32, format_tag::nhwc);
    { const reorder built(reorder::primitive_desc(engines[0], from, engines[0], to)); }
    std::atomic<int> correct{0};
    std::vector<std::thread> threads;
    for (const engine& eng : engines) {
      threads.emplace_back([&, eng] {
        stream strm(eng);
        memory src(from, eng), dst(to, eng);
        const auto in = ocl_test::pattern(from.size_bytes() / 4, 19);
        ocl_test::write_all(src, in);
        bool ok = true;
        for (int round = 0; round < 30; ++round) {
          // Each round's primitive realizes the binary or shares the live
          // program, and lets go of it at the end of the round.
          const reorder prim(reorder::primitive_desc(eng, from, eng, to));
          prim.execute(strm, {{PRIMCACHE_ARG_FROM, src}, {PRIMCACHE_ARG_TO, dst}});
          strm.wait();
          const auto out = ocl_test::read_all(dst);
          for (const auto& i : ocl_test::all_indices({1, 3, 4, 7})) {
            ok = ok && out[static_cast<std::size_t>(to.offset_of(i))] ==
                           in[static_cast<std::size_t>(from.offset_of(i))];
          }
        }
        if (ok) correct.fetch_add(1);
      });
    }
    for (auto& t : threads) t.join();
    REQUIRE(correct.load() == 3);
  }
}
