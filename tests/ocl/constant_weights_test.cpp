// OpenCL constant weights: a matmul with primitive_attr::set_constant_weights
// packs its weights once into a device buffer kept in the constant tensor
// cache of its device (constant.gpu.N), keyed by the engine's context and the
// weights memory's id; results equal the primitive without the attribute.
#include <catch2/catch.hpp>

#include <cstring>
#include <optional>

#include "constant_weights.hpp"
#include "host_reference.hpp"
#include "kernel_primitive.hpp"
#include "primcache/ocl/ocl.hpp"
#include "primitives/matmul_impl.hpp"
#include "support/ocl_user_context.hpp"

using namespace primcache;
using primcache::test::ocl_user_context;

namespace {

std::uint64_t packs() {
  return ocl_interop::get_program_counts().weights_packs;
}

constant_tensor_cache& gpu_cache(const engine& eng) {
  return constant_tensor_cache_for(eng);
}

// A matmul of src (m x k) and weights (k x n, or n x k transposed),
// with and without constant weights, on one engine.
struct matmul_pair {
  memory::desc a, w, c;
  matmul plain, constant;
  matmul_pair(const engine& eng, std::int64_t m, std::int64_t n, std::int64_t k,
              bool transposed = false)
      : a({m, k}, data_type::f32, format_tag::ab),
        w({k, n}, data_type::f32, transposed ? format_tag::ba : format_tag::ab),
        c({m, n}, data_type::f32, format_tag::ab),
        plain(matmul::primitive_desc(matmul::desc(a, w, c), eng)),
        constant(matmul::primitive_desc(matmul::desc(a, w, c), constant_attr(), eng)) {}
  static primitive_attr constant_attr() {
    primitive_attr attr;
    attr.set_constant_weights(true);
    return attr;
  }
};

std::vector<float> execute(const primitive& prim, stream& strm, const memory& a, const memory& w,
                           const memory& c) {
  prim.execute(strm, {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, w}, {PRIMCACHE_ARG_DST, c}});
  strm.wait();
  return ocl_test::read_all(c);
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("OpenCL constant weights are packed once and give the same results", "[ocl][constant]") {
  set_constant_tensor_cache_capacity(engine_kind::gpu, constant_tensor_cache_unlimited);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  struct shape {
    std::int64_t m, n, k;
    bool transposed;
  };
  for (const shape s : {shape{7, 13, 5, false}, shape{33, 17, 65, false}, shape{1, 1, 1, false},
                        shape{20, 48, 64, true}}) {
    DYNAMIC_SECTION(s.m << "x" << s.n << "x" << s.k << (s.transposed ? " transposed" : "")) {
      matmul_pair p(eng, s.m, s.n, s.k, s.transposed);
      memory a(p.a, eng), w(p.w, eng), c(p.c, eng);
      ocl_test::write_all(a, ocl_test::pattern(p.a.size_bytes() / 4, 1));
      ocl_test::write_all(w, ocl_test::pattern(p.w.size_bytes() / 4, 2));
      const auto expected = execute(p.plain, strm, a, w, c);
      const std::size_t tensors = gpu_cache(eng).tensor_count();
      const auto before = packs();
      for (int i = 0; i < 3; ++i) CHECK(same_bits(execute(p.constant, strm, a, w, c), expected));
      CHECK(packs() == before + 1);
      CHECK(gpu_cache(eng).tensor_count() == tensors + 1);
    }
  }
}

TEST_CASE("OpenCL constant weights with a local-tiled configuration and batches",
          "[ocl][constant]") {
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  // Batched weights (3 batches) under the default, and 2-D weights under an
  // explicit local-tiled configuration with a vector width of 4.
  const memory::desc a({3, 9, 21}, data_type::f32, format_tag::abc);
  const memory::desc w({3, 21, 10}, data_type::f32, format_tag::abc);
  const memory::desc c({3, 9, 10}, data_type::f32, format_tag::abc);
  const matmul plain(matmul::primitive_desc(matmul::desc(a, w, c), eng));
  primitive_attr attr;
  attr.set_constant_weights(true);
  const matmul constant(matmul::primitive_desc(matmul::desc(a, w, c), attr, eng));
  memory ma(a, eng), mw(w, eng), mc(c, eng);
  ocl_test::write_all(ma, ocl_test::pattern(a.size_bytes() / 4, 5));
  ocl_test::write_all(mw, ocl_test::pattern(w.size_bytes() / 4, 6));
  const auto expected = execute(plain, strm, ma, mw, mc);
  CHECK(same_bits(execute(constant, strm, ma, mw, mc), expected));

  ocl_internal::matmul_config cfg;
  cfg.wg_m = 4;
  cfg.wg_n = 4;
  cfg.tile_m = 2;
  cfg.tile_n = 4;
  cfg.vec_width = 4;
  cfg.tile_k = 8;
  cfg.local_tiling = true;
  const memory::desc a2({9, 21}, data_type::f32, format_tag::ab);
  const memory::desc w2({21, 10}, data_type::f32, format_tag::ab);
  const memory::desc c2({9, 10}, data_type::f32, format_tag::ab);
  const backend::op_desc op = backend::matmul_op{a2, w2, memory::desc(), c2};
  auto plain_pd = ocl_internal::make_matmul_pd(op, primitive_attr(), backend::impl_of(eng), &cfg);
  auto const_pd = ocl_internal::make_matmul_pd(op, attr, backend::impl_of(eng), &cfg);
  REQUIRE(plain_pd);
  REQUIRE(const_pd);
  const primitive p1(backend::make_primitive_desc(plain_pd.value(), eng));
  const primitive p2(backend::make_primitive_desc(const_pd.value(), eng));
  memory ma2(a2, eng), mw2(w2, eng), mc2(c2, eng);
  ocl_test::write_all(ma2, ocl_test::pattern(a2.size_bytes() / 4, 7));
  ocl_test::write_all(mw2, ocl_test::pattern(w2.size_bytes() / 4, 8));
  std::unordered_map<int, memory> args = {
      {PRIMCACHE_ARG_SRC, ma2}, {PRIMCACHE_ARG_WEIGHTS, mw2}, {PRIMCACHE_ARG_DST, mc2}};
  p1.execute(strm, args);
  strm.wait();
  const auto expected2 = ocl_test::read_all(mc2);
  p2.execute(strm, args);
  strm.wait();
  CHECK(same_bits(ocl_test::read_all(mc2), expected2));
}

TEST_CASE("OpenCL constant weights: two contexts on one device never share a buffer",
          "[ocl][constant][interop]") {
  set_constant_tensor_cache_capacity(engine_kind::gpu, constant_tensor_cache_unlimited);
  ocl_user_context u1, u2;
  engine e1 = ocl_interop::make_engine(u1.device, u1.context);
  engine e2 = ocl_interop::make_engine(u2.device, u2.context);
  REQUIRE(&gpu_cache(e1) == &gpu_cache(e2));  // one device, one cache

  // The key: another context, another key, for the same packing and id.
  ocl_internal::weights_packing pk;
  pk.layout_key = {std::byte{1}, std::byte{2}};
  CHECK(ocl_internal::constant_weights_key(pk, u1.context, 42) !=
        ocl_internal::constant_weights_key(pk, u2.context, 42));
  CHECK(ocl_internal::constant_weights_key(pk, u1.context, 42) ==
        ocl_internal::constant_weights_key(pk, u1.context, 42));
  CHECK(ocl_internal::constant_weights_key(pk, u1.context, 42) !=
        ocl_internal::constant_weights_key(pk, u1.context, 43));

  const std::size_t tensors = gpu_cache(e1).tensor_count();
  const auto before = packs();
  std::vector<float> results[2];
  int i = 0;
  for (engine* e : {&e1, &e2}) {
    stream strm(*e);
    matmul_pair p(*e, 11, 19, 23);
    memory a(p.a, *e), w(p.w, *e), c(p.c, *e);
    ocl_test::write_all(a, ocl_test::pattern(p.a.size_bytes() / 4, 9));
    ocl_test::write_all(w, ocl_test::pattern(p.w.size_bytes() / 4, 10));
    const auto expected = execute(p.plain, strm, a, w, c);
    results[i] = execute(p.constant, strm, a, w, c);
    CHECK(same_bits(results[i], expected));
    CHECK(gpu_cache(*e).tensor_count() == tensors + 1);  // this context's entry
    ++i;
    // w goes at the end of the scope: its entry leaves with its id.
  }
  CHECK(packs() == before + 2);
  CHECK(same_bits(results[0], results[1]));
  CHECK(gpu_cache(e1).tensor_count() == tensors);
}

TEST_CASE("OpenCL constant weights when the cache keeps nothing", "[ocl][constant][capacity]") {
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  matmul_pair p(eng, 5, 40, 36);
  memory a(p.a, eng), w(p.w, eng), c(p.c, eng);
  ocl_test::write_all(a, ocl_test::pattern(p.a.size_bytes() / 4, 11));
  ocl_test::write_all(w, ocl_test::pattern(p.w.size_bytes() / 4, 12));
  const auto expected = execute(p.plain, strm, a, w, c);

  SECTION("capacity 0: packed once per weights memory, reused, nothing kept") {
    set_constant_tensor_cache_capacity(engine_kind::gpu, 0);
    const auto stats0 = gpu_cache(eng).stats();
    const auto before = packs();
    for (int i = 0; i < 4; ++i) CHECK(same_bits(execute(p.constant, strm, a, w, c), expected));
    CHECK(packs() == before + 1);
    CHECK(gpu_cache(eng).tensor_count() == 0);
    CHECK(gpu_cache(eng).stats().refusals == stats0.refusals + 4);

    // New weights (a new memory id): packed again, once.
    memory w2(p.w, eng);
    ocl_test::write_all(w2, ocl_test::pattern(p.w.size_bytes() / 4, 13));
    const auto expected2 = execute(p.plain, strm, a, w2, c);
    for (int i = 0; i < 2; ++i) CHECK(same_bits(execute(p.constant, strm, a, w2, c), expected2));
    CHECK(packs() == before + 2);

    // Room again: the buffer this primitive packed is kept, not repacked.
    set_constant_tensor_cache_capacity(engine_kind::gpu, constant_tensor_cache_unlimited);
    CHECK(same_bits(execute(p.constant, strm, a, w2, c), expected2));
    CHECK(packs() == before + 2);
    CHECK(gpu_cache(eng).tensor_count() == 1);
    CHECK(same_bits(execute(p.constant, strm, a, w2, c), expected2));
    CHECK(gpu_cache(eng).stats().hits >= 1);
  }
  SECTION("full under no_evict: refused, packed once, results exact") {
    set_constant_tensor_cache_capacity(engine_kind::gpu, 1);  // 1 MB
    matmul_pair big(eng, 3, 640, 640);                        // 1.6 MB of weights
    memory ba(big.a, eng), bw(big.w, eng), bc(big.c, eng);
    ocl_test::write_all(ba, ocl_test::pattern(big.a.size_bytes() / 4, 14));
    ocl_test::write_all(bw, ocl_test::pattern(big.w.size_bytes() / 4, 15));
    const auto want = execute(big.plain, strm, ba, bw, bc);
    const auto before = packs();
    for (int i = 0; i < 3; ++i) CHECK(same_bits(execute(big.constant, strm, ba, bw, bc), want));
    CHECK(packs() == before + 1);
    CHECK(gpu_cache(eng).tensor_count() == 0);
    set_constant_tensor_cache_capacity(engine_kind::gpu, constant_tensor_cache_unlimited);
  }
}

TEST_CASE("OpenCL constant weights survive eviction while in use, and leave with their id",
          "[ocl][constant][eviction]") {
  set_constant_tensor_cache_capacity(engine_kind::gpu, constant_tensor_cache_unlimited);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  matmul_pair p(eng, 64, 96, 80);
  memory a(p.a, eng), c(p.c, eng);
  std::optional<memory> w(memory(p.w, eng));
  ocl_test::write_all(a, ocl_test::pattern(p.a.size_bytes() / 4, 16));
  ocl_test::write_all(*w, ocl_test::pattern(p.w.size_bytes() / 4, 17));
  const auto expected = execute(p.plain, strm, a, *w, c);
  const std::size_t tensors = gpu_cache(eng).tensor_count();

  SECTION("flushed while the kernel is queued") {
    for (int i = 0; i < 3; ++i) {
      ocl_test::write_all(c, std::vector<float>(p.c.size_bytes() / 4, 0.0f));
      p.constant.execute(
          strm, {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, *w}, {PRIMCACHE_ARG_DST, c}});
      gpu_cache(eng).flush();  // the queued kernel still reads the buffer
      strm.wait();
      CHECK(same_bits(ocl_test::read_all(c), expected));
    }
  }
  SECTION("set_data_handle drops the entry; new contents are packed afresh") {
    execute(p.constant, strm, a, *w, c);
    CHECK(gpu_cache(eng).tensor_count() == tensors + 1);
    memory other(p.w, eng);
    ocl_test::write_all(other, ocl_test::pattern(p.w.size_bytes() / 4, 18));
    const auto expected2 = execute(p.plain, strm, a, other, c);
    w->set_data_handle(other.get_data_handle());
    CHECK(gpu_cache(eng).tensor_count() == tensors);
    const auto before = packs();
    CHECK(same_bits(execute(p.constant, strm, a, *w, c), expected2));
    CHECK(packs() == before + 1);
  }
  SECTION("the weights memory's last copy going drops the entry") {
    execute(p.constant, strm, a, *w, c);
    CHECK(gpu_cache(eng).tensor_count() == tensors + 1);
    w.reset();
    CHECK(gpu_cache(eng).tensor_count() == tensors);
  }
}

