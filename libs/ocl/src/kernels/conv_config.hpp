// kernels/conv_config.hpp — the OpenCL convolution's kernel configuration:
// an explicit struct (what a tuner will search), the heuristic default per
// device and shape, and its validation against the device's limits.
//
// A work-group of wg_oc x wg_ow work-items computes, for one (n, oh) output
// row of one group, a block of (wg_oc * tile_oc) output channels by
// (wg_ow * tile_ow) output columns. Each work-item keeps tile_oc x tile_ow
// accumulators: channels contiguous (vectors of vec_width), columns
// interleaved across the group. With local_tiling, the group stages
// tile_ic input channels of weights and of the src rows it reads in local
// memory (zero-filled where the padding is) before computing on them.
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
  void write_key(key_writer& w) const;
  friend bool operator==(const conv_config&, const conv_config&) = default;
};

conv_config default_conv_config(const device_entry& dev, const conv_problem& p);
// Whether `c` is well formed and fits `dev` for `p` (work-group size, local
// memory).
result<bool> check_conv_config(const conv_config& c, const device_entry& dev,
                               const conv_problem& p);
// Bytes of local memory `c` uses for `p` (0 without local tiling).
std::size_t conv_local_bytes(const conv_config& c, const conv_problem& p);

}  // namespace primcache::ocl_internal
