// Constant weights through the public API (issue 12): the attribute, memory
// ids, packed weights kept in the CPU device's constant tensor cache, and
// what happens when the cache keeps nothing.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "primcache/const_cache/constant_tensor_cache.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primitives/constant_weights.hpp"

using namespace primcache;
using tag = format_tag;
namespace ci = primcache::cpu_internal;

namespace {

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

void fill(float* p, std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (std::size_t i = 0; i < n; ++i) p[i] = dist(rng);
}

// dst = src x wei (+ relu), row-major, in double.
std::vector<float> expected(const std::vector<float>& src, const float* wei, int m, int n, int k,
                            bool relu = false) {
  std::vector<float> out(static_cast<std::size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int x = 0; x < k; ++x) s += double(src[i * k + x]) * wei[std::size_t(x) * n + j];
      out[std::size_t(i) * n + j] = static_cast<float>(relu && s < 0 ? 0 : s);
    }
  return out;
}

// Largest difference; 1e-3 bounds f32 sums of K <= 700 products of [-1, 1]
// values far from their worst case, and stale weights are off by O(1).
float max_diff(const std::vector<float>& a, const float* b) {
  float d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

struct matmul_case {
  int m, n, k;
  bool relu = false;
  bool constant = true;

  memory::desc a_md() const { return {{m, k}, data_type::f32, tag::ab}; }
  memory::desc b_md() const { return {{k, n}, data_type::f32, tag::ab}; }
  memory::desc c_md() const { return {{m, n}, data_type::f32, tag::ab}; }
  matmul prim() const {
    primitive_attr attr;
    attr.set_constant_weights(constant);
    if (relu) {
      post_ops ops;
      ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
      attr.set_post_ops(ops);
    }
    return matmul(matmul::primitive_desc(matmul::desc(a_md(), b_md(), c_md()), attr, cpu()));
  }
};

// Runs `prim` on src (seeded) and `wei`; returns dst.
std::vector<float> run(const matmul& prim, const matmul_case& c, const memory& wei,
                       const std::vector<float>& src) {
  memory a(c.a_md(), cpu(), const_cast<float*>(src.data()));
  memory d(c.c_md(), cpu());
  stream s(cpu());
  prim.execute(s, {{PRIMCACHE_ARG_SRC, a}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, d}});
  const auto* p = static_cast<const float*>(d.get_data_handle());
  return std::vector<float>(p, p + std::size_t(c.m) * c.n);
}

std::vector<float> random_src(const matmul_case& c, unsigned seed) {
  std::vector<float> v(std::size_t(c.m) * c.k);
  fill(v.data(), v.size(), seed);
  return v;
}

constant_tensor_cache& cache() {
  return ci::cpu_constant_cache();
}

}  // namespace

TEST_CASE("memory ids are unique, shared by copies and renewed by set_data_handle",
          "[cpu][constant][memory_id]") {
  memory::desc md({4, 4}, data_type::f32, tag::ab);
  memory a(md, cpu()), b(md, cpu());
  CHECK(a.get_id() != 0);
  CHECK(b.get_id() > a.get_id());  // increasing
  memory copy = a;
  CHECK(copy.get_id() == a.get_id());
  std::vector<float> buf(16);
  const std::uint64_t before = a.get_id();
  a.set_data_handle(buf.data());
  CHECK(a.get_id() > b.get_id());
  CHECK(copy.get_id() == a.get_id());
  // The same pointer again: the data may be other data.
  const std::uint64_t second = a.get_id();
  a.set_data_handle(buf.data());
  CHECK(a.get_id() != second);
  CHECK(a.get_id() != before);
  // A wrapped buffer at an address another memory used gets a new id.
  memory w1(md, cpu(), buf.data());
  memory w2(md, cpu(), buf.data());
  CHECK(w1.get_id() != w2.get_id());
  CHECK_THROWS_AS(memory().get_id(), error);
}

