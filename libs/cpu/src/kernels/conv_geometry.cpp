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
}  // namespace primcache::cpu_internal
