// Descriptors whose element 0 sits offset0 elements into the buffer, and
// binary post-op operands with offsets or strides, on the OpenCL backend:
// matmul, convolution (depthwise included), eltwise and reorder, with and
// without constant weights (the packing kernel reads the user's weights).
// Every case computes what plain host loops compute (addressed through
// memory_desc::offset_of, which counts offset0) and leaves the buffer
// outside dst's elements as it was, or is refused with
// status::unimplemented when the descriptor is created: never a silent
// wrong result.
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "host_reference.hpp"
#include "primcache/ocl/ocl.hpp"

using namespace primcache;
using tag = format_tag;

namespace {

constexpr float kPoison = 1000.f;

// A device memory whose buffer is kPoison outside its logical elements, and
// the host copy of what was written.
struct filled {
  memory mem;
  std::vector<float> host;
};

filled make(const memory::desc& md, const engine& eng, std::uint32_t seed) {
  filled f{memory(md, eng), std::vector<float>(md.size_bytes() / sizeof(float), kPoison)};
  std::vector<std::int64_t> dims(md.dims().begin(), md.dims().end());
  const auto values = ocl_test::pattern(static_cast<std::size_t>(md.nelems()), seed);
  std::size_t i = 0;
  for (const auto& idx : ocl_test::all_indices(dims)) {
    f.host[static_cast<std::size_t>(md.offset_of(idx))] = values[i++];
  }
  ocl_test::write_all(f.mem, f.host);
  return f;
}

// A binary operand's value at dst's logical index: dims of size 1 broadcast.
float operand_at(const filled& f, const std::vector<std::int64_t>& dst_index) {
  const memory::desc& md = f.mem.get_desc();
  std::vector<std::int64_t> idx(dst_index);
  for (int d = 0; d < md.ndims(); ++d) {
    if (md.dims()[d] == 1) idx[static_cast<std::size_t>(d)] = 0;
  }
  return f.host[static_cast<std::size_t>(md.offset_of(idx))];
}

// dst's whole buffer as it must be: NaN (untouched, kPoison) outside the
// tensor's elements.
struct expectation {
  std::vector<double> value, tol;
  explicit expectation(const memory::desc& md)
      : value(md.size_bytes() / sizeof(float), std::nan("")), tol(value.size(), 0.0) {}
  void set(std::int64_t off, double v, double magnitude) {
    value[static_cast<std::size_t>(off)] = v;
    tol[static_cast<std::size_t>(off)] = 1e-5 * magnitude + 1e-5;
  }
  // Any value will do (not NaN).
  void any(std::int64_t off) {
    value[static_cast<std::size_t>(off)] = 0.0;
    tol[static_cast<std::size_t>(off)] = INFINITY;
  }
};

// Runs prim (twice: constant weights come from the cache the second time)
// with dst filled with kPoison and checks dst's whole buffer.
void run_and_check(const primitive& prim, primitive::args args, int dst_arg,
                   const memory::desc& dst_md, const engine& eng, const expectation& want) {
  stream strm(eng);
  for (int run = 0; run < 2; ++run) {
    INFO("run " << run);
    memory dst(dst_md, eng);
    ocl_test::write_all(dst, std::vector<float>(dst_md.size_bytes() / sizeof(float), kPoison));
    args[dst_arg] = dst;
    prim.execute(strm, args);
    strm.wait();
    const std::vector<float> got = ocl_test::read_all(dst);
    std::size_t wrong = 0;
    std::string first;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const bool element = !std::isnan(want.value[i]);
      const bool ok = element ? std::abs(got[i] - want.value[i]) <= want.tol[i] : got[i] == kPoison;
      if (!ok && wrong++ == 0) {
        first = "at buffer element " + std::to_string(i) + ": got " + std::to_string(got[i]) +
                ", expected " + (element ? std::to_string(want.value[i]) : "it untouched");
      }
    }
    INFO(wrong << " of " << got.size() << " buffer elements wrong; first " << first);
    CHECK(wrong == 0);
  }
}

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

memory::dims dims_of(std::int64_t batch, std::int64_t r, std::int64_t c) {
  return batch ? memory::dims{batch, r, c} : memory::dims{r, c};
}

