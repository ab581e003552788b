// Descriptors whose element 0 sits offset0 elements into the buffer, and
// binary post-op operands with offsets or strides, through the public API on
// every tier of the CPU backend: the specialized kernel (sync mode), the
// generic kernel a tiered creation runs first and the specialized one it
// swaps in, and the reference ("ref:", under an ISA cap below avx2).
//
// Every case either computes what plain loops written here compute (over
// logical indices, addressed by memory_desc::offset_of, which counts
// offset0) and leaves the buffer outside the tensor's elements as it was,
// or is refused with status::unimplemented when the descriptor is created:
// never a silent wrong result. What docs/cpu.md says the backend supports
// must compute.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/runtime.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

// What the buffer holds outside the tensor's elements: a kernel that reads
// it (offset0 ignored) gets a sum far from the expected one, and one that
// writes it is caught by the comparison of the whole buffer.
constexpr float kPoison = 1000.f;

// A memory of `md` whose whole buffer is kPoison except its logical
// elements, which get values in [-1, 1).
memory make(const memory::desc& md, unsigned seed) {
  memory m(md, cpu());
  auto* p = static_cast<float*>(m.get_data_handle());
  for (std::size_t i = 0; i < md.size_bytes() / sizeof(float); ++i) p[i] = kPoison;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> v(-1.f, 1.f);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(md.ndims()), 0);
  for (std::int64_t i = 0; i < md.nelems(); ++i) {
    std::int64_t rest = i;
    for (int d = md.ndims() - 1; d >= 0; --d) {
      idx[static_cast<std::size_t>(d)] = rest % md.dims()[d];
      rest /= md.dims()[d];
    }
    p[md.offset_of(idx)] = v(rng);
  }
  return m;
}

std::vector<float> contents(const memory& m) {
  const auto* p = static_cast<const float*>(m.get_data_handle());
  return std::vector<float>(p, p + m.get_desc().size_bytes() / sizeof(float));
}

// The tier a primitive runs on, set for the scope of a case.
enum class tier { specialized, tiered, reference };

const char* name(tier t) {
  switch (t) {
    case tier::specialized: return "specialized (sync)";
    case tier::tiered: return "tiered (generic, then specialized)";
    case tier::reference: return "reference";
  }
  return "?";
}

// Sets the JIT mode and the ISA cap for a tier and empties the primitive
// cache (capacity 0: every creation is a fresh one, on the tier asked for);
// restores all three.
struct tier_scope {
  jit_mode saved_mode = get_jit_mode();
  int saved_capacity = get_primitive_cache_capacity();
  std::optional<cpu_isa> saved_cap = max_cpu_isa();

  explicit tier_scope(tier t) {
    set_primitive_cache_capacity(0);
    set_jit_mode(t == tier::tiered ? jit_mode::tiered : jit_mode::sync);
    if (t == tier::reference) set_max_cpu_isa(cpu_isa::avx);
  }
  ~tier_scope() {
    if (saved_cap) {
      set_max_cpu_isa(*saved_cap);
    } else {
      clear_max_cpu_isa();
    }
    set_jit_mode(saved_mode);
    set_primitive_cache_capacity(saved_capacity);
  }
};

