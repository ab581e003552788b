#include <catch2/catch.hpp>

#include <cmath>

#include "host_reference.hpp"
#include "ocl_engine.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primitives/matmul_impl.hpp"

using namespace primcache;

namespace {

struct shape {
  std::int64_t b, m, n, k;
};

// dst(b, m, n) = sum_k src(b|0, m, k) * weights(b|0, k, n) + bias(n), post-ops,
// in double, with |terms| summed for the error bound.
struct reference_result {
  std::vector<double> value, magnitude;
};

reference_result matmul_reference(const shape& s, const memory::desc& a_md,
                                  const std::vector<float>& a, const memory::desc& w_md,
                                  const std::vector<float>& w, const std::vector<float>* bias,
                                  bool relu_post_op, const memory::desc* add_md,
                                  const std::vector<float>* add) {
  const bool batched = a_md.ndims() == 3;
  reference_result r;
  for (std::int64_t b = 0; b < s.b; ++b) {
    for (std::int64_t m = 0; m < s.m; ++m) {
      for (std::int64_t n = 0; n < s.n; ++n) {
        double acc = 0, mag = 0;
        for (std::int64_t k = 0; k < s.k; ++k) {
          const auto ab = a_md.ndims() == 3 && a_md.dims()[0] == 1 ? 0 : b;
          const auto wb = w_md.ndims() == 3 && w_md.dims()[0] == 1 ? 0 : b;
          const double x = batched ? a[a_md.offset_of({ab, m, k})] : a[a_md.offset_of({m, k})];
          const double y = batched ? w[w_md.offset_of({wb, k, n})] : w[w_md.offset_of({k, n})];
          acc += x * y;
          mag += std::abs(x * y);
        }
        if (bias) acc += (*bias)[static_cast<std::size_t>(n)];
        if (relu_post_op) acc = acc > 0 ? acc : 0.5 * acc;
        if (add)
          acc += (*add)[add_md->offset_of(batched ? std::vector<std::int64_t>{0, 0, n}
                                                  : std::vector<std::int64_t>{0, n})];
        r.value.push_back(acc);
        r.magnitude.push_back(mag);
      }
    }
  }
  return r;
}

void run_and_check(const shape& s, bool transposed_weights, bool with_bias, bool with_post_ops,
                   const backend::matmul_op* forced_op = nullptr,
                   const ocl_internal::matmul_config* config = nullptr) {
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const bool batched = s.b > 1;
  auto dims3 = [&](std::int64_t b, std::int64_t r, std::int64_t c) {
    return batched ? memory::dims{b, r, c} : memory::dims{r, c};
  };
  const auto plain = batched ? format_tag::abc : format_tag::ab;
  const memory::desc a_md(dims3(s.b, s.m, s.k), data_type::f32, plain);
  // Weights broadcast over the batch when batched.
  const memory::desc w_md(
      dims3(1, s.k, s.n), data_type::f32,
      transposed_weights ? (batched ? format_tag::acb : format_tag::ba) : plain);
  const memory::desc d_md(dims3(s.b, s.m, s.n), data_type::f32, plain);
  const memory::desc bias_md =
      with_bias ? memory::desc(dims3(1, 1, s.n), data_type::f32, plain) : memory::desc();
  const memory::desc add_md(dims3(1, 1, s.n), data_type::f32, plain);

  primitive_attr attr;
  if (with_post_ops) {
    post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.5f, 0.f);
    ops.append_binary(algorithm::binary_add, add_md);
    attr.set_post_ops(ops);
  }
  backend::matmul_op op{a_md, w_md, bias_md, d_md};
  if (forced_op) op = *forced_op;
  primitive_desc pd;
  if (config) {
    auto impl = ocl_internal::make_matmul_pd(op, attr, backend::impl_of(eng), config);
    REQUIRE(impl.has_value());
    pd = backend::make_primitive_desc(impl.value(), eng);
  } else {
    pd = matmul::primitive_desc(matmul::desc(a_md, w_md, bias_md, d_md), attr, eng);
  }
  primitive prim(pd);