struct matmul_case {
  std::int64_t batch = 0;  // 0: 2-D
  std::int64_t m = 5, k = 19, n = 37;
  std::int64_t src_off = 0, wei_off = 0, bias_off = 0, dst_off = 0;
  bool transposed_weights = false;
  bool constant_weights = false;
  std::int64_t column_off = -1, scalar_off = -1;  // -1: no such operand
  bool full_operand = false;
};

void check_matmul(const matmul_case& c) {
  INFO("batch " << c.batch << " offsets src " << c.src_off << " wei " << c.wei_off << " bias "
                << c.bias_off << " dst " << c.dst_off << (c.transposed_weights ? " transposed" : "")
                << (c.constant_weights ? " constant" : "") << " operands column " << c.column_off
                << " scalar " << c.scalar_off << (c.full_operand ? " full" : ""));
  engine eng(engine_kind::gpu, 0);
  const tag plain = c.batch ? tag::abc : tag::ab;
  const tag wtag = c.transposed_weights ? (c.batch ? tag::acb : tag::ba) : plain;
  const memory::desc src_md =
      memory::desc(dims_of(c.batch, c.m, c.k), data_type::f32, plain).with_offset0(c.src_off);
  const memory::desc wei_md =
      memory::desc(dims_of(c.batch, c.k, c.n), data_type::f32, wtag).with_offset0(c.wei_off);
  const memory::desc bias_md = memory::desc(dims_of(c.batch ? 1 : 0, 1, c.n), data_type::f32, plain)
                                   .with_offset0(c.bias_off);
  const memory::desc dst_md =
      memory::desc(dims_of(c.batch, c.m, c.n), data_type::f32, plain).with_offset0(c.dst_off);
  post_ops ops;
  ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.25f, 0.f);
  std::vector<std::pair<int, memory::desc>> operands;
  auto add_operand = [&](const memory::desc& md) {
    operands.emplace_back(static_cast<int>(ops.entries().size()), md);
    ops.append_binary(algorithm::binary_add, md);
  };
  if (c.column_off >= 0) {
    add_operand(memory::desc(dims_of(c.batch ? 1 : 0, 1, c.n), data_type::f32, plain)
                    .with_offset0(c.column_off));
  }
  if (c.scalar_off >= 0) {
    add_operand(memory::desc(dims_of(c.batch ? 1 : 0, 1, 1), data_type::f32, plain)
                    .with_offset0(c.scalar_off));
  }
  if (c.full_operand) add_operand(dst_md);
  primitive_attr attr;
  attr.set_post_ops(ops);
  if (c.constant_weights) attr.set_constant_weights(true);
  const matmul::primitive_desc pd(matmul::desc(src_md, wei_md, bias_md, dst_md), attr, eng);

  const filled src = make(src_md, eng, 1), wei = make(wei_md, eng, 2), bias = make(bias_md, eng, 3);
  std::vector<filled> operand_mems;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    operand_mems.push_back(make(operands[i].second, eng, 10 + static_cast<std::uint32_t>(i)));
  }
  expectation want(dst_md);
  const std::vector<std::int64_t> ddims(dst_md.dims().begin(), dst_md.dims().end());
  for (const auto& di : ocl_test::all_indices(ddims)) {
    const std::int64_t b = c.batch ? di[0] : 0, i = di[di.size() - 2], j = di[di.size() - 1];
    double acc = 0, mag = 0;
    for (std::int64_t k = 0; k < c.k; ++k) {
      const double x = src.host[static_cast<std::size_t>(
          src_md.offset_of(c.batch ? memory::dims{b, i, k} : memory::dims{i, k}))];
      const double y = wei.host[static_cast<std::size_t>(
          wei_md.offset_of(c.batch ? memory::dims{b, k, j} : memory::dims{k, j}))];
      acc += x * y;
      mag += std::abs(x * y);
    }
    acc += bias.host[static_cast<std::size_t>(
        bias_md.offset_of(c.batch ? memory::dims{0, 0, j} : memory::dims{0, j}))];
    acc = acc > 0 ? acc : 0.25 * acc;
    for (const filled& o : operand_mems) acc += operand_at(o, di);
    want.set(dst_md.offset_of(di), acc, mag + std::abs(acc));
  }
  primitive::args args = {{PRIMCACHE_ARG_SRC, src.mem},
                          {PRIMCACHE_ARG_WEIGHTS, wei.mem},
                          {PRIMCACHE_ARG_BIAS, bias.mem}};
  for (std::size_t i = 0; i < operands.size(); ++i) {
    args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(operands[i].first) | PRIMCACHE_ARG_SRC_1] =
        operand_mems[i].mem;
  }
  run_and_check(matmul(pd), args, PRIMCACHE_ARG_DST, dst_md, eng, want);
}

}  // namespace