// Runs `prim` with `args` (dst under `dst_arg`, filled afresh each run) and
// checks dst's whole buffer: the expected value at each of its elements
// (within `tol` of each), kPoison everywhere else. In tiered mode the first
// run is the generic kernel's unless the specialization was quicker; the
// second, after the swap, the specialized kernel's.
void run_and_check(const primitive& prim, primitive::args args, int dst_arg,
                   const memory::desc& dst_md, const std::vector<double>& expected,
                   const std::vector<double>& tol, tier t) {
  const int runs = t == tier::tiered ? 2 : 1;
  for (int run = 0; run < runs; ++run) {
    if (run == 1) prim.wait_until_specialized();
    INFO("run " << run << (prim.specialized() ? " (specialized code)" : " (generic code)"));
    memory dst(dst_md, cpu());
    auto* d = static_cast<float*>(dst.get_data_handle());
    for (std::size_t i = 0; i < dst_md.size_bytes() / sizeof(float); ++i) d[i] = kPoison;
    args[dst_arg] = dst;
    prim.execute(stream(cpu()), args);
    const std::vector<float> got = contents(dst);
    std::size_t wrong = 0;
    std::string first;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const bool element = !std::isnan(expected[i]);
      const bool ok = element ? std::abs(got[i] - expected[i]) <= tol[i] : got[i] == kPoison;
      if (!ok && wrong++ == 0) {
        first = "at buffer element " + std::to_string(i) + ": got " + std::to_string(got[i]) +
                ", expected " + (element ? std::to_string(expected[i]) : "it untouched");
      }
    }
    INFO(wrong << " of " << got.size() << " buffer elements wrong; first " << first);
    CHECK(wrong == 0);
  }
}

// A buffer-sized expectation: NaN (untouched) outside the tensor's elements.
struct expectation {
  std::vector<double> value, tol;
  explicit expectation(const memory::desc& md)
      : value(md.size_bytes() / sizeof(float), std::nan("")), tol(value.size(), 0.0) {}
  void set(std::int64_t off, double v, double magnitude) {
    value[static_cast<std::size_t>(off)] = v;
    tol[static_cast<std::size_t>(off)] = 1e-5 * magnitude + 1e-5;
  }
};

const float* data(const memory& m) {
  return static_cast<const float*>(m.get_data_handle());
}

// Every logical index of dims, row-major.
void for_each_index(std::span<const std::int64_t> dims,
                    const std::function<void(const std::vector<std::int64_t>&)>& f) {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  std::vector<std::int64_t> idx(dims.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t rest = i;
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      idx[static_cast<std::size_t>(d)] = rest % dims[static_cast<std::size_t>(d)];
      rest /= dims[static_cast<std::size_t>(d)];
    }
    f(idx);
  }
}

// A binary post-op operand's value at dst's logical index: dims of size 1
// broadcast.
float operand_at(const memory& m, const std::vector<std::int64_t>& dst_index) {
  const memory::desc& md = m.get_desc();
  std::vector<std::int64_t> idx(dst_index);
  for (int d = 0; d < md.ndims(); ++d) {
    if (md.dims()[d] == 1) idx[static_cast<std::size_t>(d)] = 0;
  }
  return data(m)[md.offset_of(idx)];
}

// Creates a primitive descriptor, or reports that it was refused with
// status::unimplemented (the other acceptable outcome of a case that a
// backend may not support); any other failure fails the test.
template <class PD, class Make>
std::optional<PD> make_or_refused(Make make) {
  try {
    return make();
  } catch (const error& e) {
    INFO(e.what());
    CHECK(e.code() == status::unimplemented);
    return std::nullopt;
  }
}

// ---- matmul -----------------------------------------------------------------

struct matmul_case {
  std::int64_t batch = 0;  // 0: 2-D
  std::int64_t m = 5, k = 19, n = 37;
  std::int64_t src_off = 0, wei_off = 0, bias_off = 0, dst_off = 0;
  bool bias = true;
  bool transposed_weights = false;
  bool constant_weights = false;
  // Binary post-ops after a relu: a per-column operand and a scalar, each
  // with this offset0 (-1: not appended), and a dst-shaped one (laid out
  // as dst, its offset0 included).
  std::int64_t column_off = -1, scalar_off = -1;
  bool full_operand = false;

  std::string describe() const {
    return "batch " + std::to_string(batch) + " m" + std::to_string(m) + " k" + std::to_string(k) +
           " n" + std::to_string(n) + " offsets src " + std::to_string(src_off) + " wei " +
           std::to_string(wei_off) + " bias " + std::to_string(bias_off) + " dst " +
           std::to_string(dst_off) + (transposed_weights ? " transposed" : "") +
           (constant_weights ? " constant weights" : "") + " operands column " +
           std::to_string(column_off) + " scalar " + std::to_string(scalar_off) +
           (full_operand ? " full" : "");
  }
};

