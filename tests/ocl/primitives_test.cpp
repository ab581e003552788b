#include <catch2/catch.hpp>

#include <cmath>
#include <tuple>

#include "host_reference.hpp"
#include "primcache/ocl/ocl.hpp"

using namespace primcache;

namespace {

memory::desc make_md(const std::vector<std::int64_t>& dims, format_tag tag) {
  return memory::desc(dims, data_type::f32, tag);
}

// Logical element `idx` of a memory's host copy.
float at(const std::vector<float>& data, const memory::desc& md,
         const std::vector<std::int64_t>& idx) {
  return data[static_cast<std::size_t>(md.offset_of(idx))];
}

}  // namespace

TEST_CASE("eltwise on OpenCL equals the host reference for every algorithm",
          "[ocl][eltwise][kernel_sweep]") {
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const auto alg =
      GENERATE(algorithm::eltwise_relu, algorithm::eltwise_gelu_erf, algorithm::eltwise_gelu_tanh,
               algorithm::eltwise_tanh, algorithm::eltwise_logistic, algorithm::eltwise_exp,
               algorithm::eltwise_linear, algorithm::eltwise_clip);
  const auto dims =
      GENERATE(std::vector<std::int64_t>{1, 1, 1, 1}, std::vector<std::int64_t>{2, 17, 5, 3},
               std::vector<std::int64_t>{1, 13, 7, 11});
  const auto tags = GENERATE(std::pair{format_tag::nchw, format_tag::nchw},
                             std::pair{format_tag::nhwc, format_tag::nhwc},
                             std::pair{format_tag::nchw, format_tag::nChw8c},
                             std::pair{format_tag::nChw16c, format_tag::nhwc});
  const float alpha = alg == algorithm::eltwise_clip ? -0.5f : 0.25f;
  const float beta = alg == algorithm::eltwise_clip ? 1.5f : -0.75f;
  const auto src_md = make_md(dims, tags.first), dst_md = make_md(dims, tags.second);
  memory src(src_md, eng), dst(dst_md, eng);
  const auto in = ocl_test::pattern(src_md.size_bytes() / 4, 3);
  ocl_test::write_all(src, in);

  eltwise_forward prim(eltwise_forward::primitive_desc(
      eltwise_forward::desc(prop_kind::forward_inference, alg, src_md, dst_md, alpha, beta), eng));
  prim.execute(strm, {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}});
  strm.wait();

  const auto out = ocl_test::read_all(dst);
  for (const auto& idx : ocl_test::all_indices(dims)) {
    const double want = ocl_test::eltwise_reference(alg, at(in, src_md, idx), alpha, beta);
    const double got = at(out, dst_md, idx);
    // OpenCL 1.2 full-profile builtins (erf, tanh, exp) are within 4 ulp;
    // products and sums add a few roundings: 1e-5 relative plus 1e-6
    // absolute near zero covers both with room, for |v| < 2.
    INFO("alg " << to_string(alg) << " at flat " << src_md.offset_of(idx));
    REQUIRE(std::abs(got - want) <= 1e-5 * std::abs(want) + 1e-6);
  }
}

TEST_CASE("reorder on OpenCL moves every element between layouts", "[ocl][reorder][kernel_sweep]") {
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const auto dims =
      GENERATE(std::vector<std::int64_t>{1, 1, 1, 1}, std::vector<std::int64_t>{3, 19, 5, 7},
               std::vector<std::int64_t>{2, 8, 1, 13});
  const auto tags = GENERATE(std::pair{format_tag::nchw, format_tag::nhwc},
                             std::pair{format_tag::nhwc, format_tag::nChw16c},
                             std::pair{format_tag::nChw8c, format_tag::nchw},
                             std::pair{format_tag::nChw16c, format_tag::nChw8c});
  const auto src_md = make_md(dims, tags.first), dst_md = make_md(dims, tags.second);
  memory src(src_md, eng), dst(dst_md, eng);
  const auto in = ocl_test::pattern(src_md.size_bytes() / 4, 5);
  ocl_test::write_all(src, in);
  ocl_test::write_all(dst, std::vector<float>(dst_md.size_bytes() / 4, 99.f));

  reorder(src, dst).execute(strm, src, dst);
  strm.wait();

  const auto out = ocl_test::read_all(dst);
  for (const auto& idx : ocl_test::all_indices(dims)) {
    REQUIRE(at(out, dst_md, idx) == at(in, src_md, idx));  // a copy: exact
  }
  SECTION("block padding is written as zero") {
    std::size_t padding = 0;
    for (float v : out) padding += v == 99.f ? 1 : 0;
    REQUIRE(padding == 0);
  }
}

