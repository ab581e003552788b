#include "support/offset0_cases.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

using namespace primcache;
using tag = format_tag;

namespace offset0_cases {

namespace {

std::size_t at(std::int64_t off) {
  return static_cast<std::size_t>(off);
}

memory::dims dims_of(std::int64_t batch, std::int64_t r, std::int64_t c) {
  return batch ? memory::dims{batch, r, c} : memory::dims{r, c};
}

// Binary post-ops appended to `ops`, each with the index of its entry.
struct operand_list {
  post_ops& ops;
  std::vector<std::pair<int, memory::desc>> operands;

  void add(const memory::desc& md) {
    operands.emplace_back(static_cast<int>(ops.entries().size()), md);
    ops.append_binary(algorithm::binary_add, md);
  }
  // The operands' memories (seeds 10, 11, ...).
  std::vector<filled> make_all(const target& t) const {
    std::vector<filled> mems;
    for (std::size_t i = 0; i < operands.size(); ++i) {
      mems.push_back(make(operands[i].second, t, 10 + static_cast<unsigned>(i)));
    }
    return mems;
  }
  void add_args(primitive::args& args, const std::vector<filled>& mems) const {
    for (std::size_t i = 0; i < operands.size(); ++i) {
      args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(operands[i].first) | PRIMCACHE_ARG_SRC_1] =
          mems[i].mem;
    }
  }
};

void check_implementation(const std::string& impl, const target& t) {
  if (t.expect_reference) CHECK(impl.find("ref:") != std::string::npos);
}

}  // namespace

filled make(const memory::desc& md, const target& t, unsigned seed) {
  filled f{memory(md, t.eng), std::vector<float>(md.size_bytes() / sizeof(float), kPoison)};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> v(-1.f, 1.f);
  for_each_index(md.dims(), [&](const std::vector<std::int64_t>& idx) {
    f.host[at(md.offset_of(idx))] = v(rng);
  });
  t.write(f.mem, f.host);
  return f;
}

float operand_at(const filled& f, const std::vector<std::int64_t>& dst_index) {
  const memory::desc& md = f.mem.get_desc();
  std::vector<std::int64_t> idx(dst_index);
  for (int d = 0; d < md.ndims(); ++d) {
    if (md.dims()[d] == 1) idx[static_cast<std::size_t>(d)] = 0;
  }
  return f.host[at(md.offset_of(idx))];
}

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

expectation::expectation(const memory::desc& md)
    : value(md.size_bytes() / sizeof(float), std::nan("")), tol(value.size(), 0.0) {}

void expectation::set(std::int64_t off, double v, double magnitude) {
  value[at(off)] = v;
  tol[at(off)] = 1e-5 * magnitude + 1e-5;
}

void expectation::channel_padding(const memory::desc& md) {
  if (md.inner_nblks() == 0) return;
  const auto& d = md.dims();
  for (std::int64_t n = 0; n < d[0]; ++n)
    for (std::int64_t c = d[1]; c < md.padded_dims()[1]; ++c)
      for (std::int64_t h = 0; h < d[2]; ++h)
        for (std::int64_t w = 0; w < d[3]; ++w) set(md.offset_of({n, c, h, w}), 0.0, 0.0);
}