  memory a(a_md, eng), w(w_md, eng), d(d_md, eng), bias, add(add_md, eng);
  const auto av = ocl_test::pattern(a_md.size_bytes() / 4, 21);
  const auto wv = ocl_test::pattern(w_md.size_bytes() / 4, 22);
  const auto addv = ocl_test::pattern(add_md.size_bytes() / 4, 24);
  std::vector<float> bv;
  ocl_test::write_all(a, av);
  ocl_test::write_all(w, wv);
  ocl_test::write_all(add, addv);
  // dst starts as NaN: an element no work-item stores fails the comparison.
  ocl_test::write_all(d, std::vector<float>(d_md.size_bytes() / 4, std::nanf("")));
  std::unordered_map<int, memory> args = {
      {PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, w}, {PRIMCACHE_ARG_DST, d}};
  if (with_bias) {
    bias = memory(bias_md, eng);
    bv = ocl_test::pattern(bias_md.size_bytes() / 4, 23);
    ocl_test::write_all(bias, bv);
    args[PRIMCACHE_ARG_BIAS] = bias;
  }
  if (with_post_ops) args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1] = add;
  prim.execute(strm, args);
  strm.wait();

  const auto out = ocl_test::read_all(d);
  const auto want = matmul_reference(s, a_md, av, w_md, wv, with_bias ? &bv : nullptr,
                                     with_post_ops, &add_md, with_post_ops ? &addv : nullptr);
  std::size_t i = 0;
  for (std::int64_t b = 0; b < s.b; ++b) {
    for (std::int64_t m = 0; m < s.m; ++m) {
      for (std::int64_t n = 0; n < s.n; ++n, ++i) {
        const float got = out[d_md.offset_of(batched ? std::vector<std::int64_t>{b, m, n}
                                                     : std::vector<std::int64_t>{m, n})];
        // f32 accumulation of K products in any order: each partial sum
        // rounds once (2^-24 relative), so the error is at most about
        // (K + 3) * 2^-24 * sum |a_k w_k|, plus the bias, post-op and
        // final roundings: bounded by (K + 8) * 2^-23 * (sum|.| + 1).
        const double bound = (s.k + 8) * std::ldexp(1.0, -23) * (want.magnitude[i] + 4.0);
        INFO("b " << b << " m " << m << " n " << n);
        REQUIRE(std::abs(got - want.value[i]) <= bound);
      }
    }
  }
}

ocl_internal::matmul_problem problem_of(const shape& s) {
  ocl_internal::matmul_problem p;
  const bool batched = s.b > 1;
  auto md = [&](std::int64_t r, std::int64_t c) {
    return batched ? memory::desc({s.b, r, c}, data_type::f32, format_tag::abc)
                   : memory::desc({r, c}, data_type::f32, format_tag::ab);
  };
  p.src = md(s.m, s.k);
  p.weights = md(s.k, s.n);
  p.dst = md(s.m, s.n);
  return p;
}

// A device entry as a discrete GPU reports itself (1024 work-items a group,
// 48 KiB of local memory), within this device's own limits so that what
// the GPU default asks for also runs here.
ocl_internal::device_entry gpu_like(const ocl_internal::device_entry& here) {
  ocl_internal::device_entry g = here;
  g.type = CL_DEVICE_TYPE_GPU;
  g.max_work_group_size = std::min<std::size_t>(here.max_work_group_size, 1024);
  g.local_mem_size = std::min<cl_ulong>(here.local_mem_size, 48 << 10);
  return g;
}

}  // namespace

TEST_CASE("matmul on OpenCL equals the host reference over odd shapes",
          "[ocl][matmul][kernel_sweep]") {
  const auto s =
      GENERATE(shape{1, 1, 1, 1}, shape{1, 7, 13, 5}, shape{1, 33, 17, 65}, shape{1, 64, 64, 64},
               shape{1, 97, 131, 29}, shape{3, 5, 11, 7}, shape{2, 19, 37, 41});
  const bool transposed = GENERATE(false, true);
  SECTION("without bias or post-ops") {
    run_and_check(s, transposed, false, false);
  }
  SECTION("with bias, an eltwise and a binary-add post-op") {
    run_and_check(s, transposed, true, true);
  }
}