TEST_CASE("the constant-weights attribute tells primitive descriptors apart",
          "[cpu][constant][attr]") {
  primitive_attr plain, constant;
  constant.set_constant_weights(true);
  CHECK_FALSE(plain.get_constant_weights());
  CHECK(constant.get_constant_weights());
  CHECK_FALSE(plain == constant);
  // Not part of the attribute's key (code that does not change with it
  // shares its key), only of its run-time values.
  key_writer a, b, c, d;
  plain.write_key(a);
  constant.write_key(b);
  CHECK(a.finish() == b.finish());
  plain.write_run_time_values(c);
  constant.write_run_time_values(d);
  CHECK(c.finish() != d.finish());
  // The matmul's code reads prepacked weights: its key says so.
  const matmul_case mc{9, 20, 11};
  matmul_case nc = mc;
  nc.constant = false;
  const matmul pc = mc.prim(), pn = nc.prim();
  CHECK(pc.get_primitive_desc().impl_info_str() == pn.get_primitive_desc().impl_info_str());
  CHECK(backend::impl_of(pc.get_primitive_desc()).cache_key() !=
        backend::impl_of(pn.get_primitive_desc()).cache_key());
}

TEST_CASE("constant matmul weights are packed once and give the non-constant results",
          "[cpu][constant][matmul]") {
  for (matmul_case c : {matmul_case{33, 70, 50}, matmul_case{1, 300, 129}, matmul_case{7, 13, 5},
                        matmul_case{64, 200, 96, true}}) {
    memory wei(c.b_md(), cpu());
    fill(static_cast<float*>(wei.get_data_handle()), std::size_t(c.k) * c.n, 3);
    const auto src = random_src(c, 4);
    const auto want =
        expected(src, static_cast<const float*>(wei.get_data_handle()), c.m, c.n, c.k, c.relu);
    matmul_case plain = c;
    plain.constant = false;
    const matmul prim = c.prim();
    const auto before = cache().stats();
    const std::size_t tensors = cache().tensor_count();
    for (int rep = 0; rep < 3; ++rep) {
      const auto got = run(prim, c, wei, src);
      INFO(c.m << "x" << c.n << "x" << c.k << " rep " << rep);
      CHECK(max_diff(want, got.data()) < 1e-3f);
      CHECK(max_diff(run(plain.prim(), plain, wei, src), got.data()) < 1e-3f);
    }
    const auto after = cache().stats();
    CHECK(after.misses - before.misses == 1);  // packed once
    CHECK(after.hits - before.hits == 2);
    CHECK(cache().tensor_count() == tensors + 1);
  }
}

TEST_CASE("weights freed and reallocated at the same address get fresh packing",
          "[cpu][constant][matmul]") {
  const matmul_case c{24, 40, 30};
  const matmul prim = c.prim();
  const auto src = random_src(c, 5);
  std::vector<float> buf(std::size_t(c.k) * c.n);
  fill(buf.data(), buf.size(), 10);
  const auto want_a = expected(src, buf.data(), c.m, c.n, c.k);
  {
    memory w(c.b_md(), cpu(), buf.data());
    CHECK(max_diff(want_a, run(prim, c, w, src).data()) < 1e-3f);
  }
  // Other weights at the same address, in a new memory object.
  fill(buf.data(), buf.size(), 11);
  const auto want_b = expected(src, buf.data(), c.m, c.n, c.k);
  REQUIRE(max_diff(want_a, want_b.data()) > 0.1f);
  memory w(c.b_md(), cpu(), buf.data());
  CHECK(max_diff(want_b, run(prim, c, w, src).data()) < 1e-3f);

  // Memory the runtime allocates, freed and allocated again (the allocator
  // hands back the same block when it can).
  std::vector<float> first;
  void* first_address = nullptr;
  {
    memory m(c.b_md(), cpu());
    first_address = m.get_data_handle();
    fill(static_cast<float*>(m.get_data_handle()), buf.size(), 12);
    first = run(prim, c, m, src);
  }
  memory m(c.b_md(), cpu());
  fill(static_cast<float*>(m.get_data_handle()), buf.size(), 13);
  const auto want_m = expected(src, static_cast<const float*>(m.get_data_handle()), c.m, c.n, c.k);
  INFO("same address: " << (m.get_data_handle() == first_address));
  CHECK(max_diff(want_m, run(prim, c, m, src).data()) < 1e-3f);
}