void run_and_check(const primitive& prim, primitive::args args, int dst_arg,
                   const memory::desc& dst_md, const target& t, const expectation& want) {
  stream strm(t.eng);
  for (int run = 0; run < t.runs; ++run) {
    if (run == 1 && t.wait_specialized) prim.wait_until_specialized();
    INFO("run " << run
                << (t.wait_specialized
                        ? (prim.specialized() ? " (specialized code)" : " (generic code)")
                        : ""));
    memory dst(dst_md, t.eng);
    t.write(dst, std::vector<float>(dst_md.size_bytes() / sizeof(float), kPoison));
    args[dst_arg] = dst;
    prim.execute(strm, args);
    strm.wait();
    const std::vector<float> got = t.read(dst);
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

void check_refusal(const error& e) {
  INFO(e.what());
  CHECK(e.code() == status::unimplemented);
}

// ---- matmul -------------------------------------------------------------

std::string matmul_case::describe() const {
  return "batch " + std::to_string(batch) + " m" + std::to_string(m) + " k" + std::to_string(k) +
         " n" + std::to_string(n) + " offsets src " + std::to_string(src_off) + " wei " +
         std::to_string(wei_off) + " bias " + std::to_string(bias_off) + " dst " +
         std::to_string(dst_off) + (transposed_weights ? " transposed" : "") +
         (constant_weights ? " constant weights" : "") + " operands column " +
         std::to_string(column_off) + " scalar " + std::to_string(scalar_off) +
         (full_operand ? " full" : "");
}

void check_matmul(const matmul_case& c, const target& t) {
  INFO(c.describe());
  const tag plain = c.batch ? tag::abc : tag::ab;
  const tag wtag = c.transposed_weights ? (c.batch ? tag::acb : tag::ba) : plain;
  const std::int64_t bcast = c.batch ? 1 : 0;
  const memory::desc src_md =
      memory::desc(dims_of(c.batch, c.m, c.k), data_type::f32, plain).with_offset0(c.src_off);
  const memory::desc wei_md =
      memory::desc(dims_of(c.batch, c.k, c.n), data_type::f32, wtag).with_offset0(c.wei_off);
  const memory::desc bias_md =
      c.bias ? memory::desc(dims_of(bcast, 1, c.n), data_type::f32, plain).with_offset0(c.bias_off)
             : memory::desc();
  const memory::desc dst_md =
      memory::desc(dims_of(c.batch, c.m, c.n), data_type::f32, plain).with_offset0(c.dst_off);
  post_ops ops;
  ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.25f, 0.f);
  operand_list operands{ops, {}};
  if (c.column_off >= 0) {
    operands.add(
        memory::desc(dims_of(bcast, 1, c.n), data_type::f32, plain).with_offset0(c.column_off));
  }
  if (c.scalar_off >= 0) {
    operands.add(
        memory::desc(dims_of(bcast, 1, 1), data_type::f32, plain).with_offset0(c.scalar_off));
  }
  if (c.full_operand) operands.add(dst_md);
  primitive_attr attr;
  attr.set_post_ops(ops);
  if (c.constant_weights) attr.set_constant_weights(true);

  const matmul::primitive_desc pd(matmul::desc(src_md, wei_md, bias_md, dst_md), attr, t.eng);
  INFO("implementation " << pd.impl_info_str());
  check_implementation(pd.impl_info_str(), t);
  const filled src = make(src_md, t, 1), wei = make(wei_md, t, 2);
  const std::optional<filled> bias =
      c.bias ? std::optional<filled>(make(bias_md, t, 3)) : std::nullopt;
  const std::vector<filled> operand_mems = operands.make_all(t);

  expectation want(dst_md);
  for_each_index(dst_md.dims(), [&](const std::vector<std::int64_t>& di) {
    const std::int64_t b = c.batch ? di[0] : 0, i = di[di.size() - 2], j = di[di.size() - 1];
    double acc = 0, mag = 0;
    for (std::int64_t k = 0; k < c.k; ++k) {
      const double x =
          src.host[at(src_md.offset_of(c.batch ? memory::dims{b, i, k} : memory::dims{i, k}))];
      const double y =
          wei.host[at(wei_md.offset_of(c.batch ? memory::dims{b, k, j} : memory::dims{k, j}))];
      acc += x * y;
      mag += std::abs(x * y);
    }
    if (bias) {
      acc +=
          bias->host[at(bias_md.offset_of(c.batch ? memory::dims{0, 0, j} : memory::dims{0, j}))];
    }
    acc = acc > 0 ? acc : 0.25 * acc;
    for (const filled& o : operand_mems) acc += operand_at(o, di);
    want.set(dst_md.offset_of(di), acc, mag + std::abs(acc));
  });

  const matmul prim(pd);
  primitive::args args = {{PRIMCACHE_ARG_SRC, src.mem}, {PRIMCACHE_ARG_WEIGHTS, wei.mem}};
  if (bias) args[PRIMCACHE_ARG_BIAS] = bias->mem;
  operands.add_args(args, operand_mems);
  run_and_check(prim, args, PRIMCACHE_ARG_DST, dst_md, t, want);
  if (c.constant_weights && t.repeat_constant_weights) {
    run_and_check(prim, args, PRIMCACHE_ARG_DST, dst_md, t, want);
  }
}

void check_strided_matmul_operands(const target& t) {
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
      [&] { return matmul::primitive_desc(matmul::desc(src_md, wei_md, dst_md), attr, t.eng); });
  if (!pd) return;
  memory src(src_md, t.eng), wei(wei_md, t.eng), column(column_md, t.eng), scalar(scalar_md, t.eng);
  t.write(src, std::vector<float>(src_md.size_bytes() / 4, 0.f));
  t.write(wei, std::vector<float>(wei_md.size_bytes() / 4, 0.f));
  std::vector<float> cv(column_md.size_bytes() / 4), sv(scalar_md.size_bytes() / 4);
  for (std::size_t i = 0; i < cv.size(); ++i) cv[i] = i % 2 == 0 ? 10.f : -999.f;
  for (std::size_t i = 0; i < sv.size(); ++i) sv[i] = i == 7 ? 1.f : -555.f;
  t.write(column, cv);
  t.write(scalar, sv);
  expectation want(dst_md);
  for (std::int64_t i = 0; i < m * n; ++i) want.set(i, 11.0, 11.0);
  run_and_check(matmul(*pd),
                {{PRIMCACHE_ARG_SRC, src},
                 {PRIMCACHE_ARG_WEIGHTS, wei},
                 {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(0) | PRIMCACHE_ARG_SRC_1, column},
                 {PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(1) | PRIMCACHE_ARG_SRC_1, scalar}},
                PRIMCACHE_ARG_DST, dst_md, t, want);
}

