// Every primitive kind over layouts and data types, through the public API:
// for each descriptor, either no implementation accepts it (creation fails
// with unimplemented or invalid_arguments) or creation and execution both
// succeed and the output equals a naive computation written here. The
// computations below share no code with the kernels or their references:
// they read and write elements through memory_desc::offset_of and the
// tensor library's scalar conversions only.
//
// Each case runs twice: with the best ISA (JIT implementations first) and
// with the ISA capped at x86_64, where every JIT implementation declines and
// the reference implementations run on every layout they accept.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "primcache/cpu/cpu.hpp"
#include "primcache/runtime/runtime.hpp"
#include "primcache/tensor/numeric.hpp"

using namespace primcache;
using tag = format_tag;
using dt = data_type;

namespace {

engine& cpu() {
  static engine e(engine_kind::cpu, 0);
  return e;
}

using index_t = std::vector<std::int64_t>;

void for_each_index(std::span<const std::int64_t> dims,
                    const std::function<void(const index_t&)>& fn) {
  index_t idx(dims.size(), 0);
  std::int64_t total = 1;
  for (auto d : dims) total *= d;
  for (std::int64_t i = 0; i < total; ++i) {
    std::int64_t rest = i;
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      idx[d] = rest % dims[d];
      rest /= dims[d];
    }
    fn(idx);
  }
}

double get(const memory& m, const index_t& idx) {
  const auto& md = m.get_desc();
  const std::int64_t off = md.offset_of(idx);
  const void* p = m.get_data_handle();
  switch (md.data_type()) {
    case dt::f32: return static_cast<const float*>(p)[off];
    case dt::bf16: return bf16_to_f32(static_cast<const std::uint16_t*>(p)[off]);
    case dt::f16: return f16_to_f32(static_cast<const std::uint16_t*>(p)[off]);
    case dt::s8: return static_cast<const std::int8_t*>(p)[off];
    case dt::u8: return static_cast<const std::uint8_t*>(p)[off];
    case dt::s32: return static_cast<const std::int32_t*>(p)[off];
    default: FAIL("unexpected data type"); return 0;
  }
}

// Values exact in every data type: multiples of 1/8 in [-1, 1] for floats,
// small integers for integer types (non-negative for u8).
void fill(memory& m, unsigned seed) {
  const auto& md = m.get_desc();
  std::memset(m.get_data_handle(), 0, md.size_bytes());
  std::uint32_t state = seed * 2654435761u + 1;
  void* p = m.get_data_handle();
  for_each_index(md.dims(), [&](const index_t& idx) {
    state = state * 1664525u + 1013904223u;
    const int r = static_cast<int>((state >> 16) % 17) - 8;  // [-8, 8]
    const std::int64_t off = md.offset_of(idx);
    switch (md.data_type()) {
      case dt::f32: static_cast<float*>(p)[off] = r / 8.f; break;
      case dt::bf16: static_cast<std::uint16_t*>(p)[off] = f32_to_bf16(r / 8.f); break;
      case dt::f16: static_cast<std::uint16_t*>(p)[off] = f32_to_f16(r / 8.f); break;
      case dt::s8: static_cast<std::int8_t*>(p)[off] = static_cast<std::int8_t>(r / 3); break;
      case dt::u8:
        static_cast<std::uint8_t*>(p)[off] = static_cast<std::uint8_t>((r + 8) / 3);
        break;
      case dt::s32: static_cast<std::int32_t*>(p)[off] = r / 3; break;
      default: break;
    }
  });
}

memory make(const memory::desc& md, unsigned seed) {
  memory m(md, cpu());
  fill(m, seed);
  return m;
}

// |got - expected| within the precision of the destination's data type (the
// expected value is exact; the destination rounds once, and f32 accumulation
// of a few dozen products of exact values stays well within 1e-5).
bool close(double got, double expected, dt type) {
  const double mag = std::abs(expected);
  switch (type) {
    case dt::f32: return std::abs(got - expected) <= 1e-5 * (1 + mag);
    case dt::bf16: return std::abs(got - expected) <= mag / 128 + 1e-6;
    case dt::f16: return std::abs(got - expected) <= mag / 1024 + 1e-4;
    case dt::s8: return std::abs(got - std::clamp(expected, -128.0, 127.0)) <= 0.5;
    case dt::u8: return std::abs(got - std::clamp(expected, 0.0, 255.0)) <= 0.5;
    case dt::s32: return std::abs(got - expected) <= 0.5;
    default: return false;
  }
}

