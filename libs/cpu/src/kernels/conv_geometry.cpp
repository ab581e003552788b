#include "kernels/conv_geometry.hpp"

#include <array>

#include "kernels/integer_math.hpp"

namespace primcache::cpu_internal {

namespace {
constexpr int lanes = conv_lanes;
}  // namespace

std::int64_t conv_md_offset(const memory_desc& md, const std::int64_t* idx) {
  std::array<std::int64_t, max_ndims> p{};
  const int nd = md.ndims();
  for (int d = 0; d < nd; ++d) p[d] = idx[d];
  std::int64_t off = 0;
  std::int64_t mult = 1;
  const auto blks = md.inner_blks();
  const auto idxs = md.inner_idxs();
  for (int k = md.inner_nblks() - 1; k >= 0; --k) {
    const auto d = static_cast<int>(idxs[k]);
    off += (p[d] % blks[k]) * mult;
    p[d] /= blks[k];
    mult *= blks[k];
  }
  const auto strides = md.strides();
  for (int d = 0; d < nd; ++d) off += p[d] * strides[d];
  return off + md.offset0();
}

std::int64_t conv_packed_weight_floats(const conv_geometry& g) {
  if (g.depthwise) return g.nb * g.kh * g.kw * lanes;
  return g.g * g.nb * g.kh * g.kw * g.icg * lanes;
}

std::int64_t conv_work_items(const conv_geometry& g, const conv_config& c) {
  return g.n * (g.depthwise ? 1 : g.g) * div_up(g.nb, c.oc_blocks) * g.oh;
}

std::int64_t conv_item_fmas(const conv_geometry& g, const conv_config& c) {
  return g.ow * std::min<std::int64_t>(c.oc_blocks, g.nb) * g.kh * g.kw * (g.depthwise ? 1 : g.icg);
}
void conv_pack_weights(const conv_geometry& g, const memory_desc& weights, int nthr,
                       const float* user, float* packed, thread_pool& pool) {
  const bool five = weights.ndims() == 5;
  auto user_at = [&](std::int64_t grp, std::int64_t o, std::int64_t i, std::int64_t h,
                     std::int64_t w) {
    const std::int64_t idx5[5] = {grp, o, i, h, w};
    return user[conv_md_offset(weights, five ? idx5 : idx5 + 1)];
  };
  constexpr int lanes = conv_lanes;
  const std::int64_t outer = g.depthwise ? g.nb : g.g * g.nb;
  pool.parallel_for(nthr, [&](int ithr, int nthr_) {
    const range r = balance(outer, ithr, nthr_);
    for (std::int64_t blk = r.begin; blk < r.end; ++blk) {
      if (g.depthwise) {
        float* out = packed + blk * g.kh * g.kw * lanes;
        for (std::int64_t h = 0; h < g.kh; ++h)
          for (std::int64_t w = 0; w < g.kw; ++w)
            for (int l = 0; l < lanes; ++l) {
              const std::int64_t grp = blk * lanes + l;
              *out++ = grp < g.g ? user_at(grp, 0, 0, h, w) : 0.f;
            }
        continue;
      }
      const std::int64_t grp = blk / g.nb;
      const std::int64_t ob = blk % g.nb;
      float* out = packed + blk * g.kh * g.kw * g.icg * lanes;
      for (std::int64_t h = 0; h < g.kh; ++h)
        for (std::int64_t w = 0; w < g.kw; ++w)
          for (std::int64_t i = 0; i < g.icg; ++i)
            for (int l = 0; l < lanes; ++l) {
              const std::int64_t o = ob * lanes + l;
              *out++ = o < g.ocg ? user_at(grp, o, i, h, w) : 0.f;
            }
    }
  });
}

}  // namespace primcache::cpu_internal