TEST_CASE("OpenCL convolution packs constant weights given in another layout once",
          "[ocl][constant][conv]") {
  set_constant_tensor_cache_capacity(engine_kind::gpu, constant_tensor_cache_unlimited);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  const memory::desc src({1, 6, 9, 7}, data_type::f32, format_tag::nchw);
  const memory::desc oihw({10, 6, 3, 3}, data_type::f32, format_tag::oihw);
  const memory::desc hwio({10, 6, 3, 3}, data_type::f32, format_tag::hwio);
  const memory::desc dst({1, 10, 9, 7}, data_type::f32, format_tag::nchw);
  auto conv_pd = [&](const memory::desc& w, bool constant) {
    primitive_attr attr;
    attr.set_constant_weights(constant);
    return convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, src,
                                  w, memory::desc(), dst, {1, 1}, {1, 1}, {1, 1}),
        attr, eng);
  };
  memory ms(src, eng), mw_oihw(oihw, eng), mw_hwio(hwio, eng), md(dst, eng);
  ocl_test::write_all(ms, ocl_test::pattern(src.size_bytes() / 4, 40));
  const auto w = ocl_test::pattern(oihw.size_bytes() / 4, 41);
  ocl_test::write_all(mw_oihw, w);
  std::vector<float> w_hwio(w.size());
  for (const auto& i : ocl_test::all_indices({10, 6, 3, 3})) {
    w_hwio[static_cast<std::size_t>(hwio.offset_of(i))] =
        w[static_cast<std::size_t>(oihw.offset_of(i))];
  }
  ocl_test::write_all(mw_hwio, w_hwio);
  auto run = [&](const convolution_forward& prim, const memory& weights) {
    prim.execute(
        strm, {{PRIMCACHE_ARG_SRC, ms}, {PRIMCACHE_ARG_WEIGHTS, weights}, {PRIMCACHE_ARG_DST, md}});
    strm.wait();
    return ocl_test::read_all(md);
  };
  // The kernel the constant primitive runs is the one for hwio weights.
  const auto expected = run(convolution_forward(conv_pd(hwio, false)), mw_hwio);
  const convolution_forward constant(conv_pd(oihw, true));
  CHECK(constant.get_primitive_desc().weights_desc() == oihw);  // the argument stays the user's
  const std::size_t tensors = gpu_cache(eng).tensor_count();
  const auto before = packs();
  for (int i = 0; i < 3; ++i) CHECK(same_bits(run(constant, mw_oihw), expected));
  CHECK(packs() == before + 1);
  CHECK(gpu_cache(eng).tensor_count() == tensors + 1);

  SECTION("weights already in the kernel's layout are read as given") {
    const convolution_forward as_given(conv_pd(hwio, true));
    CHECK(same_bits(run(as_given, mw_hwio), expected));
    CHECK(packs() == before + 1);
    CHECK(gpu_cache(eng).tensor_count() == tensors + 1);
  }
}

