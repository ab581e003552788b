#include "naive_reference.hpp"

#include <array>
#include <cstring>
#include <vector>

#include "kernels/post_ops.hpp"
#include "primcache/tensor/numeric.hpp"

namespace cpu_test {

namespace ci = primcache::cpu_internal;
using primcache::data_type;
using primcache::memory_desc;

std::int64_t naive_offset(const memory_desc& md, std::span<const std::int64_t> index) {
  std::array<std::int64_t, primcache::max_ndims> outer{};
  for (std::size_t d = 0; d < index.size(); ++d) outer[d] = index[d];
  std::int64_t inner = 0;
  std::int64_t weight = 1;  // elements spanned by the blocks inside block k
  for (int k = md.inner_nblks() - 1; k >= 0; --k) {
    const auto d = static_cast<std::size_t>(md.inner_idxs()[k]);
    const std::int64_t block = md.inner_blks()[k];
    inner += (outer[d] % block) * weight;
    outer[d] /= block;
    weight *= block;
  }
  std::int64_t off = md.offset0() + inner;
  for (std::size_t d = 0; d < index.size(); ++d) off += outer[d] * md.strides()[d];
  return off;
}

std::size_t naive_nonzero_padding_bytes(const memory_desc& md, std::span<const std::byte> buf) {
  const int nd = md.ndims();
  const auto dims = md.dims();
  const auto padded = md.padded_dims();
  const std::size_t es = size_of(md.data_type());
  std::array<std::int64_t, primcache::max_ndims> idx{};
  std::size_t bad = 0;
  for (;;) {
    bool pad = false;
    for (int k = 0; k < nd; ++k) pad = pad || idx[k] >= dims[k];
    if (pad) {
      const auto off = static_cast<std::size_t>(naive_offset(
          md, std::span<const std::int64_t>(idx.data(), static_cast<std::size_t>(nd))));
      for (std::size_t b = 0; b < es; ++b) bad += buf[off * es + b] != std::byte{0};
    }
    int k = nd - 1;
    while (k >= 0 && ++idx[k] == padded[k]) idx[k--] = 0;
    if (k < 0) break;
  }
  return bad;
}

namespace {

// The operand of binary post-op `o` for dst element `dst_off` in channel
// (or column) `channel`.
float operand(const ci::post_op& op, const float* const* operands, std::int64_t dst_off,
              std::int64_t channel) {
  const float* x = operands[op.binary.arg_index];
  switch (op.binary.broadcast) {
    case ci::binary_broadcast::scalar: return x[0];
    case ci::binary_broadcast::per_channel: return x[channel];
    default: return x[dst_off];
  }
}

float with_post_ops(double acc, const ci::post_op_chain& chain, const float* const* operands,
                    std::int64_t dst_off, std::int64_t channel) {
  std::vector<float> values(chain.size(), 0.f);
  for (std::size_t o = 0; o < chain.size(); ++o) {
    if (chain[o].what == ci::post_op::kind::binary_add) {
      values[o] = operand(chain[o], operands, dst_off, channel);
    }
  }
  return ci::apply_post_ops_reference(static_cast<float>(acc), chain, values.data());
}

}  // namespace

void naive_matmul(const ci::matmul_problem& p, const ci::matmul_args& args) {
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j) {
        double acc = 0;
        for (std::int64_t k = 0; k < p.k; ++k) {
          const double a =
              args.src[b * p.src_strides[0] + i * p.src_strides[1] + k * p.src_strides[2]];
          const double w =
              args.weights[b * p.wei_strides[0] + k * p.wei_strides[1] + j * p.wei_strides[2]];
          acc += a * w;
        }
        if (p.with_bias) acc += args.bias[j];
        const std::int64_t off = b * p.dst_strides[0] + i * p.dst_strides[1] + j * p.dst_strides[2];
        args.dst[off] = with_post_ops(acc, p.post_ops, args.binary_operands, off, j);
      }
}

void naive_conv(const ci::conv_problem& p, const ci::conv_args& args) {
  const auto* src = static_cast<const float*>(args.src);
  const auto* wei = static_cast<const float*>(args.weights);
  const auto* bias = static_cast<const float*>(args.bias);
  auto* dst = static_cast<float*>(args.dst);
  const auto sd = p.src.dims();
  const auto dd = p.dst.dims();
  const bool grouped = p.weights.ndims() == 5;
  const std::int64_t g_count = p.groups;
  const std::int64_t icg = sd[1] / g_count;
  const std::int64_t ocg = dd[1] / g_count;
  const auto wd = p.weights.dims();
  const std::int64_t kh_count = wd[p.weights.ndims() - 2];
  const std::int64_t kw_count = wd[p.weights.ndims() - 1];
  for (std::int64_t n = 0; n < dd[0]; ++n)
    for (std::int64_t g = 0; g < g_count; ++g)
      for (std::int64_t o = 0; o < ocg; ++o)
        for (std::int64_t y = 0; y < dd[2]; ++y)
          for (std::int64_t x = 0; x < dd[3]; ++x) {
            const std::int64_t oc = g * ocg + o;
            double acc = 0;
            if (!p.bias.is_zero()) {
              const std::int64_t bi[1] = {oc};
              acc = bias[naive_offset(p.bias, bi)];
            }
            for (std::int64_t i = 0; i < icg; ++i)
              for (std::int64_t ky = 0; ky < kh_count; ++ky)
                for (std::int64_t kx = 0; kx < kw_count; ++kx) {
                  const std::int64_t iy = y * p.stride_h - p.pad_t + ky * (p.dilation_h + 1);
                  const std::int64_t ix = x * p.stride_w - p.pad_l + kx * (p.dilation_w + 1);
                  if (iy < 0 || iy >= sd[2] || ix < 0 || ix >= sd[3]) continue;
                  const std::int64_t si[4] = {n, g * icg + i, iy, ix};
                  const std::int64_t w5[5] = {g, o, i, ky, kx};
                  const std::int64_t w4[4] = {oc, i, ky, kx};
                  const double w =
                      grouped ? wei[naive_offset(p.weights, w5)] : wei[naive_offset(p.weights, w4)];
                  acc += static_cast<double>(src[naive_offset(p.src, si)]) * w;
                }
            const std::int64_t di[4] = {n, oc, y, x};
            const std::int64_t off = naive_offset(p.dst, di);
            dst[off] = with_post_ops(acc, p.post_ops, args.binary_operands, off, oc);
          }
  // Channels past OC in a blocked dst's last block hold zeros.
  const std::int64_t padded = p.dst.padded_dims()[1];
  for (std::int64_t n = 0; n < dd[0]; ++n)
    for (std::int64_t c = dd[1]; c < padded; ++c)
      for (std::int64_t y = 0; y < dd[2]; ++y)
        for (std::int64_t x = 0; x < dd[3]; ++x) {
          const std::int64_t di[4] = {n, c, y, x};
          dst[naive_offset(p.dst, di)] = 0.f;
        }
}