TEST_CASE("CPU <-> OpenCL reorders round-trip exactly", "[ocl][reorder][host]") {
  ocl_test::register_host_engine();
  engine gpu(engine_kind::gpu, 0), cpu(engine_kind::cpu, 0);
  stream strm(gpu);
  // Odd sizes and blocked layouts (the whole buffer travels, padding too).
  const auto shape =
      GENERATE(std::pair{std::vector<std::int64_t>{2, 5, 3, 7}, format_tag::nhwc},
               std::pair{std::vector<std::int64_t>{1, 1, 1, 1}, format_tag::nchw},
               std::pair{std::vector<std::int64_t>{3, 17, 1, 13}, format_tag::nchw},
               std::pair{std::vector<std::int64_t>{1, 19, 5, 3}, format_tag::nChw16c},
               std::pair{std::vector<std::int64_t>{1}, format_tag::a});
  const auto md = make_md(shape.first, shape.second);
  std::vector<float> host_in = ocl_test::pattern(md.size_bytes() / 4, 9);
  std::vector<float> host_out(host_in.size(), 0.f);
  memory a(md, cpu, host_in.data()), dev(md, gpu), b(md, cpu, host_out.data());

  reorder(a, dev).execute(strm, a, dev);
  reorder(dev, b).execute(strm, dev, b);
  strm.wait();
  REQUIRE(host_out == host_in);
}

TEST_CASE(
    "a CPU <-> OpenCL reorder's descriptor holds the source, destination and executing "
    "engines, and its impl is cached",
    "[ocl][reorder][host][cache]") {
  ocl_test::register_host_engine();
  set_primitive_cache_capacity(1024);
  const engine gpu(engine_kind::gpu, 0), cpu(engine_kind::cpu, 0);
  // A shape no other test uses: keys of their own.
  const auto md = make_md({1, 23, 2, 3}, format_tag::nhwc);
  const int size_before = get_primitive_cache_size();

  const reorder::primitive_desc up(cpu, md, gpu, md), down(gpu, md, cpu, md);
  CHECK(up.get_src_engine() == cpu);
  CHECK(up.get_dst_engine() == gpu);
  CHECK(up.get_engine() == gpu);  // the OpenCL engine executes both directions
  CHECK(down.get_src_engine() == gpu);
  CHECK(down.get_dst_engine() == cpu);
  CHECK(down.get_engine() == gpu);
  CHECK(up.impl_info_str() == "ocl:reorder:copy");
  CHECK(down.impl_info_str() == "ocl:reorder:copy");
  CHECK(up.cache_blob_id() != down.cache_blob_id());  // the direction is in the key

  const reorder r1(up), r2(down);
  CHECK(get_primitive_cache_size() == size_before + 2);
  const reorder again(reorder::primitive_desc(cpu, md, gpu, md));
  CHECK(get_primitive_cache_size() == size_before + 2);  // a hit

  std::vector<float> host_in = ocl_test::pattern(md.size_bytes() / 4, 12);
  std::vector<float> host_out(host_in.size(), 0.f);
  memory a(md, cpu, host_in.data()), dev(md, gpu), b(md, cpu, host_out.data());
  stream strm(gpu);
  again.execute(strm, a, dev);
  r2.execute(strm, dev, b);
  strm.wait();
  CHECK(host_out == host_in);

  SECTION("memories on the wrong engines are refused") {
    REQUIRE_THROWS_AS(r1.execute(strm, dev, b), error);
  }
}

TEST_CASE("a CPU <-> OpenCL reorder between different layouts is declined with a reason",
          "[ocl][reorder][host][errors]") {
  ocl_test::register_host_engine();
  const engine gpu(engine_kind::gpu, 0), cpu(engine_kind::cpu, 0);
  const auto nchw = make_md({1, 5, 3, 3}, format_tag::nchw);
  const auto nhwc = make_md({1, 5, 3, 3}, format_tag::nhwc);
  for (const auto& [from, to, src_md, dst_md] :
       {std::tuple{cpu, gpu, nchw, nhwc}, std::tuple{gpu, cpu, nhwc, nchw}}) {
    try {
      reorder::primitive_desc pd(from, src_md, to, dst_md);
      FAIL("accepted: " << pd.impl_info_str());
    } catch (const error& e) {
      CHECK(e.code() == status::unimplemented);
      CHECK_THAT(std::string(e.what()), Catch::Contains("copy one layout"));
    }
  }
}