TEST_CASE("set_data_handle gets fresh packing, even to the same pointer",
          "[cpu][constant][matmul]") {
  const matmul_case c{16, 48, 20};
  const matmul prim = c.prim();
  const auto src = random_src(c, 6);
  std::vector<float> x(std::size_t(c.k) * c.n), y(x.size());
  fill(x.data(), x.size(), 20);
  fill(y.data(), y.size(), 21);
  memory w(c.b_md(), cpu(), x.data());
  CHECK(max_diff(expected(src, x.data(), c.m, c.n, c.k), run(prim, c, w, src).data()) < 1e-3f);
  w.set_data_handle(y.data());
  CHECK(max_diff(expected(src, y.data(), c.m, c.n, c.k), run(prim, c, w, src).data()) < 1e-3f);
  fill(y.data(), y.size(), 22);  // new contents, then the same pointer again
  w.set_data_handle(y.data());
  CHECK(max_diff(expected(src, y.data(), c.m, c.n, c.k), run(prim, c, w, src).data()) < 1e-3f);
}

TEST_CASE("primitives with the same weights and packing share one packed buffer",
          "[cpu][constant][matmul]") {
  const matmul_case a{32, 64, 40};
  matmul_case b = a;
  b.relu = true;  // other code, same packing
  const matmul pa = a.prim(), pb = b.prim();
  REQUIRE(backend::impl_of(pa.get_primitive_desc()).cache_key() !=
          backend::impl_of(pb.get_primitive_desc()).cache_key());
  memory wei(a.b_md(), cpu());
  fill(static_cast<float*>(wei.get_data_handle()), std::size_t(a.k) * a.n, 30);
  const auto src = random_src(a, 31);
  const auto* w = static_cast<const float*>(wei.get_data_handle());
  const auto before = cache().stats();
  CHECK(max_diff(expected(src, w, a.m, a.n, a.k), run(pa, a, wei, src).data()) < 1e-3f);
  CHECK(max_diff(expected(src, w, a.m, a.n, a.k, true), run(pb, b, wei, src).data()) < 1e-3f);
  const auto after = cache().stats();
  CHECK(after.misses - before.misses == 1);
  CHECK(after.hits - before.hits == 1);
  // Other weights: their own buffer.
  memory other(a.b_md(), cpu());
  fill(static_cast<float*>(other.get_data_handle()), std::size_t(a.k) * a.n, 32);
  run(pb, b, other, src);
  CHECK(cache().stats().misses - after.misses == 1);
}