TEST_CASE("OpenCL matmul honours offset0 on src, weights, bias, dst and binary operands",
          "[ocl][offset0][matmul]") {
  matmul_case c;
  SECTION("src") {
    c.src_off = 100;
  }
  SECTION("weights, transposed") {
    c.transposed_weights = true;
    c.wei_off = 33;
  }
  SECTION("bias") {
    c.bias_off = 16;
  }
  SECTION("dst and a dst-shaped operand") {
    c.dst_off = 12;
    c.full_operand = true;
  }
  SECTION("per-column and scalar operands") {
    c.column_off = 5;
    c.scalar_off = 7;
  }
  SECTION("everything, batched") {
    c.batch = 2;
    c.src_off = 3;
    c.wei_off = 4;
    c.bias_off = 5;
    c.dst_off = 6;
    c.column_off = 7;
    c.scalar_off = 8;
    c.full_operand = true;
  }
  SECTION("constant weights (the packing kernel reads them from their offset)") {
    c.constant_weights = true;
    c.wei_off = 11;
    c.src_off = 2;
  }
  check_matmul(c);
}

TEST_CASE("OpenCL binary operands with strides and offsets are refused or computed right",
          "[ocl][offset0][post_ops]") {
  engine eng(engine_kind::gpu, 0);
  // A (1, N) operand with column stride 2 and a scalar at offset 7, on a
  // matmul of zeros: every output is 10 + 1.
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
      [&] { return matmul::primitive_desc(matmul::desc(src_md, wei_md, dst_md), attr, eng); });
  if (!pd) return;
  memory src(src_md, eng), wei(wei_md, eng), column(column_md, eng), scalar(scalar_md, eng);
  ocl_test::write_all(src, std::vector<float>(src_md.size_bytes() / 4, 0.f));
  ocl_test::write_all(wei, std::vector<float>(wei_md.size_bytes() / 4, 0.f));
  std::vector<float> cv(column_md.size_bytes() / 4), sv(scalar_md.size_bytes() / 4);
  for (std::size_t i = 0; i < cv.size(); ++i) cv[i] = i % 2 == 0 ? 10.f : -999.f;
  for (std::size_t i = 0; i < sv.size(); ++i) sv[i] = i == 7 ? 1.f : -555.f;
  ocl_test::write_all(column, cv);
  ocl_test::write_all(scalar, sv);
  expectation want(dst_md);
  for (std::int64_t i = 0; i < m * n; ++i) want.set(i, 11.0, 11.0);
  run_and_check(matmul(*pd),
                {{PRIMCACHE_ARG_SRC, src},
                 {PRIMCACHE_ARG_WEIGHTS, wei},
                 {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(0) | PRIMCACHE_ARG_SRC_1, column},
                 {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1, scalar}},
                PRIMCACHE_ARG_DST, dst_md, eng, want);
}

