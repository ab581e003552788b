// kernels/conv_geometry.hpp — a validated convolution problem as the
// convolution kernel's generator, weight packer, heuristics and reference
// see it: sizes, strides and padding by name, activation layouts reduced to
// per-dimension strides, and the quantities derived from them.
//
//   auto g = analyze_conv(p);          // conv_validation.hpp
//   if (!g) return g.why();
//   float* w = packed + conv_packed_weight_floats(g.value());
//
// Thread-safety: plain values and pure functions. Exceptions: none.
#pragma once

#include <cstdint>

#include "kernels/conv_kernel.hpp"
#include "primcache/runtime/thread_pool.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace primcache::cpu_internal {

// Output channels per vector: a 16-float vector is one zmm at avx512_core and
// two ymm at avx2, so the packed weights layout (Ohwi16o) is the same at
// every level.
inline constexpr int conv_lanes = 16;

// How an activation tensor maps (n, c, h, w) to an element offset: plain
// (c * c_stride) or nChw16c ((c / 16) * c_stride + c % 16).
struct conv_act_layout {
  std::int64_t off0 = 0, n_stride = 0, c_stride = 0, h_stride = 0, w_stride = 0;
  bool blocked = false;

  std::int64_t channel(std::int64_t c) const {
    return blocked ? (c / conv_lanes) * c_stride + c % conv_lanes : c * c_stride;
  }
  std::int64_t offset(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    return off0 + n * n_stride + channel(c) + h * h_stride + w * w_stride;
  }
  // Whether 16 channels from a multiple of `align` are 16 consecutive floats.
  bool vector_contiguous(std::int64_t align) const {
    if (blocked) return align % conv_lanes == 0;
    return c_stride == 1;
  }
};

// Everything the code generator, the packer and the reference need, derived
// once from a validated problem.
struct conv_geometry {
  std::int64_t n = 0, g = 0, ic = 0, oc = 0, icg = 0, ocg = 0;
  std::int64_t ih = 0, iw = 0, oh = 0, ow = 0, kh = 0, kw = 0;
  std::int64_t sh = 0, sw = 0, dh = 0, dw = 0, pt = 0, pl = 0;
  conv_act_layout src, dst;
  bool depthwise = false;
  bool has_bias = false;
  // 16-channel output blocks per group (depthwise: per tensor).
  std::int64_t nb = 0;
  // The problem's threads (what a configuration's thread partition splits).
  int nthr = 1;
};

// The physical element offset of a logical index in any blocked descriptor
// (the addressing formula of memory_desc.hpp, without its checks).
std::int64_t conv_md_offset(const memory_desc& md, const std::int64_t* idx);

// Floats of the packed weights (Ohwi16o, or Goihw16g for depthwise).
std::int64_t conv_packed_weight_floats(const conv_geometry& g);

// Packs `user` weights (descriptor `weights`, oihw or goihw in any layout)
// into `packed` (conv_packed_weight_floats(g) floats) on up to nthr
// threads of `pool`: Ohwi16o per group, output channels past the group's
// as zeros; depthwise Goihw16g, channels past the tensor's as zeros. The
// layout both the specialized and the generic kernel read.
void conv_pack_weights(const conv_geometry& g, const memory_desc& weights, int nthr,
                       const float* user, float* packed, thread_pool& pool);

// Work items of the generated function: rows x images x groups x chunks of
// c.oc_blocks output blocks.
std::int64_t conv_work_items(const conv_geometry& g, const conv_config& c);
// Vector multiply-adds in one full work item (an output row of one chunk of
// oc_blocks output-channel blocks): what conv_chunk_for weighs items by.
std::int64_t conv_item_fmas(const conv_geometry& g, const conv_config& c);

}  // namespace primcache::cpu_internal
