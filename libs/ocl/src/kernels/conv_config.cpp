#include "kernels/conv_config.hpp"

#include <algorithm>
#include <string>

namespace primcache::ocl_internal {

void conv_config::write_key(key_writer& w) const {
  w.i32(wg_oc).i32(wg_ow).i32(tile_oc).i32(tile_ow).i32(vec_width).i32(tile_ic).boolean(
      local_tiling);
  w.i32(ic_unroll);
}

std::size_t conv_local_bytes(const conv_config& c, const conv_problem& p) {
  if (!c.local_tiling) return 0;
  const std::int64_t block_oc = std::int64_t{c.wg_oc} * c.tile_oc;
  const std::int64_t block_ow = std::int64_t{c.wg_ow} * c.tile_ow;
  const std::int64_t src_span = (block_ow - 1) * p.stride_w + (p.kw() - 1) * (p.dilate_w + 1) + 1;
  const std::int64_t floats = std::int64_t{c.tile_ic} * p.kh() * (p.kw() * block_oc + src_span);
  return static_cast<std::size_t>(floats) * sizeof(float);
}

int conv_ic_unroll(const conv_config& c, std::int64_t icg) {
  if (c.ic_unroll > 0) return c.ic_unroll;
  const std::int64_t fmas = std::int64_t{c.tile_ow} * (c.tile_oc / std::max(c.vec_width, 1));
  int u = 8;
  while (u > 1 && (u * fmas > 128 || u > icg)) u /= 2;
  return u;
}

int conv_default_ic_unroll(const conv_config& c, const conv_problem& p) {
  conv_config capped = c;
  capped.ic_unroll = 0;  // the FMA and channel caps alone
  const int full = conv_ic_unroll(capped, p.ic_per_group());
  const std::int64_t loop = p.ic_per_group() * p.kh() * p.kw();
  return loop >= kConvLongChannelLoop ? full : std::min(full, kConvShortLoopIcUnroll);
}

int conv_best_columns(std::int64_t ow, int lo, int hi) {
  if (ow <= lo) return static_cast<int>(std::max<std::int64_t>(ow, 1));
  int best = lo;
  std::int64_t best_total = (ow + lo - 1) / lo * lo;
  for (int t = lo + 1; t <= hi && t <= ow; ++t) {
    const std::int64_t total = (ow + t - 1) / t * t;
    if (total <= best_total) {
      best = t;
      best_total = total;
    }
  }
  return best;
}

format_tag conv_preferred_activation(const device_entry& dev, std::int64_t icg, std::int64_t ocg) {
  (void)icg;
  if ((dev.type & CL_DEVICE_TYPE_GPU) != 0) return format_tag::nchw;
  return ocg >= kConvNhwcMinOcg ? format_tag::nhwc : format_tag::nchw;
}

conv_config default_conv_config(const device_entry& dev, const conv_problem& p) {
  conv_config c;
  const bool gpu = (dev.type & CL_DEVICE_TYPE_GPU) != 0;
  if (gpu) {
    c = {16, 8, 4, 4, 4, 8, true};
  } else {
    // CPU devices (PoCL): as for the matmul, local memory is ordinary
    // memory behind the same caches, so the kernel reads global memory
    // directly. The register-tiled kernel with 16 output channels in one
    // float16 by 7-8 output columns per work-item (7-8 zmm accumulators,
    // one vector load and 7-8 broadcast FMAs per input channel, the
    // channel loop unrolled 8 times where it is long, else twice:
    // conv_default_ic_unroll), 4 work-items along the channels
    // (docs/PERFORMANCE.md, "The register-tiled OpenCL convolution").
    c = {4, 1, 16, 8, 16, 4, false};
  }
  const std::int64_t ocg = p.oc_per_group(), ow = p.ow();
  // Small shapes: shrink the block toward the output so work-items do not
  // compute mostly padding (depthwise ends with one channel per item).
  // CPU devices keep the register tile and narrow the group first.
  if (!gpu) {
    while (c.wg_oc > 1 && std::int64_t{c.wg_oc} * c.tile_oc / 2 >= ocg) c.wg_oc /= 2;
  }
  while (c.tile_oc > 1 && std::int64_t{c.wg_oc} * c.tile_oc / 2 >= ocg) c.tile_oc /= 2;
  while (c.wg_oc > 1 && std::int64_t{c.wg_oc} * c.tile_oc / 2 >= ocg) c.wg_oc /= 2;
  if (gpu) {
    while (c.tile_ow > 1 && std::int64_t{c.wg_ow} * c.tile_ow / 2 >= ow) c.tile_ow /= 2;
    while (c.wg_ow > 1 && std::int64_t{c.wg_ow} * c.tile_ow / 2 >= ow) c.wg_ow /= 2;
  } else {
    // A work-item's columns are consecutive: 4-8 of them, chosen to fit
    // the row; with few channels per item, the registers go to columns
    // (up to 16).
    c.tile_ow = c.tile_oc < 4 ? conv_best_columns(ow, 4, 16) : conv_best_columns(ow, 4, 8);
  }
  c.vec_width = std::min(c.vec_width, c.tile_oc);
  while (static_cast<std::size_t>(c.wg_oc) * c.wg_ow > dev.max_work_group_size && c.wg_ow > 1) {
    c.wg_ow /= 2;
  }
  while (static_cast<std::size_t>(c.wg_oc) * c.wg_ow > dev.max_work_group_size && c.wg_oc > 1) {
    c.wg_oc /= 2;
  }
  c.tile_ic = static_cast<int>(std::min<std::int64_t>(c.tile_ic, p.ic_per_group()));
  while (c.local_tiling && conv_local_bytes(c, p) > dev.local_mem_size && c.tile_ic > 1) {
    c.tile_ic /= 2;
  }
  if (conv_local_bytes(c, p) > dev.local_mem_size) c.local_tiling = false;
  c.ic_unroll = c.local_tiling ? 0 : conv_default_ic_unroll(c, p);
  return c;
}

result<bool> check_conv_config(const conv_config& c, const device_entry& dev,
                               const conv_problem& p) {
  auto bad = [](std::string why) {
    return failure{status::invalid_arguments, "convolution config: " + std::move(why)};
  };
  if (c.wg_oc < 1 || c.wg_ow < 1 || c.tile_oc < 1 || c.tile_ow < 1 || c.tile_ic < 1) {
    return bad("sizes must be positive");
  }
  if (c.tile_oc > 16 || c.tile_ow > 16) return bad("tiles above 16 outputs per dimension");
  if (c.ic_unroll < 0 || c.ic_unroll > 16) return bad("ic_unroll not in 0..16");
  const int v = c.vec_width;
  if (v != 1 && v != 2 && v != 4 && v != 8 && v != 16) return bad("vec_width not 1/2/4/8/16");
  if (c.tile_oc % v != 0) return bad("vec_width does not divide tile_oc");
  if (static_cast<std::size_t>(c.wg_oc) * c.wg_ow > dev.max_work_group_size) {
    return bad("work-group of " + std::to_string(c.wg_oc * c.wg_ow) + " exceeds the device's " +
               std::to_string(dev.max_work_group_size));
  }
  const std::size_t local_bytes = conv_local_bytes(c, p);
  if (local_bytes > dev.local_mem_size) {
    return bad(std::to_string(local_bytes) + " bytes of local memory exceed the device's " +
               std::to_string(dev.local_mem_size));
  }
  return true;
}

}  // namespace primcache::ocl_internal