TEST_CASE("eltwise on OpenCL applies its post-op chain", "[ocl][eltwise][post_ops]") {
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const std::vector<std::int64_t> dims = {2, 19, 3, 5};
  const auto tags = GENERATE(std::pair{format_tag::nchw, format_tag::nchw},
                             std::pair{format_tag::nhwc, format_tag::nChw16c});
  const auto src_md = make_md(dims, tags.first), dst_md = make_md(dims, tags.second);
  // Per-channel addend in nchw; a scalar addend; tanh with scale 0.5 between.
  const auto chan_md = make_md({1, 19, 1, 1}, format_tag::nchw);
  const auto scalar_md = make_md({1, 1, 1, 1}, format_tag::nchw);
  post_ops ops;
  ops.append_binary(algorithm::binary_add, chan_md);
  ops.append_eltwise(0.5f, algorithm::eltwise_tanh, 0.f, 0.f);
  ops.append_binary(algorithm::binary_add, scalar_md);
  primitive_attr attr;
  attr.set_post_ops(ops);

  memory src(src_md, eng), dst(dst_md, eng), chan(chan_md, eng), scalar(scalar_md, eng);
  const auto in = ocl_test::pattern(src_md.size_bytes() / 4, 31);
  const auto cv = ocl_test::pattern(19, 32);
  const std::vector<float> sv = {0.375f};
  ocl_test::write_all(src, in);
  ocl_test::write_all(chan, cv);
  ocl_test::write_all(scalar, sv);
  eltwise_forward prim(eltwise_forward::primitive_desc(
      eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_relu, src_md, dst_md,
                            0.25f, 0.f),
      attr, eng));
  prim.execute(strm, {{PRIMCACHE_ARG_SRC, src},
                      {PRIMCACHE_ARG_DST, dst},
                      {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(0) | PRIMCACHE_ARG_SRC_1, chan},
                      {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(2) | PRIMCACHE_ARG_SRC_1, scalar}});
  strm.wait();
  const auto out = ocl_test::read_all(dst);
  for (const auto& idx : ocl_test::all_indices(dims)) {
    double v = ocl_test::eltwise_reference(algorithm::eltwise_relu, at(in, src_md, idx), 0.25, 0);
    v += cv[static_cast<std::size_t>(idx[1])];
    v = 0.5 * std::tanh(v);
    v += sv[0];
    // tanh within 4 ulp, three more roundings: 1e-5 relative + 1e-6.
    REQUIRE(std::abs(at(out, dst_md, idx) - v) <= 1e-5 * std::abs(v) + 1e-6);
  }
}

// OpenCL kernels may read only buffers of their own context: a buffer of
// another context (another engine on the same device) is refused by name
// at execution instead of being handed to the kernel, which OpenCL leaves
// undefined (PoCL ran it; other drivers fail the launch or read garbage).
// Only a reorder can meet one: the runtime checks every other primitive's
// memories against its one engine.
TEST_CASE("a reorder between OpenCL engines of different contexts is refused at execution",
          "[ocl][reorder][errors]") {
  const engine mine(engine_kind::gpu, 0);
  cl_device_id dev = ocl_interop::get_device(mine);
  cl_int err = CL_SUCCESS;
  cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
  REQUIRE(err == CL_SUCCESS);
  {
    const engine theirs = ocl_interop::make_engine(dev, ctx);
    const engine same_context = ocl_interop::make_engine(dev, ocl_interop::get_context(mine));
    const auto nchw = make_md({1, 5, 3, 3}, format_tag::nchw);
    const auto nhwc = make_md({1, 5, 3, 3}, format_tag::nhwc);
    const auto in = ocl_test::pattern(45, 3);
    SECTION("either way round") {
      const bool from_mine = GENERATE(true, false);
      const engine& src_eng = from_mine ? mine : theirs;
      const engine& dst_eng = from_mine ? theirs : mine;
      memory src(nchw, src_eng), dst(nhwc, dst_eng);
      ocl_test::write_all(src, in);
      stream strm(src_eng);  // the source's engine executes a device reorder
      const reorder r(reorder::primitive_desc(src_eng, nchw, dst_eng, nhwc));
      try {
        r.execute(strm, src, dst);
        strm.wait();
        FAIL("a buffer of another context reached the kernel");
      } catch (const error& e) {
        CHECK(e.code() == status::invalid_arguments);
        CHECK_THAT(std::string(e.what()), Catch::Contains("another OpenCL context"));
      }
    }
    SECTION("two engines sharing one context may reorder between them") {
      memory src(nchw, mine), dst(nhwc, same_context);
      ocl_test::write_all(src, in);
      stream strm(mine);
      reorder(reorder::primitive_desc(mine, nchw, same_context, nhwc)).execute(strm, src, dst);
      strm.wait();
      const auto out = ocl_test::read_all(dst);
      for (const auto& idx : ocl_test::all_indices({1, 5, 3, 3})) {
        REQUIRE(at(out, nhwc, idx) == at(in, nchw, idx));
      }
    }
  }
  clReleaseContext(ctx);
}