namespace {

// Calls f(index, real) for every index of md's padded dims, last dimension
// fastest; `real` is false in the padding.
template <class F>
void for_each_padded_index(const memory_desc& md, F&& f) {
  const int nd = md.ndims();
  const auto padded = md.padded_dims();
  std::int64_t total = 1;
  for (int k = 0; k < nd; ++k) total *= padded[k];
  std::vector<std::int64_t> i(static_cast<std::size_t>(nd), 0);
  for (std::int64_t e = 0; e < total; ++e) {
    std::int64_t rest = e;
    bool real = true;
    for (int k = nd - 1; k >= 0; --k) {
      i[k] = rest % padded[k];
      rest /= padded[k];
      real = real && i[k] < md.dims()[k];
    }
    f(std::span<const std::int64_t>(i), real);
  }
}

float load_as_f32(const void* base, data_type dt, std::int64_t off) {
  switch (dt) {
    case data_type::f32: return static_cast<const float*>(base)[off];
    case data_type::bf16:
      return primcache::bf16_to_f32(static_cast<const std::uint16_t*>(base)[off]);
    case data_type::f16: return primcache::f16_to_f32(static_cast<const std::uint16_t*>(base)[off]);
    case data_type::s8: return static_cast<const std::int8_t*>(base)[off];
    case data_type::u8: return static_cast<const std::uint8_t*>(base)[off];
    default: return static_cast<float>(static_cast<const std::int32_t*>(base)[off]);
  }
}

void store_from_f32(void* base, data_type dt, std::int64_t off, float v) {
  switch (dt) {
    case data_type::f32: static_cast<float*>(base)[off] = v; break;
    case data_type::bf16: static_cast<std::uint16_t*>(base)[off] = primcache::f32_to_bf16(v); break;
    case data_type::f16: static_cast<std::uint16_t*>(base)[off] = primcache::f32_to_f16(v); break;
    case data_type::s8: static_cast<std::int8_t*>(base)[off] = primcache::f32_to_s8(v); break;
    case data_type::u8: static_cast<std::uint8_t*>(base)[off] = primcache::f32_to_u8(v); break;
    default: static_cast<std::int32_t*>(base)[off] = primcache::f32_to_s32(v); break;
  }
}

}  // namespace

void naive_reorder(const ci::reorder_problem& p, const ci::reorder_args& args) {
  const memory_desc& s = p.src;
  const memory_desc& d = p.dst;
  const std::size_t bytes = primcache::size_of(d.data_type());
  const bool copy = s.data_type() == d.data_type() && p.scales == ci::reorder_scales::none;
  for_each_padded_index(d, [&](std::span<const std::int64_t> i, bool real) {
    char* out =
        static_cast<char*>(args.dst) + naive_offset(d, i) * static_cast<std::int64_t>(bytes);
    if (!real) {
      std::memset(out, 0, bytes);
      return;
    }
    const std::int64_t soff = naive_offset(s, i);
    if (copy) {
      std::memcpy(out, static_cast<const char*>(args.src) + soff * static_cast<std::int64_t>(bytes),
                  bytes);
      return;
    }
    float v = load_as_f32(args.src, s.data_type(), soff);
    if (p.scales == ci::reorder_scales::common) v *= args.scales[0];
    if (p.scales == ci::reorder_scales::per_dim) v *= args.scales[i[p.scale_dim]];
    store_from_f32(args.dst, d.data_type(), naive_offset(d, i), v);
  });
}

void naive_eltwise(const ci::eltwise_problem& p, const ci::eltwise_args& args) {
  const memory_desc& s = p.src;
  const memory_desc& d = p.dst;
  for_each_padded_index(d, [&](std::span<const std::int64_t> i, bool real) {
    const std::int64_t doff = naive_offset(d, i);
    if (!real) {
      store_from_f32(args.dst, d.data_type(), doff, 0.f);
      return;
    }
    const float x = load_as_f32(args.src, s.data_type(), naive_offset(s, i));
    const float y = ci::eltwise_reference(x, p.op);
    const std::int64_t channel = i.size() > 1 ? i[1] : 0;
    store_from_f32(args.dst, d.data_type(), doff,
                   with_post_ops(y, p.post_ops, args.binary_operands, doff, channel));
  });
}

}  // namespace cpu_test
