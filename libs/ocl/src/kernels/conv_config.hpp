// kernels/conv_config.hpp — the OpenCL convolution's kernel configuration:
// an explicit struct (what a tuner will search), the heuristic default per
// device and shape, and its validation against the device's limits.
//
// A work-group of wg_oc x wg_ow work-items computes, for one (n, oh) output
// row of one group, a block of (wg_oc * tile_oc) output channels by
// (wg_ow * tile_ow) output columns. Each work-item keeps tile_oc x tile_ow
// accumulators: channels contiguous (vectors of vec_width). Without
// local tiling (the register-tiled kernel, conv_source.cpp) a work-item's
// columns are consecutive, its accumulators named registers, and tile_ic
// is unused (canonically min(4, IC/G)); with local_tiling, columns are
// interleaved across the group, which stages tile_ic input channels of
// weights and of the src rows it reads in local memory (zero-filled where
// the padding is) before computing on them.
#pragma once

#include <cstddef>

#include "device_list.hpp"
#include "kernels/conv_problem.hpp"
#include "primcache/base/result.hpp"
#include "primcache/keyhash/key.hpp"

namespace primcache::ocl_internal {

struct conv_config {
  int wg_oc = 16, wg_ow = 1;     // work-group size (work-items)
  int tile_oc = 8, tile_ow = 8;  // outputs per work-item
  int vec_width = 8;             // 1, 2, 4, 8 or 16; divides tile_oc
  int tile_ic = 4;               // input channels per local-memory slice
  bool local_tiling = false;
  // Input channels per iteration of the register-tiled kernel's channel
  // loop (0..16; 0: conv_ic_unroll's rule). The default sets it; unused,
  // canonically 0, with local tiling.
  int ic_unroll = 0;
  void write_key(key_writer& w) const;
  friend bool operator==(const conv_config&, const conv_config&) = default;
};

conv_config default_conv_config(const device_entry& dev, const conv_problem& p);
// Whether `c` is well formed and fits `dev` for `p` (work-group size, local
// memory).
result<bool> check_conv_config(const conv_config& c, const device_entry& dev,
                               const conv_problem& p);
// The columns per work-item in [lo, hi] (at most ow) that compute the
// fewest columns in all (a last block past the output overlaps its
// neighbour, so every block computes whole), the widest among equals:
// (4, 8) gives 8 for 56 and 112 columns, 7 for 28, 14 and 7 (ResNet-50's).
int conv_best_columns(std::int64_t ow, int lo, int hi);
// How many input channels the register-tiled kernel (no local tiling)
// unrolls its channel loop by, for a group of `icg` input channels:
// c.ic_unroll when set, else the rule: at most 8 and at most 128 vector
// FMAs an iteration, no more than icg.
int conv_ic_unroll(const conv_config& c, std::int64_t icg);
// The default configuration's channel unroll for the register-tiled kernel
// (CPU devices), per shape: conv_ic_unroll's (8 on ResNet-50's layers) where
// a work-item's channel loop is long (IC/G * KH * KW at least
// kConvLongChannelLoop, the 512- to 2048-channel layers of 14x14 and 7x7
// outputs), where a smaller unroll ran up to 3x slower on PoCL; else at most
// kConvShortLoopIcUnroll, which ran as fast there and builds in about a third
// of the time (docs/PERFORMANCE.md, "Per-shape channel unroll").
inline constexpr std::int64_t kConvLongChannelLoop = 2048;
inline constexpr int kConvShortLoopIcUnroll = 2;
int conv_default_ic_unroll(const conv_config& c, const conv_problem& p);
// Bytes of local memory `c` uses for `p` (0 without local tiling).
std::size_t conv_local_bytes(const conv_config& c, const conv_problem& p);
// The layout `any` activations (src and dst alike) resolve to for a
// convolution with `icg` input and `ocg` output channels per group on
// `dev`: nhwc or nchw, whichever the device's default kernel runs faster
// for that shape (docs/ocl.md, "Convolution"). On CPU devices (PoCL) the
// register-tiled kernel takes nhwc when a work-item computes a vector of
// channels (ocg >= kConvNhwcMinOcg): its stores and its channel loop's src
// reads are then contiguous runs (bench_ocl_conv: faster than nchw on
// ResNet-50's layers). With fewer channels per group (depthwise, narrow
// groups) it keeps nchw, as before: there a work-item's vector is its
// columns, and the measurements under load disagree
// (docs/PERFORMANCE.md, "Which layout `any` activations take"). GPUs keep
// nchw (the local-tiling kernel interleaves columns across the group:
// neighbouring work-items read neighbouring columns).
inline constexpr std::int64_t kConvNhwcMinOcg = 8;
format_tag conv_preferred_activation(const device_entry& dev, std::int64_t icg, std::int64_t ocg);

}  // namespace primcache::ocl_internal