TEST_CASE("a constant-weights matmul round-trips through its blob, packing kernel included",
          "[ocl][constant][persist]") {
  set_constant_tensor_cache_capacity(engine_kind::gpu, constant_tensor_cache_unlimited);
  set_primitive_cache_capacity(1024);
  engine eng(engine_kind::gpu, 0);
  stream strm(eng);
  matmul_pair p(eng, 6, 21, 14, /*transposed=*/true);
  memory a(p.a, eng), w(p.w, eng), c(p.c, eng);
  ocl_test::write_all(a, ocl_test::pattern(p.a.size_bytes() / 4, 50));
  ocl_test::write_all(w, ocl_test::pattern(p.w.size_bytes() / 4, 51));
  const auto expected = execute(p.plain, strm, a, w, c);
  const std::vector<std::uint8_t> blob = p.constant.cache_blob();
  const primitive_desc pd = p.constant.get_primitive_desc();
  p.constant = matmul();
  set_primitive_cache_capacity(0);  // the impl goes; the blob is all there is
  set_primitive_cache_capacity(1024);
  const auto before = ocl_interop::get_program_counts();
  const primitive loaded(pd, blob);
  memory w2(p.w, eng);  // new weights: the loaded packing kernel runs
  ocl_test::write_all(w2, ocl_test::pattern(p.w.size_bytes() / 4, 51));
  CHECK(same_bits(execute(loaded, strm, a, w2, c), expected));
  const auto after = ocl_interop::get_program_counts();
  CHECK(after.source_builds == before.source_builds);
  CHECK(after.weights_packs == before.weights_packs + 1);
}