memory::dims dims_of(std::int64_t batch, std::int64_t r, std::int64_t c) {
  return batch ? memory::dims{batch, r, c} : memory::dims{r, c};
}

void check_matmul(const matmul_case& c, tier t) {
  INFO(c.describe() << " on the " << name(t) << " tier");
  const tier_scope scope(t);
  const tag plain = c.batch ? tag::abc : tag::ab;
  const tag wtag = c.transposed_weights ? (c.batch ? tag::acb : tag::ba) : plain;
  const memory::desc src_md =
      memory::desc(dims_of(c.batch, c.m, c.k), data_type::f32, plain).with_offset0(c.src_off);
  const memory::desc wei_md =
      memory::desc(dims_of(c.batch, c.k, c.n), data_type::f32, wtag).with_offset0(c.wei_off);
  const memory::desc bias_md =
      c.bias ? memory::desc(dims_of(c.batch ? 1 : 0, 1, c.n), data_type::f32, plain)
                   .with_offset0(c.bias_off)
             : memory::desc();
  const memory::desc dst_md =
      memory::desc(dims_of(c.batch, c.m, c.n), data_type::f32, plain).with_offset0(c.dst_off);
  const memory::desc column_md =
      memory::desc(dims_of(c.batch ? 1 : 0, 1, c.n), data_type::f32, plain)
          .with_offset0(std::max<std::int64_t>(c.column_off, 0));
  const memory::desc scalar_md = memory::desc(dims_of(c.batch ? 1 : 0, 1, 1), data_type::f32, plain)
                                     .with_offset0(std::max<std::int64_t>(c.scalar_off, 0));
  post_ops ops;
  ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.25f, 0.f);
  std::vector<std::pair<int, memory::desc>> operands;
  auto add_operand = [&](const memory::desc& md) {
    operands.emplace_back(static_cast<int>(ops.entries().size()), md);
    ops.append_binary(algorithm::binary_add, md);
  };
  if (c.column_off >= 0) add_operand(column_md);
  if (c.scalar_off >= 0) add_operand(scalar_md);
  if (c.full_operand) add_operand(dst_md);
  primitive_attr attr;
  attr.set_post_ops(ops);
  if (c.constant_weights) attr.set_constant_weights(true);

  const matmul::primitive_desc pd(matmul::desc(src_md, wei_md, bias_md, dst_md), attr, cpu());
  INFO("implementation " << pd.impl_info_str());
  if (t == tier::reference) CHECK(pd.impl_info_str().find("ref:") != std::string::npos);
  const memory src = make(src_md, 1), wei = make(wei_md, 2);
  const memory bias = c.bias ? make(bias_md, 3) : memory();
  std::vector<memory> operand_mems;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    operand_mems.push_back(make(operands[i].second, 10 + static_cast<unsigned>(i)));
  }

  expectation want(dst_md);
  for_each_index(dst_md.dims(), [&](const std::vector<std::int64_t>& di) {
    const std::int64_t b = c.batch ? di[0] : 0, i = di[di.size() - 2], j = di[di.size() - 1];
    double acc = 0, mag = 0;
    for (std::int64_t k = 0; k < c.k; ++k) {
      const double x =
          data(src)[src_md.offset_of(c.batch ? memory::dims{b, i, k} : memory::dims{i, k})];
      const double y =
          data(wei)[wei_md.offset_of(c.batch ? memory::dims{b, k, j} : memory::dims{k, j})];
      acc += x * y;
      mag += std::abs(x * y);
    }
    if (c.bias) {
      acc += data(bias)[bias_md.offset_of(c.batch ? memory::dims{0, 0, j} : memory::dims{0, j})];
    }
    acc = acc > 0 ? acc : 0.25 * acc;
    for (const memory& o : operand_mems) acc += operand_at(o, di);
    want.set(dst_md.offset_of(di), acc, mag + std::abs(acc));
  });

  matmul prim(pd);
  primitive::args args = {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}};
  if (c.bias) args[PRIMCACHE_ARG_BIAS] = bias;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(operands[i].first) | PRIMCACHE_ARG_SRC_1] =
        operand_mems[i];
  }
  run_and_check(prim, args, PRIMCACHE_ARG_DST, dst_md, want.value, want.tol, t);
  // Constant weights come from the constant tensor cache the second time.
  if (c.constant_weights) {
    run_and_check(prim, args, PRIMCACHE_ARG_DST, dst_md, want.value, want.tol, t);
  }
}

}  // namespace