TEST_CASE("with the cache disabled or full, constant weights are packed per call",
          "[cpu][constant][capacity]") {
  const matmul_case c{20, 600, 500};  // 1.2 MB packed
  const matmul prim = c.prim();
  const auto src = random_src(c, 40);
  memory wei(c.b_md(), cpu());
  fill(static_cast<float*>(wei.get_data_handle()), std::size_t(c.k) * c.n, 41);
  const auto want = expected(src, static_cast<const float*>(wei.get_data_handle()), c.m, c.n, c.k);
  struct restore {
    ~restore() { cache().set_capacity(constant_tensor_cache::unlimited); }
  } restore_capacity;

  // The primitive was made while the cache kept tensors: its kernel reads
  // prepacked weights, so each call packs them — into a buffer reused from
  // call to call, not fresh memory each time (fresh pages for tens of MB
  // cost several times the kernel).
  cache().set_capacity(0);  // disabled: flushes, keeps nothing
  auto before = cache().stats();
  auto allocations = ci::packing_buffer_allocations();
  for (int rep = 0; rep < 4; ++rep) CHECK(max_diff(want, run(prim, c, wei, src).data()) < 1e-3f);
  auto after = cache().stats();
  CHECK(after.misses - before.misses == 4);  // packed on each call
  CHECK(after.refusals - before.refusals == 4);
  CHECK(cache().tensor_count() == 0);
  CHECK(ci::packing_buffer_allocations() - allocations <= 1);

  cache().set_capacity(1);  // 1 MB under no_evict: the tensor does not fit
  before = cache().stats();
  allocations = ci::packing_buffer_allocations();
  for (int rep = 0; rep < 4; ++rep) CHECK(max_diff(want, run(prim, c, wei, src).data()) < 1e-3f);
  after = cache().stats();
  CHECK(after.misses - before.misses == 4);
  CHECK(after.refusals - before.refusals == 4);
  CHECK(cache().tensor_count() == 0);
  CHECK(ci::packing_buffer_allocations() - allocations <= 1);

  // Full with other tensors: ours was kept before it filled, so it is found.
  cache().set_capacity(2);
  REQUIRE(max_diff(want, run(prim, c, wei, src).data()) < 1e-3f);
  REQUIRE(cache().tensor_count() == 1);
  memory other(c.b_md(), cpu());  // another 1.2 MB: does not fit beside it
  fill(static_cast<float*>(other.get_data_handle()), std::size_t(c.k) * c.n, 42);
  run(prim, c, other, src);
  REQUIRE(cache().tensor_count() == 1);
  REQUIRE_FALSE(cache().would_keep(std::size_t(c.k) * c.n * 4));
  before = cache().stats();
  CHECK(max_diff(want, run(prim, c, wei, src).data()) < 1e-3f);
  after = cache().stats();
  CHECK(after.hits - before.hits == 1);
  CHECK(after.misses == before.misses);
  cache().flush();

  cache().set_capacity(64);  // room again: kept
  before = cache().stats();
  for (int rep = 0; rep < 2; ++rep) CHECK(max_diff(want, run(prim, c, wei, src).data()) < 1e-3f);
  after = cache().stats();
  CHECK(after.misses - before.misses == 1);
  CHECK(cache().tensor_count() == 1);
}

TEST_CASE("a matmul made while the constant cache keeps nothing reads its weights as they are",
          "[cpu][constant][capacity]") {
  struct restore {
    ~restore() { cache().set_capacity(constant_tensor_cache::unlimited); }
  } restore_capacity;
  const matmul_case c{8, 96, 40};
  matmul_case plain = c;
  plain.constant = false;
  const auto plain_key = backend::impl_of(plain.prim().get_primitive_desc()).cache_key();

  cache().set_capacity(constant_tensor_cache::unlimited);
  const matmul prepacked = c.prim();
  CHECK(backend::impl_of(prepacked.get_primitive_desc()).cache_key() != plain_key);

  cache().set_capacity(0);
  // Not the descriptor made a moment ago for the same op and attributes.
  const matmul as_is = c.prim();
  CHECK(backend::impl_of(as_is.get_primitive_desc()).cache_key() == plain_key);
  const auto src = random_src(c, 45);
  memory wei(c.b_md(), cpu());
  fill(static_cast<float*>(wei.get_data_handle()), std::size_t(c.k) * c.n, 46);
  const auto before = cache().stats();
  const auto allocations = ci::packing_buffer_allocations();
  CHECK(max_diff(expected(src, static_cast<const float*>(wei.get_data_handle()), c.m, c.n, c.k),
                 run(as_is, c, wei, src).data()) < 1e-3f);
  CHECK(cache().stats().misses == before.misses);  // nothing asked of the cache
  CHECK(ci::packing_buffer_allocations() == allocations);

  cache().set_capacity(64);  // kept again: prepacked again
  CHECK(backend::impl_of(c.prim().get_primitive_desc()).cache_key() ==
        backend::impl_of(prepacked.get_primitive_desc()).cache_key());
}