TEST_CASE("every matmul configuration computes the same product",
          "[ocl][matmul][config][kernel_sweep]") {
  using ocl_internal::matmul_config;
  const auto c =
      GENERATE(matmul_config{1, 1, 1, 1, 1, 1, false}, matmul_config{4, 4, 2, 4, 4, 8, true},
               matmul_config{8, 2, 3, 8, 8, 5, true}, matmul_config{2, 8, 4, 2, 2, 16, false},
               matmul_config{8, 8, 1, 16, 16, 4, true}, matmul_config{1, 16, 8, 16, 16, 16, false},
               matmul_config{2, 4, 5, 16, 8, 16, false}, matmul_config{4, 2, 3, 12, 4, 16, false});
  const auto s = GENERATE(shape{1, 1, 1, 1}, shape{1, 31, 23, 67}, shape{2, 9, 40, 13});
  INFO("config wg " << c.wg_m << "x" << c.wg_n << " tile " << c.tile_m << "x" << c.tile_n << " vec "
                    << c.vec_width << " k " << c.tile_k << " local " << c.local_tiling);
  INFO("shape " << s.b << "x" << s.m << "x" << s.n << "x" << s.k);
  run_and_check(s, false, true, true, nullptr, &c);
}

// The register-tiled kernel (no local tiling) has no bounds checks in its K
// loop: rows past M read row M - 1, a column block past N starts at N - TN
// (overlapping its neighbour), a matrix narrower than one tile clamps every
// column, and the K loop is unrolled with a remainder. Shapes that reach
// each of those, with plain and transposed weights (vector and per-lane
// loads), against the host reference (dst starts as NaN, so an element no
// work-item stores fails).
// (1x1x1 is in the two cases above, with this kernel as the default.)
TEST_CASE("the register-tiled matmul is exact at every edge",
          "[ocl][matmul][config][edges][kernel_sweep]") {
  using ocl_internal::matmul_config;
  const auto c =
      GENERATE(matmul_config{1, 16, 8, 16, 16, 16, false}, matmul_config{2, 2, 7, 16, 8, 16, false},
               matmul_config{1, 1, 3, 5, 1, 16, false});
  const auto s = GENERATE(shape{1, 1, 97, 13}, shape{1, 17, 7, 3}, shape{1, 49, 131, 67},
                          shape{2, 11, 37, 29});
  // Transposed weights (per-lane loads) with bias and post-ops; plain
  // weights (vector loads) without.
  const bool transposed = GENERATE(false, true);
  INFO("config wg " << c.wg_m << "x" << c.wg_n << " tile " << c.tile_m << "x" << c.tile_n << " vec "
                    << c.vec_width);
  INFO("shape " << s.b << "x" << s.m << "x" << s.n << "x" << s.k << " transposed " << transposed);
  run_and_check(s, transposed, transposed, transposed, nullptr, &c);
}

TEST_CASE("the K loop's unroll keeps an iteration within 128 FMAs and K", "[ocl][matmul][config]") {
  using ocl_internal::matmul_config;
  using ocl_internal::matmul_k_unroll;
  CHECK(matmul_k_unroll(matmul_config{1, 16, 8, 16, 16, 16, false}, 4096) == 8);  // 8 FMAs
  CHECK(matmul_k_unroll(matmul_config{1, 16, 8, 16, 8, 16, false}, 4096) == 8);   // 16
  CHECK(matmul_k_unroll(matmul_config{1, 16, 16, 16, 4, 16, false}, 4096) == 2);  // 64
  CHECK(matmul_k_unroll(matmul_config{1, 16, 16, 16, 1, 16, false}, 4096) == 1);  // 256
  CHECK(matmul_k_unroll(matmul_config{1, 16, 8, 16, 16, 16, false}, 3) == 2);
  CHECK(matmul_k_unroll(matmul_config{1, 16, 8, 16, 16, 16, false}, 1) == 1);
}

TEST_CASE("a matmul configuration the device cannot run is refused with a reason",
          "[ocl][matmul][config]") {
  engine eng(engine_kind::gpu, 0);
  const memory::desc md({4, 4}, data_type::f32, format_tag::ab);
  const backend::matmul_op op{md, md, memory::desc(), md};
  ocl_internal::matmul_config c;
  c.vec_width = 3;
  auto r = ocl_internal::make_matmul_pd(op, primitive_attr(), backend::impl_of(eng), &c);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.why().message.find("vec_width") != std::string::npos);
  c = {};
  c.wg_m = c.wg_n = 4096;
  r = ocl_internal::make_matmul_pd(op, primitive_attr(), backend::impl_of(eng), &c);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.why().message.find("exceeds the device") != std::string::npos);
}