TEST_CASE("matmul honours offset0 on src, weights, bias and dst on every tier",
          "[cpu][offset0][matmul]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  matmul_case c;
  SECTION("src") {
    c.src_off = 100;
  }
  SECTION("weights") {
    c.wei_off = 7;
  }
  SECTION("transposed weights") {
    c.transposed_weights = true;
    c.wei_off = 33;
  }
  SECTION("bias") {
    c.bias_off = 16;
  }
  SECTION("dst") {
    c.dst_off = 3;
  }
  SECTION("all four, batched") {
    c.batch = 3;
    c.src_off = 5;
    c.wei_off = 9;
    c.bias_off = 1;
    c.dst_off = 64;
  }
  SECTION("constant weights (packed once, keyed by their offset)") {
    c.constant_weights = true;
    c.wei_off = 11;
    c.src_off = 2;
  }
  check_matmul(c, t);
}

TEST_CASE("matmul binary post-op operands at an offset are read from their element 0",
          "[cpu][offset0][matmul][post_ops]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  matmul_case c;
  SECTION("per column") {
    c.column_off = 5;
  }
  SECTION("scalar") {
    c.scalar_off = 7;
  }
  SECTION("dst-shaped, dst at an offset") {
    c.dst_off = 12;
    c.full_operand = true;
  }
  SECTION("all three, batched, every tensor at an offset") {
    c.batch = 2;
    c.src_off = 3;
    c.wei_off = 4;
    c.bias_off = 5;
    c.dst_off = 6;
    c.column_off = 7;
    c.scalar_off = 8;
    c.full_operand = true;
  }
  check_matmul(c, t);
}

TEST_CASE("binary post-op operands that are not dense are refused or computed right",
          "[cpu][offset0][post_ops]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  INFO("tier " << name(t));
  const tier_scope scope(t);
  // The reviewer's case: a (1, N) operand with column stride 2 and a scalar
  // at offset 7, on a matmul of zeros: every output is 10 + 1.
  const std::int64_t m = 2, k = 4, n = 16;
  const memory::desc src_md({m, k}, data_type::f32, tag::ab);
  const memory::desc wei_md({k, n}, data_type::f32, tag::ab);
  const memory::desc dst_md({m, n}, data_type::f32, tag::ab);
  const memory::desc column_md({1, n}, data_type::f32, memory::dims{2 * n, 2});
  const memory::desc scalar_md = memory::desc({1, 1}, data_type::f32, tag::ab).with_offset0(7);
  post_ops ops;
  ops.append_binary(algorithm::binary_add, column_md);
  ops.append_binary(algorithm::binary_add, scalar_md);
  primitive_attr attr;
  attr.set_post_ops(ops);
  const auto pd = make_or_refused<matmul::primitive_desc>(
      [&] { return matmul::primitive_desc(matmul::desc(src_md, wei_md, dst_md), attr, cpu()); });
  if (!pd) return;
  memory src(src_md, cpu()), wei(wei_md, cpu()), column(column_md, cpu()), scalar(scalar_md, cpu());
  std::memset(src.get_data_handle(), 0, src_md.size_bytes());
  std::memset(wei.get_data_handle(), 0, wei_md.size_bytes());
  auto* pc = static_cast<float*>(column.get_data_handle());
  for (std::size_t i = 0; i < column_md.size_bytes() / 4; ++i) pc[i] = i % 2 == 0 ? 10.f : -999.f;
  auto* ps = static_cast<float*>(scalar.get_data_handle());
  for (std::size_t i = 0; i < scalar_md.size_bytes() / 4; ++i) ps[i] = i == 7 ? 1.f : -555.f;
  expectation want(dst_md);
  for (std::int64_t i = 0; i < m * n; ++i) want.set(i, 11.0, 11.0);
  run_and_check(matmul(*pd),
                {{PRIMCACHE_ARG_SRC, src},
                 {PRIMCACHE_ARG_WEIGHTS, wei},
                 {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(0) | PRIMCACHE_ARG_SRC_1, column},
                 {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1, scalar}},
                PRIMCACHE_ARG_DST, dst_md, want.value, want.tol, t);
}