TEST_CASE("with the cache disabled, constant convolution weights are packed by the kernel",
          "[cpu][constant][capacity][conv]") {
  struct restore {
    ~restore() { cache().set_capacity(constant_tensor_cache::unlimited); }
  } restore_capacity;
  const memory::desc src_md({1, 16, 12, 12}, data_type::f32, tag::nChw16c);
  const memory::desc wei_md({32, 16, 3, 3}, data_type::f32, tag::oihw);
  const memory::desc dst_md({1, 32, 12, 12}, data_type::f32, tag::nChw16c);
  const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                    src_md, wei_md, memory::desc(), dst_md, {1, 1}, {1, 1}, {1, 1});
  primitive_attr constant;
  constant.set_constant_weights(true);
  const convolution_forward pc(convolution_forward::primitive_desc(d, constant, cpu()));
  const convolution_forward pn(convolution_forward::primitive_desc(d, cpu()));
  memory src(src_md, cpu()), wei(wei_md, cpu());
  fill(static_cast<float*>(src.get_data_handle()), src_md.size_bytes() / 4, 70);
  fill(static_cast<float*>(wei.get_data_handle()), wei_md.size_bytes() / 4, 71);
  auto run_conv = [&](const convolution_forward& p) {
    memory dst(dst_md, cpu());
    stream s(cpu());
    p.execute(s,
              {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}});
    const auto* q = static_cast<const float*>(dst.get_data_handle());
    return std::vector<float>(q, q + dst_md.size_bytes() / 4);
  };
  const auto want = run_conv(pn);
  cache().set_capacity(0);
  const auto before = cache().stats();
  const auto allocations = ci::packing_buffer_allocations();
  for (int rep = 0; rep < 3; ++rep) {
    const auto got = run_conv(pc);
    CHECK(std::memcmp(got.data(), want.data(), want.size() * 4) == 0);
  }
  const auto after = cache().stats();
  CHECK(after.misses - before.misses == 3);
  CHECK(after.refusals - before.refusals == 3);
  CHECK(cache().tensor_count() == 0);
  // Declined: no buffer packed outside the kernel.
  CHECK(ci::packing_buffer_allocations() == allocations);
}

TEST_CASE("constant convolution weights are packed once, bitwise as per call",
          "[cpu][constant][conv]") {
  const memory::desc src_md({1, 16, 10, 10}, data_type::f32, tag::nChw16c);
  const memory::desc wei_md({40, 16, 3, 3}, data_type::f32, tag::oihw);  // packed by the kernel
  const memory::desc dst_md({1, 40, 10, 10}, data_type::f32, tag::nhwc);
  const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                    src_md, wei_md, memory::desc(), dst_md, {1, 1}, {1, 1}, {1, 1});
  primitive_attr constant;
  constant.set_constant_weights(true);
  const convolution_forward pc(convolution_forward::primitive_desc(d, constant, cpu()));
  const convolution_forward pn(convolution_forward::primitive_desc(d, cpu()));
  memory src(src_md, cpu()), wei(wei_md, cpu());
  fill(static_cast<float*>(src.get_data_handle()), src_md.size_bytes() / 4, 50);
  fill(static_cast<float*>(wei.get_data_handle()), wei_md.size_bytes() / 4, 51);
  auto run_conv = [&](const convolution_forward& p, const memory& w) {
    memory dst(dst_md, cpu());
    stream s(cpu());
    p.execute(s, {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, w}, {PRIMCACHE_ARG_DST, dst}});
    const auto* q = static_cast<const float*>(dst.get_data_handle());
    return std::vector<float>(q, q + dst_md.size_bytes() / 4);
  };
  const auto want = run_conv(pn, wei);
  const auto before = cache().stats();
  for (int rep = 0; rep < 3; ++rep) {
    const auto got = run_conv(pc, wei);
    CHECK(std::memcmp(got.data(), want.data(), want.size() * 4) == 0);
  }
  const auto after = cache().stats();
  CHECK(after.misses - before.misses == 1);
  CHECK(after.hits - before.hits == 2);
  // Without the attribute nothing is kept, even from the same impl.
  run_conv(pn, wei);
  CHECK(cache().stats().misses == after.misses);
  CHECK(cache().stats().hits == after.hits);
  // New weights at the same address: fresh packing.
  memory again(wei_md, cpu(), wei.get_data_handle());
  fill(static_cast<float*>(again.get_data_handle()), wei_md.size_bytes() / 4, 52);
  const auto want2 = run_conv(pn, again);
  const auto got2 = run_conv(pc, again);
  CHECK(std::memcmp(got2.data(), want2.data(), want2.size() * 4) == 0);
  CHECK(std::memcmp(got2.data(), want.data(), want.size() * 4) != 0);

  // Weights already in the kernel's layout are read in place: nothing kept.
  const convolution_forward::desc any(prop_kind::forward_inference, algorithm::convolution_direct,
                                      src_md, memory::desc(wei_md.dims(), data_type::f32, tag::any),
                                      memory::desc(), dst_md, {1, 1}, {1, 1}, {1, 1});
  const convolution_forward::primitive_desc pd_any(any, constant, cpu());
  const convolution_forward p_any(pd_any);
  memory w_any(pd_any.weights_desc(), cpu());
  fill(static_cast<float*>(w_any.get_data_handle()), pd_any.weights_desc().size_bytes() / 4, 53);
  const std::size_t tensors = cache().tensor_count();
  run_conv(p_any, w_any);
  CHECK(cache().tensor_count() == tensors);
}