TEST_CASE("the default matmul configuration follows the device and the shape",
          "[ocl][matmul][config]") {
  using ocl_internal::default_matmul_config;
  using ocl_internal::matmul_config;
  ocl_internal::device_entry cpu, gpu;
  cpu.type = CL_DEVICE_TYPE_CPU;
  cpu.max_work_group_size = 4096;
  cpu.local_mem_size = 4 << 20;
  gpu.type = CL_DEVICE_TYPE_GPU;
  gpu.max_work_group_size = 1024;
  gpu.local_mem_size = 48 << 10;
  SECTION("large shapes: the register tile on CPU devices, local tiling on GPUs") {
    for (const shape& s : {shape{1, 1024, 1024, 1024}, shape{1, 128, 768, 3072}}) {
      CHECK(default_matmul_config(cpu, problem_of(s)) ==
            matmul_config{1, 16, 8, 16, 16, 16, false});
      CHECK(default_matmul_config(gpu, problem_of(s)) == matmul_config{16, 16, 4, 4, 4, 16, true});
    }
  }
  SECTION("small shapes shrink the block: CPU devices the group first, GPUs the tile first") {
    // N = 8: the CPU group narrows to 1 before the 16-column tile halves.
    CHECK(default_matmul_config(cpu, problem_of({1, 1024, 8, 64})) ==
          matmul_config{1, 1, 8, 8, 8, 16, false});
    // M = 1 on a GPU: the rows' tile goes to 1, then the group's rows.
    CHECK(default_matmul_config(gpu, problem_of({1, 1, 4096, 4096})) ==
          matmul_config{1, 16, 1, 4, 4, 16, true});
  }
  SECTION("the device's limits: a smaller work-group, no local memory") {
    ocl_internal::device_entry small = gpu;
    small.max_work_group_size = 64;
    const auto c = default_matmul_config(small, problem_of({1, 512, 512, 512}));
    CHECK(static_cast<std::size_t>(c.wg_m) * c.wg_n <= 64);
    small.local_mem_size = 1024;
    CHECK_FALSE(default_matmul_config(small, problem_of({1, 512, 512, 512})).local_tiling);
  }
  SECTION("every default passes the device check") {
    for (const auto& dev : {cpu, gpu}) {
      for (const shape& s :
           {shape{1, 1, 1, 1}, shape{1, 7, 13, 5}, shape{2, 19, 37, 41}, shape{1, 1, 4096, 4096},
            shape{1, 49, 2048, 512}, shape{1, 2048, 2048, 2048}}) {
        INFO("gpu " << (dev.type == CL_DEVICE_TYPE_GPU) << " shape " << s.m << "x" << s.n << "x"
                    << s.k);
        CHECK(ocl_internal::check_matmul_config(default_matmul_config(dev, problem_of(s)), dev)
                  .has_value());
      }
    }
  }
}

// Without a GPU the suite still runs the kernel a GPU gets by default (local
// tiling, 16x16 groups, float4): its configuration for a GPU-like entry,
// forced on this device.
TEST_CASE("the GPU default matmul configuration computes the product on this device",
          "[ocl][matmul][config][gpu_default][kernel_sweep]") {
  const engine eng(engine_kind::gpu, 0);
  const auto gpu = gpu_like(ocl_internal::ocl_engine_of(backend::impl_of(eng)).device_info());
  const auto s = GENERATE(shape{1, 1, 1, 1}, shape{1, 97, 131, 29}, shape{2, 19, 37, 41},
                          shape{1, 1, 67, 133}, shape{1, 130, 70, 257});
  const auto c = ocl_internal::default_matmul_config(gpu, problem_of(s));
  INFO("shape " << s.b << "x" << s.m << "x" << s.n << "x" << s.k << " config wg " << c.wg_m << "x"
                << c.wg_n << " tile " << c.tile_m << "x" << c.tile_n << " vec " << c.vec_width
                << " local " << c.local_tiling);
  const bool transposed = GENERATE(false, true);
  run_and_check(s, transposed, transposed, transposed, nullptr, &c);
}