TEST_CASE("a per-channel convolution operand with a channel stride is refused or computed right",
          "[cpu][offset0][conv][post_ops]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  INFO("tier " << name(t));
  const tier_scope scope(t);
  const std::int64_t oc = 32;
  const memory::desc src_md({1, 16, 4, 4}, data_type::f32, tag::nhwc);
  const memory::desc wei_md({oc, 16, 1, 1}, data_type::f32, tag::oihw);
  const memory::desc dst_md({1, oc, 4, 4}, data_type::f32, tag::nhwc);
  // Channel c at element 3 * c.
  const memory::desc chan_md({1, oc, 1, 1}, data_type::f32, memory::dims{3 * oc, 3, 1, 1});
  post_ops ops;
  ops.append_binary(algorithm::binary_add, chan_md);
  primitive_attr attr;
  attr.set_post_ops(ops);
  const auto pd = make_or_refused<convolution_forward::primitive_desc>([&] {
    return convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                  src_md, wei_md, memory::desc(), dst_md, {1, 1}, {0, 0}, {0, 0}),
        attr, cpu());
  });
  if (!pd) return;
  const memory src = make(src_md, 1), wei = make(wei_md, 2), chan = make(chan_md, 3);
  expectation want(dst_md);
  for_each_index(dst_md.dims(), [&](const std::vector<std::int64_t>& d) {
    double acc = 0, mag = 0;
    for (std::int64_t ic = 0; ic < 16; ++ic) {
      const double x = data(src)[src_md.offset_of({0, ic, d[2], d[3]})];
      const double y = data(wei)[wei_md.offset_of({d[1], ic, 0, 0})];
      acc += x * y;
      mag += std::abs(x * y);
    }
    acc += operand_at(chan, d);
    want.set(dst_md.offset_of(d), acc, mag + std::abs(acc));
  });
  run_and_check(convolution_forward(*pd),
                {{PRIMCACHE_ARG_SRC, src},
                 {PRIMCACHE_ARG_WEIGHTS, wei},
                 {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(0) | PRIMCACHE_ARG_SRC_1, chan}},
                PRIMCACHE_ARG_DST, dst_md, want.value, want.tol, t);
}

// ---- convolution ------------------------------------------------------------

namespace {

struct conv_case {
  std::int64_t ic = 16, oc = 16, h = 6, w = 7, k = 3, pad = 1, groups = 1;
  tag src = tag::nhwc, dst = tag::nhwc;
  std::int64_t src_off = 0, wei_off = 0, bias_off = 0, dst_off = 0;
  // Binary post-ops: a per-channel operand and a scalar at these offsets
  // (-1: none), a dst-shaped one laid out as dst.
  std::int64_t chan_off = -1, scalar_off = -1;
  bool full_operand = false;