namespace {

struct conv_case {
  std::int64_t ic = 16, oc = 16, h = 6, w = 7, k = 3, pad = 1, groups = 1;
  tag src = tag::nhwc, dst = tag::nhwc;
  std::int64_t src_off = 0, wei_off = 0, bias_off = 0, dst_off = 0;
  std::int64_t chan_off = -1, scalar_off = -1;
  // Channel stride of the per-channel operand (1: dense).
  std::int64_t chan_stride = 1;
  bool full_operand = false;
  bool constant_weights = false;
};

void check_conv(const conv_case& c) {
  INFO("ic " << c.ic << " oc " << c.oc << " groups " << c.groups << " offsets src " << c.src_off
             << " wei " << c.wei_off << " bias " << c.bias_off << " dst " << c.dst_off
             << " operands chan " << c.chan_off << " (stride " << c.chan_stride << ") scalar "
             << c.scalar_off << (c.full_operand ? " full" : "")
             << (c.constant_weights ? " constant" : ""));
  engine eng(engine_kind::gpu, 0);
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
    add_operand(memory::desc({1, c.oc, 1, 1}, data_type::f32,
                             memory::dims{c.oc * c.chan_stride, c.chan_stride, 1, 1})
                    .with_offset0(c.chan_off));
  }
  if (c.scalar_off >= 0) {
    add_operand(memory::desc({1, 1, 1, 1}, data_type::f32, tag::nchw).with_offset0(c.scalar_off));
  }
  if (c.full_operand) add_operand(dst_md);
  primitive_attr attr;
  attr.set_post_ops(ops);
  if (c.constant_weights) attr.set_constant_weights(true);
  const auto pd = make_or_refused<convolution_forward::primitive_desc>([&] {
    return convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                  src_md, wei_md, bias_md, dst_md, {1, 1}, {c.pad, c.pad},
                                  {c.pad, c.pad}),
        attr, eng);
  });
  if (!pd) return;
  const filled src = make(src_md, eng, 1), wei = make(wei_md, eng, 2), bias = make(bias_md, eng, 3);
  std::vector<filled> operand_mems;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    operand_mems.push_back(make(operands[i].second, eng, 10 + static_cast<std::uint32_t>(i)));
  }
  expectation want(dst_md);
  for (const auto& d : ocl_test::all_indices({2, c.oc, oh, ow})) {
    const std::int64_t n = d[0], o = d[1], y = d[2], x = d[3];
    const std::int64_t g = o / ocg;
    double acc = bias.host[static_cast<std::size_t>(bias_md.offset_of({o}))];
    double mag = std::abs(acc);
    for (std::int64_t i = 0; i < icg; ++i) {
      for (std::int64_t kh = 0; kh < c.k; ++kh) {
        for (std::int64_t kw = 0; kw < c.k; ++kw) {
          const std::int64_t iy = y - c.pad + kh, ix = x - c.pad + kw;
          if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
          const double s =
              src.host[static_cast<std::size_t>(src_md.offset_of({n, g * icg + i, iy, ix}))];
          const double wv = wei.host[static_cast<std::size_t>(
              c.groups == 1 ? wei_md.offset_of({o, i, kh, kw})
                            : wei_md.offset_of({g, o % ocg, i, kh, kw}))];
          acc += s * wv;
          mag += std::abs(s * wv);
        }
      }
    }
    acc = acc > 0 ? acc : 0.5 * acc;
    for (const filled& m : operand_mems) acc += operand_at(m, d);
    want.set(dst_md.offset_of(d), acc, mag + std::abs(acc));
  }
  // The channel padding of a blocked dst: what the kernel leaves there is
  // not what these cases check (it writes logical elements only).
  if (dst_md.inner_nblks() != 0) {
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t o = c.oc; o < dst_md.padded_dims()[1]; ++o)
        for (std::int64_t y = 0; y < oh; ++y)
          for (std::int64_t x = 0; x < ow; ++x) want.any(dst_md.offset_of({n, o, y, x}));
  }
  primitive::args args = {{PRIMCACHE_ARG_SRC, src.mem},
                          {PRIMCACHE_ARG_WEIGHTS, wei.mem},
                          {PRIMCACHE_ARG_BIAS, bias.mem}};
  for (std::size_t i = 0; i < operands.size(); ++i) {
    args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(operands[i].first) | PRIMCACHE_ARG_SRC_1] =
        operand_mems[i].mem;
  }
  run_and_check(convolution_forward(*pd), args, PRIMCACHE_ARG_DST, dst_md, eng, want);
}

}  // namespace

TEST_CASE("OpenCL convolution honours offset0 on every tensor and binary operand",
          "[ocl][offset0][conv]") {
  conv_case c;
  SECTION("bias") {
    c.bias_off = 16;
  }
  SECTION("all four, nchw") {
    c.src = c.dst = tag::nchw;
    c.src_off = 1;
    c.wei_off = 2;
    c.bias_off = 3;
    c.dst_off = 4;
  }
  SECTION("blocked activations, operands") {
    c.src = c.dst = tag::nChw16c;
    c.oc = 24;
    c.src_off = 20;
    c.dst_off = 9;
    c.chan_off = 5;
    c.scalar_off = 6;
    c.full_operand = true;
  }
  SECTION("a per-channel operand with a channel stride") {
    c.chan_off = 3;
    c.chan_stride = 3;
  }
  SECTION("depthwise, all four") {
    c.ic = c.oc = c.groups = 24;
    c.src_off = 6;
    c.wei_off = 7;
    c.bias_off = 8;
    c.dst_off = 9;
  }
  SECTION("constant weights at an offset (packed by the packing kernel)") {
    c.constant_weights = true;
    c.wei_off = 13;
    c.bias_off = 1;
  }
  check_conv(c);
}