// ---- convolution ----------------------------------------------------------

std::string conv_case::describe() const {
  return "ic " + std::to_string(ic) + " oc " + std::to_string(oc) + " groups " +
         std::to_string(groups) + " k" + std::to_string(k) + " offsets src " +
         std::to_string(src_off) + " wei " + std::to_string(wei_off) + " bias " +
         std::to_string(bias_off) + " dst " + std::to_string(dst_off) + " operands chan " +
         std::to_string(chan_off) + " (stride " + std::to_string(chan_stride) + ") scalar " +
         std::to_string(scalar_off) + (full_operand ? " full" : "") +
         (constant_weights ? " constant weights" : "");
}

void check_conv(const conv_case& c, const target& t) {
  INFO(c.describe());
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
  operand_list operands{ops, {}};
  if (c.chan_off >= 0) {
    // A dense one as nchw; a strided one with channel c at chan_stride * c.
    operands.add((c.chan_stride == 1
                      ? memory::desc({1, c.oc, 1, 1}, data_type::f32, tag::nchw)
                      : memory::desc({1, c.oc, 1, 1}, data_type::f32,
                                     memory::dims{c.oc * c.chan_stride, c.chan_stride, 1, 1}))
                     .with_offset0(c.chan_off));
  }
  if (c.scalar_off >= 0) {
    operands.add(memory::desc({1, 1, 1, 1}, data_type::f32, tag::nchw).with_offset0(c.scalar_off));
  }
  if (c.full_operand) operands.add(dst_md);
  primitive_attr attr;
  attr.set_post_ops(ops);
  if (c.constant_weights) attr.set_constant_weights(true);
  const auto create = [&] {
    return convolution_forward::primitive_desc(
        convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                  src_md, wei_md, bias_md, dst_md, {1, 1}, {c.pad, c.pad},
                                  {c.pad, c.pad}),
        attr, t.eng);
  };
  const auto pd = t.conv_may_refuse ? make_or_refused<convolution_forward::primitive_desc>(create)
                                    : std::optional(create());
  if (!pd) return;
  INFO("implementation " << pd->impl_info_str());
  check_implementation(pd->impl_info_str(), t);
  const filled src = make(src_md, t, 1), wei = make(wei_md, t, 2), bias = make(bias_md, t, 3);
  const std::vector<filled> operand_mems = operands.make_all(t);

  expectation want(dst_md);
  for_each_index(dst_md.dims(), [&](const std::vector<std::int64_t>& d) {
    const std::int64_t n = d[0], o = d[1], y = d[2], x = d[3];
    const std::int64_t g = o / ocg;
    double acc = bias.host[at(bias_md.offset_of({o}))], mag = std::abs(acc);
    for (std::int64_t i = 0; i < icg; ++i) {
      for (std::int64_t kh = 0; kh < c.k; ++kh) {
        for (std::int64_t kw = 0; kw < c.k; ++kw) {
          const std::int64_t iy = y - c.pad + kh, ix = x - c.pad + kw;
          if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
          const double s = src.host[at(src_md.offset_of({n, g * icg + i, iy, ix}))];
          const double wv = wei.host[at(c.groups == 1 ? wei_md.offset_of({o, i, kh, kw})
                                                      : wei_md.offset_of({g, o % ocg, i, kh, kw}))];
          acc += s * wv;
          mag += std::abs(s * wv);
        }
      }
    }
    acc = acc > 0 ? acc : 0.5 * acc;
    for (const filled& m : operand_mems) acc += operand_at(m, d);
    want.set(dst_md.offset_of(d), acc, mag + std::abs(acc));
  });
  want.channel_padding(dst_md);

  primitive::args args = {{PRIMCACHE_ARG_SRC, src.mem},
                          {PRIMCACHE_ARG_WEIGHTS, wei.mem},
                          {PRIMCACHE_ARG_BIAS, bias.mem}};
  operands.add_args(args, operand_mems);
  run_and_check(convolution_forward(*pd), args, PRIMCACHE_ARG_DST, dst_md, t, want);
}