enum class outcome { refused, ran };

// Creates the pd with `make_pd`; a refusal must be unimplemented or
// invalid_arguments. Otherwise the primitive must be created and executed
// without error.
template <typename Pd, typename Prim>
outcome create_and_run(const std::function<Pd()>& make_pd,
                       const std::unordered_map<int, memory>& args, std::string& impl) {
  std::optional<Pd> pd;
  try {
    pd.emplace(make_pd());
  } catch (const error& e) {
    INFO("pd creation failed: " << e.what());
    CHECK((e.code() == status::unimplemented || e.code() == status::invalid_arguments));
    return outcome::refused;
  }
  impl = pd->impl_info_str();
  INFO("impl " << impl);
  try {
    Prim prim(*pd);
    prim.execute(stream(cpu()), args);
  } catch (const error& e) {
    FAIL_CHECK("accepted by " << impl << ", then failed: " << e.what());
  }
  return outcome::ran;
}

// Runs `body` at the best ISA and with the ISA capped at x86_64.
struct isa_mode {
  bool capped;
  isa_mode(bool c) : capped(c) {
    if (capped) set_max_cpu_isa(cpu_isa::x86_64);
  }
  ~isa_mode() { clear_max_cpu_isa(); }
};

const dt all_types[] = {dt::f32, dt::bf16, dt::f16, dt::s8, dt::u8, dt::s32};

}  // namespace

TEST_CASE("matmul: every layout and data type is refused or computed correctly",
          "[cpu][primitive][sweep][matmul]") {
  const bool capped = GENERATE(false, true);
  const bool batched = GENERATE(false, true);
  isa_mode mode(capped);
  const std::int64_t B = 3, M = 5, K = 7, N = 6;
  const tag plain[2] = {batched ? tag::abc : tag::ab, batched ? tag::acb : tag::ba};
  auto dims = [&](std::int64_t b, std::int64_t r, std::int64_t c) {
    return batched ? memory::dims{b, r, c} : memory::dims{r, c};
  };
  int ran = 0, cases = 0;
  for (dt type : all_types) {
    for (int ls = 0; ls < 2; ++ls)
      for (int lw = 0; lw < 2; ++lw)
        for (int ld = 0; ld < 2; ++ld)
          for (int src_batch : {static_cast<int>(B), 1}) {
            // Non-f32 types: plain layouts only, to bound the time.
            if (type != dt::f32 && (ls || lw || ld || src_batch == 1)) continue;
            if (!batched && src_batch == 1) continue;
            ++cases;
            memory src = make(memory::desc(dims(src_batch, M, K), type, plain[ls]), 1);
            memory wei = make(memory::desc(dims(B, K, N), type, plain[lw]), 2);
            memory::desc dst_md(dims(B, M, N), type, plain[ld]);
            memory dst(dst_md, cpu());
            const bool with_extras = type == dt::f32;
            memory bias = make(memory::desc(dims(1, 1, N), type, plain[0]), 3);
            // A binary-add operand laid out as dst (per tensor).
            memory addend = make(dst_md.with_data_type(dt::f32), 4);
            primitive_attr attr;
            if (with_extras) {
              post_ops ops;
              ops.append_binary(algorithm::binary_add, addend.get_desc());
              attr.set_post_ops(ops);
            }
            std::unordered_map<int, memory> args{
                {PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_WEIGHTS, wei}, {PRIMCACHE_ARG_DST, dst}};
            if (with_extras) {
              args[PRIMCACHE_ARG_BIAS] = bias;
              args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(0) | PRIMCACHE_ARG_SRC_1] = addend;
            }
            std::string impl;
            INFO("type " << to_string(type) << " src " << to_string(plain[ls]) << " (batch "
                         << src_batch << ") weights " << to_string(plain[lw]) << " dst "
                         << to_string(plain[ld]) << (capped ? " capped at x86_64" : ""));
            const auto result = create_and_run<matmul::primitive_desc, matmul>(
                [&] {
                  return with_extras
                             ? matmul::primitive_desc(matmul::desc(src.get_desc(), wei.get_desc(),
                                                                   bias.get_desc(), dst_md),
                                                      attr, cpu())
                             : matmul::primitive_desc(
                                   matmul::desc(src.get_desc(), wei.get_desc(), dst_md), cpu());
                },
                args, impl);
            if (result == outcome::refused) continue;
            ++ran;
            int bad = 0;
            for_each_index(dst_md.dims(), [&](const index_t& i) {
              const std::int64_t b = batched ? i[0] : 0, r = i[i.size() - 2], c = i.back();
              const std::int64_t sb = src_batch == 1 ? 0 : b;
              double acc = 0;
              for (std::int64_t k = 0; k < K; ++k) {
                acc += get(src, batched ? index_t{sb, r, k} : index_t{r, k}) *
                       get(wei, batched ? index_t{b, k, c} : index_t{k, c});
              }
              if (with_extras) {
                acc += get(bias, batched ? index_t{0, 0, c} : index_t{0, c});
                acc += get(addend, i);
              }
              if (!close(get(dst, i), acc, type)) ++bad;
            });
            INFO("impl " << impl);
            CHECK(bad == 0);
          }
  }
  // Plain f32 is always supported (by a reference implementation at least).
  CHECK(ran >= 1);
  INFO(ran << " of " << cases << " ran");
  SUCCEED();
}