TEST_CASE("data release actions run once the memory's id dies", "[cpu][constant][memory_id]") {
  memory::desc md({4, 4}, data_type::f32, tag::ab);
  std::vector<float> other(16);
  int runs_a = 0, runs_b = 0;
  {
    memory m(md, cpu());
    backend::on_data_release(m, "a", [&] { ++runs_a; });
    backend::on_data_release(m, "a", [&] { runs_a += 100; });  // same token: ignored
    backend::on_data_release(m, "b", [&] { ++runs_b; });
    {
      memory copy = m;  // a copy going changes nothing
    }
    CHECK(runs_a == 0);
    m.set_data_handle(other.data());  // the data is released
    CHECK(runs_a == 1);
    CHECK(runs_b == 1);
    backend::on_data_release(m, "a", [&] { ++runs_a; });  // the new data's
    m.set_data_handle(other.data());
    CHECK(runs_a == 2);
    backend::on_data_release(m, "b", [&] { ++runs_b; });
  }  // the last copy goes
  CHECK(runs_a == 2);
  CHECK(runs_b == 2);
  CHECK_THROWS_AS(backend::on_data_release(memory(), "a", [] {}), error);
}

TEST_CASE("packed weights leave the cache when their memory's id dies", "[cpu][constant][matmul]") {
  const matmul_case c{12, 80, 24};
  const matmul prim = c.prim();
  matmul_case relu = c;
  relu.relu = true;
  const matmul prim_relu = relu.prim();
  const auto src = random_src(c, 60);
  const std::size_t base = cache().tensor_count();
  std::vector<float> x(std::size_t(c.k) * c.n), y(x.size());
  fill(x.data(), x.size(), 61);
  fill(y.data(), y.size(), 62);
  {
    memory w(c.b_md(), cpu(), x.data());
    run(prim, c, w, src);
    run(prim_relu, relu, w, src);  // the same entry
    CHECK(cache().tensor_count() == base + 1);
    w.set_data_handle(y.data());  // the old id's entry goes
    CHECK(cache().tensor_count() == base);
    CHECK(max_diff(expected(src, y.data(), c.m, c.n, c.k), run(prim, c, w, src).data()) < 1e-3f);
    CHECK(cache().tensor_count() == base + 1);
    memory copy = w;
  }  // the last copy goes: so does the entry
  CHECK(cache().tensor_count() == base);
}