  std::string describe() const {
    return "ic " + std::to_string(ic) + " oc " + std::to_string(oc) + " groups " +
           std::to_string(groups) + " k" + std::to_string(k) + " offsets src " +
           std::to_string(src_off) + " wei " + std::to_string(wei_off) + " bias " +
           std::to_string(bias_off) + " dst " + std::to_string(dst_off) + " operands chan " +
           std::to_string(chan_off) + " scalar " + std::to_string(scalar_off) +
           (full_operand ? " full" : "");
  }
};

void check_conv(const conv_case& c, tier t) {
  INFO(c.describe() << " on the " << name(t) << " tier");
  const tier_scope scope(t);
  const std::int64_t oh = c.h + 2 * c.pad - c.k + 1, ow = c.w + 2 * c.pad - c.k + 1;
  const std::int64_t icg = c.ic / c.groups, ocg = c.oc / c.groups;
  const memory::desc src_md =
      memory::desc({2, c.ic, c.h, c.w}, data_type::f32, c.src).with_offset0(c.src_off);
  const memory::desc wei_md =
      (c.groups == 1 ? memory::desc({c.oc, c.ic, c.k, c.k}, data_type::f32, tag::oihw)
                     : memory::desc({c.groups, ocg, icg, c.k, c.k}, data_type::f32, tag::goihw))
          .with_offset0(c.wei_off);
  const memory::desc bias_md =
      memory::desc({c.oc}, data_type::f32, tag::a).with_offset0(c.bias_off);
  const memory::desc dst_md =
      memory::desc({2, c.oc, oh, ow}, data_type::f32, c.dst).with_offset0(c.dst_off);
  post_ops ops;
  ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.5f, 0.f);
  std::vector<std::pair<int, memory::desc>> operands;
  auto add_operand = [&](const memory::desc& md) {
    operands.emplace_back(static_cast<int>(ops.entries().size()), md);
    ops.append_binary(algorithm::binary_add, md);
  };
  if (c.chan_off >= 0) {
    add_operand(memory::desc({1, c.oc, 1, 1}, data_type::f32, tag::nchw).with_offset0(c.chan_off));
  }
  if (c.scalar_off >= 0) {
    add_operand(memory::desc({1, 1, 1, 1}, data_type::f32, tag::nchw).with_offset0(c.scalar_off));
  }
  if (c.full_operand) add_operand(dst_md);
  primitive_attr attr;
  attr.set_post_ops(ops);
  const convolution_forward::primitive_desc pd(
      convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, src_md,
                                wei_md, bias_md, dst_md, {1, 1}, {c.pad, c.pad}, {c.pad, c.pad}),
      attr, cpu());
  INFO("implementation " << pd.impl_info_str());
  if (t == tier::reference) CHECK(pd.impl_info_str().find("ref:") != std::string::npos);
  const memory src = make(src_md, 1), wei = make(wei_md, 2), bias = make(bias_md, 3);
  std::vector<memory> operand_mems;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    operand_mems.push_back(make(operands[i].second, 10 + static_cast<unsigned>(i)));
  }

  expectation want(dst_md);
  for_each_index(dst_md.dims(), [&](const std::vector<std::int64_t>& d) {
    const std::int64_t n = d[0], o = d[1], y = d[2], x = d[3];
    const std::int64_t g = o / ocg;
    double acc = data(bias)[bias_md.offset_of({o})], mag = std::abs(acc);
    for (std::int64_t i = 0; i < icg; ++i) {
      for (std::int64_t kh = 0; kh < c.k; ++kh) {
        for (std::int64_t kw = 0; kw < c.k; ++kw) {
          const std::int64_t iy = y - c.pad + kh, ix = x - c.pad + kw;
          if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
          const double s = data(src)[src_md.offset_of({n, g * icg + i, iy, ix})];
          const double wv = data(wei)[c.groups == 1 ? wei_md.offset_of({o, i, kh, kw})
                                                    : wei_md.offset_of({g, o % ocg, i, kh, kw})];
          acc += s * wv;
          mag += std::abs(s * wv);
        }
      }
    }
    acc = acc > 0 ? acc : 0.5 * acc;
    for (const memory& m : operand_mems) acc += operand_at(m, d);
    want.set(dst_md.offset_of(d), acc, mag + std::abs(acc));
  });
  // nChw16c dst: the channel padding of the last block is written as zeros.
  if (dst_md.inner_nblks() != 0) {
    const std::int64_t padded = dst_md.padded_dims()[1];
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t o = c.oc; o < padded; ++o)
        for (std::int64_t y = 0; y < oh; ++y)
          for (std::int64_t x = 0; x < ow; ++x) want.set(dst_md.offset_of({n, o, y, x}), 0.0, 0.0);
  }

  convolution_forward prim(pd);
  primitive::args args = {
      {PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_BIAS, bias}};
  for (std::size_t i = 0; i < operands.size(); ++i) {
    args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(operands[i].first) | PRIMCACHE_ARG_SRC_1] =
        operand_mems[i];
  }
  run_and_check(prim, args, PRIMCACHE_ARG_DST, dst_md, want.value, want.tol, t);
}

}  // namespace