TEST_CASE("convolution: every layout and data type is refused or computed correctly",
          "[cpu][primitive][sweep][convolution]") {
  const bool capped = GENERATE(false, true);
  isa_mode mode(capped);
  const std::int64_t N = 2, IC = 12, OC = 20, H = 6, W = 5, KH = 3, KW = 3;
  const tag acts[] = {tag::nchw, tag::nhwc, tag::nChw8c, tag::nChw16c};
  // oihw, Ohwi16o, OIhw16i16o.
  const tag weights[] = {tag::oihw, tag::Acdb16a, tag::ABcd16b16a};
  int ran = 0;
  for (dt type : all_types)
    for (tag sa : acts)
      for (tag da : acts)
        for (tag wt : weights) {
          if (type != dt::f32 && (sa != tag::nchw || da != tag::nchw || wt != tag::oihw)) continue;
          if (type == dt::f32 && sa != da && !(sa == tag::nchw && da == tag::nChw16c)) continue;
          memory src = make(memory::desc({N, IC, H, W}, type, sa), 5);
          memory wei = make(memory::desc({OC, IC, KH, KW}, type, wt), 6);
          memory bias = make(memory::desc({OC}, type, tag::a), 7);
          memory::desc dst_md({N, OC, H, W}, type, da);
          memory dst(dst_md, cpu());
          const bool with_extras = type == dt::f32;
          memory addend = make(dst_md.with_data_type(dt::f32), 8);
          primitive_attr attr;
          if (with_extras) {
            post_ops ops;
            ops.append_binary(algorithm::binary_add, addend.get_desc());
            attr.set_post_ops(ops);
          }
          std::unordered_map<int, memory> args{{PRIMCACHE_ARG_SRC, src},
                                               {PRIMCACHE_ARG_WEIGHTS, wei},
                                               {PRIMCACHE_ARG_DST, dst},
                                               {PRIMCACHE_ARG_BIAS, bias}};
          if (with_extras)
            args[PRIMCACHE_ARG_ATTR_MULTIPLE_POST_OP(0) | PRIMCACHE_ARG_SRC_1] = addend;
          std::string impl;
          INFO("type " << to_string(type) << " src " << to_string(sa) << " weights "
                       << to_string(wt) << " dst " << to_string(da)
                       << (capped ? " capped at x86_64" : ""));
          const auto result =
              create_and_run<convolution_forward::primitive_desc, convolution_forward>(
                  [&] {
                    return convolution_forward::primitive_desc(
                        convolution_forward::desc(prop_kind::forward_inference,
                                                  algorithm::convolution_direct, src.get_desc(),
                                                  wei.get_desc(), bias.get_desc(), dst_md, {1, 1},
                                                  {1, 1}, {1, 1}),
                        attr, cpu());
                  },
                  args, impl);
          if (result == outcome::refused) continue;
          ++ran;
          int bad = 0;
          for_each_index(dst_md.dims(), [&](const index_t& i) {
            double acc = get(bias, {i[1]});
            for (std::int64_t c = 0; c < IC; ++c)
              for (std::int64_t ky = 0; ky < KH; ++ky)
                for (std::int64_t kx = 0; kx < KW; ++kx) {
                  const std::int64_t iy = i[2] - 1 + ky, ix = i[3] - 1 + kx;
                  if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                  acc += get(src, {i[0], c, iy, ix}) * get(wei, {i[1], c, ky, kx});
                }
            if (with_extras) acc += get(addend, i);
            if (!close(get(dst, i), acc, type)) ++bad;
          });
          INFO("impl " << impl);
          CHECK(bad == 0);
        }
  CHECK(ran >= 1);
}