// ---- eltwise and reorder ----------------------------------------------------

std::string eltwise_case::describe() const {
  return "layout " + std::to_string(static_cast<int>(layout)) + " offsets src " +
         std::to_string(src_off) + " dst " + std::to_string(dst_off) + " chan " +
         std::to_string(chan_off) + " scalar " + std::to_string(scalar_off) +
         (full_operand ? " full" : "");
}

void check_eltwise(const eltwise_case& c, const target& t) {
  INFO(c.describe());
  const memory::dims dims = {2, 21, 5, 3};
  const memory::desc src_md = memory::desc(dims, data_type::f32, c.layout).with_offset0(c.src_off);
  const memory::desc dst_md = memory::desc(dims, data_type::f32, c.layout).with_offset0(c.dst_off);
  post_ops ops;
  std::vector<memory::desc> operand_mds;
  std::vector<unsigned> seeds;
  if (c.chan_off >= 0) {
    operand_mds.push_back(
        memory::desc({1, 21, 1, 1}, data_type::f32, tag::nchw).with_offset0(c.chan_off));
    seeds.push_back(c.chan_seed);
  }
  if (c.scalar_off >= 0) {
    operand_mds.push_back(
        memory::desc({1, 1, 1, 1}, data_type::f32, tag::nchw).with_offset0(c.scalar_off));
    seeds.push_back(c.scalar_seed);
  }
  if (c.full_operand) {
    operand_mds.push_back(dst_md);
    seeds.push_back(c.full_seed);
  }
  for (const auto& md : operand_mds) ops.append_binary(algorithm::binary_add, md);
  primitive_attr attr;
  attr.set_post_ops(ops);
  const eltwise_forward::primitive_desc pd(
      eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_linear, src_md, dst_md,
                            2.f, 0.5f),
      attr, t.eng);
  INFO("implementation " << pd.impl_info_str());
  const filled src = make(src_md, t, 1);
  std::vector<filled> operands;
  for (std::size_t i = 0; i < operand_mds.size(); ++i) {
    operands.push_back(make(operand_mds[i], t, seeds[i]));
  }
  expectation want(dst_md);
  for_each_index(dims, [&](const std::vector<std::int64_t>& d) {
    double v = 2.0 * src.host[at(src_md.offset_of(d))] + 0.5;
    for (const filled& m : operands) v += operand_at(m, d);
    want.set(dst_md.offset_of(d), v, std::abs(v) + 4);
  });
  want.channel_padding(dst_md);
  primitive::args args = {{PRIMCACHE_ARG_SRC, src.mem}};
  for (std::size_t i = 0; i < operands.size(); ++i) {
    args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | PRIMCACHE_ARG_SRC_1] =
        operands[i].mem;
  }
  run_and_check(eltwise_forward(pd), args, PRIMCACHE_ARG_DST, dst_md, t, want);
}

void check_reorder(const memory::dims& dims, tag from, tag to, const target& t) {
  const memory::desc src_md = memory::desc(dims, data_type::f32, from).with_offset0(13);
  const memory::desc dst_md = memory::desc(dims, data_type::f32, to).with_offset0(70);
  const reorder::primitive_desc pd(t.eng, src_md, t.eng, dst_md);
  INFO("implementation " << pd.impl_info_str() << " from " << static_cast<int>(from) << " to "
                         << static_cast<int>(to));
  const filled src = make(src_md, t, 1);
  expectation want(dst_md);
  for_each_index(dims, [&](const std::vector<std::int64_t>& d) {
    want.set(dst_md.offset_of(d), src.host[at(src_md.offset_of(d))], 0.0);
  });
  want.channel_padding(dst_md);
  run_and_check(reorder(pd), {{PRIMCACHE_ARG_FROM, src.mem}}, PRIMCACHE_ARG_TO, dst_md, t, want);
}

}  // namespace offset0_cases