TEST_CASE("OpenCL eltwise and reorder honour offset0", "[ocl][offset0][eltwise][reorder]") {
  engine eng(engine_kind::gpu, 0);
  const std::vector<std::int64_t> dims = {2, 21, 5, 3};
  const tag layout = GENERATE(tag::nchw, tag::nhwc, tag::nChw16c);
  INFO("layout " << static_cast<int>(layout));
  SECTION("eltwise with per-channel, scalar and dst-shaped operands") {
    const memory::desc src_md = memory::desc(dims, data_type::f32, layout).with_offset0(2);
    const memory::desc dst_md = memory::desc(dims, data_type::f32, layout).with_offset0(19);
    const memory::desc chan_md =
        memory::desc({1, 21, 1, 1}, data_type::f32, tag::nchw).with_offset0(1);
    const memory::desc scalar_md =
        memory::desc({1, 1, 1, 1}, data_type::f32, tag::nchw).with_offset0(30);
    post_ops ops;
    ops.append_binary(algorithm::binary_add, chan_md);
    ops.append_binary(algorithm::binary_add, scalar_md);
    ops.append_binary(algorithm::binary_add, dst_md);
    primitive_attr attr;
    attr.set_post_ops(ops);
    const eltwise_forward::primitive_desc pd(
        eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_linear, src_md,
                              dst_md, 2.f, 0.5f),
        attr, eng);
    const filled src = make(src_md, eng, 1), chan = make(chan_md, eng, 2),
                 scalar = make(scalar_md, eng, 3), full = make(dst_md, eng, 4);
    expectation want(dst_md);
    for (const auto& d : ocl_test::all_indices(dims)) {
      const double v = 2.0 * src.host[static_cast<std::size_t>(src_md.offset_of(d))] + 0.5 +
                       operand_at(chan, d) + operand_at(scalar, d) + operand_at(full, d);
      want.set(dst_md.offset_of(d), v, std::abs(v) + 4);
    }
    // The eltwise kernel writes logical elements only: a blocked dst's
    // channel padding stays as it was.
    run_and_check(eltwise_forward(pd),
                  {{PRIMCACHE_ARG_SRC, src.mem},
                   {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(0) | PRIMCACHE_ARG_SRC_1, chan.mem},
                   {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1, scalar.mem},
                   {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(2) | PRIMCACHE_ARG_SRC_1, full.mem}},
                  PRIMCACHE_ARG_DST, dst_md, eng, want);
  }
  SECTION("reorder from nchw at one offset to the layout at another") {
    const memory::desc src_md = memory::desc(dims, data_type::f32, tag::nchw).with_offset0(13);
    const memory::desc dst_md = memory::desc(dims, data_type::f32, layout).with_offset0(70);
    const reorder::primitive_desc pd(eng, src_md, eng, dst_md);
    const filled src = make(src_md, eng, 1);
    expectation want(dst_md);
    for (const auto& d : ocl_test::all_indices(dims)) {
      want.set(dst_md.offset_of(d), src.host[static_cast<std::size_t>(src_md.offset_of(d))], 0.0);
    }
    if (dst_md.inner_nblks() != 0) {
      for (std::int64_t n = 0; n < 2; ++n)
        for (std::int64_t c = 21; c < 32; ++c)
          for (std::int64_t h = 0; h < 5; ++h)
            for (std::int64_t w = 0; w < 3; ++w) want.set(dst_md.offset_of({n, c, h, w}), 0.0, 0.0);
    }
    run_and_check(reorder(pd), {{PRIMCACHE_ARG_FROM, src.mem}}, PRIMCACHE_ARG_TO, dst_md, eng,
                  want);
  }
}