TEST_CASE("eltwise: every layout and data type is refused or computed correctly",
          "[cpu][primitive][sweep][eltwise]") {
  const bool capped = GENERATE(false, true);
  isa_mode mode(capped);
  const tag acts[] = {tag::nchw, tag::nhwc, tag::nChw8c, tag::nChw16c};
  int ran = 0;
  for (dt type : all_types)
    for (tag sa : acts)
      for (tag da : acts) {
        if (sa != da && (type != dt::f32 || sa != tag::nchw)) continue;
        memory src = make(memory::desc({2, 19, 3, 4}, type, sa), 9);
        memory::desc dst_md({2, 19, 3, 4}, type, da);
        memory dst(dst_md, cpu());
        std::string impl;
        INFO("type " << to_string(type) << " src " << to_string(sa) << " dst " << to_string(da)
                     << (capped ? " capped at x86_64" : ""));
        const auto result = create_and_run<eltwise_forward::primitive_desc, eltwise_forward>(
            [&] {
              return eltwise_forward::primitive_desc(
                  eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_linear,
                                        src.get_desc(), dst_md, 2.f, 0.5f),
                  cpu());
            },
            {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}}, impl);
        if (result == outcome::refused) continue;
        ++ran;
        int bad = 0;
        for_each_index(dst_md.dims(), [&](const index_t& i) {
          if (!close(get(dst, i), 2 * get(src, i) + 0.5, type)) ++bad;
        });
        INFO("impl " << impl);
        CHECK(bad == 0);
      }
  CHECK(ran >= 1);
}

TEST_CASE("reorder: every layout and data type pair is refused or converted correctly",
          "[cpu][primitive][sweep][reorder]") {
  const bool capped = GENERATE(false, true);
  isa_mode mode(capped);
  const tag acts[] = {tag::nchw, tag::nhwc, tag::nChw8c, tag::nChw16c};
  int ran = 0;
  for (dt st : all_types)
    for (dt dt_ : all_types)
      for (tag sa : acts)
        for (tag da : acts) {
          // Every layout pair in f32; every type pair in nchw -> nChw16c.
          const bool f32_pair = st == dt::f32 && dt_ == dt::f32;
          if (!f32_pair && (sa != tag::nchw || da != tag::nChw16c)) continue;
          memory src = make(memory::desc({2, 19, 3, 2}, st, sa), 10);
          memory::desc dst_md({2, 19, 3, 2}, dt_, da);
          memory dst(dst_md, cpu());
          std::string impl;
          INFO("src " << to_string(st) << " " << to_string(sa) << " dst " << to_string(dt_) << " "
                      << to_string(da) << (capped ? " capped at x86_64" : ""));
          const auto result = create_and_run<reorder::primitive_desc, reorder>(
              [&] { return reorder::primitive_desc(cpu(), src.get_desc(), cpu(), dst_md); },
              {{PRIMCACHE_ARG_SRC, src}, {PRIMCACHE_ARG_DST, dst}}, impl);
          if (result == outcome::refused) continue;
          ++ran;
          int bad = 0;
          for_each_index(dst_md.dims(), [&](const index_t& i) {
            if (!close(get(dst, i), get(src, i), dt_)) ++bad;
          });
          INFO("impl " << impl);
          CHECK(bad == 0);
        }
  CHECK(ran >= 1);
}