TEST_CASE("convolution honours offset0 on src, weights, bias and dst on every tier",
          "[cpu][offset0][conv]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  conv_case c;
  SECTION("bias") {
    c.bias_off = 16;
  }
  SECTION("bias, 1x1 channels-last (what the matmul route would take at offset 0)") {
    c.k = 1;
    c.pad = 0;
    c.oc = 48;
    c.bias_off = 5;
  }
  SECTION("src and dst, blocked") {
    c.src = c.dst = tag::nChw16c;
    c.oc = 24;
    c.src_off = 20;
    c.dst_off = 9;
  }
  SECTION("weights") {
    c.wei_off = 13;
  }
  SECTION("all four, nchw") {
    c.src = c.dst = tag::nchw;
    c.src_off = 1;
    c.wei_off = 2;
    c.bias_off = 3;
    c.dst_off = 4;
  }
  SECTION("depthwise, all four") {
    c.ic = c.oc = c.groups = 40;
    c.src_off = 6;
    c.wei_off = 7;
    c.bias_off = 8;
    c.dst_off = 9;
  }
  SECTION("grouped, bias") {
    c.ic = 16;
    c.oc = 32;
    c.groups = 2;
    c.bias_off = 31;
  }
  check_conv(c, t);
}

TEST_CASE("convolution binary post-op operands at an offset are read from their element 0",
          "[cpu][offset0][conv][post_ops]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  conv_case c;
  SECTION("per channel") {
    c.chan_off = 5;
  }
  SECTION("scalar") {
    c.scalar_off = 9;
  }
  SECTION("dst-shaped, dst at an offset") {
    c.dst_off = 17;
    c.full_operand = true;
  }
  SECTION("depthwise, all three, every tensor at an offset") {
    c.ic = c.oc = c.groups = 24;
    c.src = c.dst = tag::nChw16c;
    c.src_off = 1;
    c.wei_off = 2;
    c.bias_off = 3;
    c.dst_off = 4;
    c.chan_off = 5;
    c.scalar_off = 6;
    c.full_operand = true;
  }
  check_conv(c, t);
}

// ---- eltwise and reorder ------------------------------------------------------

TEST_CASE("eltwise honours offset0 on src, dst and its binary operands on every tier",
          "[cpu][offset0][eltwise]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  INFO("tier " << name(t));
  const tier_scope scope(t);
  const memory::dims dims = {2, 21, 5, 3};
  const tag layout = GENERATE(tag::nchw, tag::nhwc, tag::nChw16c);
  std::int64_t src_off = 0, dst_off = 0, chan_off = -1, scalar_off = -1;
  bool full = false;
  SECTION("src and dst") {
    src_off = 11;
    dst_off = 4;
  }
  SECTION("per-channel and scalar operands") {
    chan_off = 3;
    scalar_off = 6;
  }
  SECTION("everything at an offset") {
    src_off = 2;
    dst_off = 19;
    chan_off = 1;
    scalar_off = 30;
    full = true;
  }
  INFO("layout " << static_cast<int>(layout) << " offsets src " << src_off << " dst " << dst_off
                 << " chan " << chan_off << " scalar " << scalar_off << (full ? " full" : ""));
  const memory::desc src_md = memory::desc(dims, data_type::f32, layout).with_offset0(src_off);
  const memory::desc dst_md = memory::desc(dims, data_type::f32, layout).with_offset0(dst_off);
  post_ops ops;
  std::vector<memory> operands;
  if (chan_off >= 0) {
    const auto md = memory::desc({1, 21, 1, 1}, data_type::f32, tag::nchw).with_offset0(chan_off);
    ops.append_binary(algorithm::binary_add, md);
    operands.push_back(make(md, 20));
  }
  if (scalar_off >= 0) {
    const auto md = memory::desc({1, 1, 1, 1}, data_type::f32, tag::nchw).with_offset0(scalar_off);
    ops.append_binary(algorithm::binary_add, md);
    operands.push_back(make(md, 21));
  }
  if (full) {
    ops.append_binary(algorithm::binary_add, dst_md);
    operands.push_back(make(dst_md, 22));
  }
  primitive_attr attr;
  attr.set_post_ops(ops);
  const eltwise_forward::primitive_desc pd(
      eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_linear, src_md, dst_md,
                            2.f, 0.5f),
      attr, cpu());
  INFO("implementation " << pd.impl_info_str());
  const memory src = make(src_md, 1);
  expectation want(dst_md);
  for_each_index(dims, [&](const std::vector<std::int64_t>& d) {
    double v = 2.0 * data(src)[src_md.offset_of(d)] + 0.5;
    for (const memory& m : operands) v += operand_at(m, d);
    want.set(dst_md.offset_of(d), v, std::abs(v) + 4);
  });
  if (dst_md.inner_nblks() != 0) {  // channel padding written as zeros
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 21; c < 32; ++c)
        for (std::int64_t h = 0; h < 5; ++h)
          for (std::int64_t w = 0; w < 3; ++w) want.set(dst_md.offset_of({n, c, h, w}), 0.0, 0.0);
  }
  primitive::args args = {{PRIMCACHE_ARG_SRC, src}};
  for (std::size_t i = 0; i < operands.size(); ++i) {
    args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | PRIMCACHE_ARG_SRC_1] =
        operands[i];
  }
  run_and_check(eltwise_forward(pd), args, PRIMCACHE_ARG_DST, dst_md, want.value, want.tol, t);
}

TEST_CASE("reorder honours offset0 on both sides on every tier", "[cpu][offset0][reorder]") {
  const tier t = GENERATE(tier::specialized, tier::tiered, tier::reference);
  INFO("tier " << name(t));
  const tier_scope scope(t);
  const memory::dims dims = {2, 19, 4, 5};
  const auto [from, to] =
      GENERATE(std::pair{tag::nchw, tag::nChw16c}, std::pair{tag::nChw16c, tag::nhwc},
               std::pair{tag::nhwc, tag::nchw}, std::pair{tag::nchw, tag::nchw});
  const memory::desc src_md = memory::desc(dims, data_type::f32, from).with_offset0(13);
  const memory::desc dst_md = memory::desc(dims, data_type::f32, to).with_offset0(70);
  const reorder::primitive_desc pd(cpu(), src_md, cpu(), dst_md);
  INFO("implementation " << pd.impl_info_str() << " from " << static_cast<int>(from) << " to "
                         << static_cast<int>(to));
  const memory src = make(src_md, 1);
  expectation want(dst_md);
  for_each_index(dims, [&](const std::vector<std::int64_t>& d) {
    want.set(dst_md.offset_of(d), data(src)[src_md.offset_of(d)], 0.0);
  });
  if (dst_md.inner_nblks() != 0) {
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 19; c < 32; ++c)
        for (std::int64_t h = 0; h < 4; ++h)
          for (std::int64_t w = 0; w < 5; ++w) want.set(dst_md.offset_of({n, c, h, w}), 0.0, 0.0);
  }
  run_and_check(reorder(pd), {{PRIMCACHE_ARG_FROM, src}}, PRIMCACHE_ARG_TO, dst_md, want.value,
                want.tol, t);
}
