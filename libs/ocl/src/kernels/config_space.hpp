// kernels/config_space.hpp — what a tuner searches for the OpenCL matmul and
// convolution: each configuration's candidates for one problem on one
// device, and the conversions between the typed configurations
// (matmul_config, conv_config) and the backend-level form the runtime, the
// keys and the tune tables share (primcache::backend::kernel_config).
//
//   std::vector<matmul_config> s = matmul_config_candidates(dev, p);
//   backend::kernel_config f = to_fields(s[3]);   // {"wg_m":1,"wg_n":16,...}
//   auto back = matmul_config_from_fields(f);     // checked names and ranges
//
// A candidate space holds every configuration of the grid below that
// check_*_config accepts on the device and whose block does not exceed the
// problem by more than the heuristic's own shrinking allows (a block of
// twice the output or more computes mostly padding): work-groups and tiles
// of 1, 2, 4, 8, 16 per dimension (for the convolution's columns per
// work-item also the counts its default fits to the row,
// conv_best_columns(OW, 4, 8) and (OW, 4, 16): 7 for ResNet-50's 28, 14
// and 7 columns), every vector width that divides the
// vectorized tile, local tiling off and on (on: slices of 8, 16, 32 for
// the matmul's K; 1, 2, 4, 8, 16 input channels for the convolution,
// at most the group's; the convolution keeps it off on CPU devices, where
// local memory is ordinary memory), and for the convolution without local
// tiling the channel loop's unroll (ic_unroll 1, 2, 4, 8, at most IC/G).
// Fields a configuration does not use are canonical (no local tiling:
// tile_k 16, tile_ic min(4, IC/G); with it: ic_unroll 0), so that no two
// candidates generate the same kernel. Ordered lexicographically, local
// tiling outermost. The heuristic's default need not be in the space (a
// tuner measures it as candidate 0 anyway).
//
// Thread-safety: pure functions. Exceptions: std::bad_alloc only;
// *_from_fields report bad fields as invalid_arguments values.
#pragma once

#include <vector>

#include "device_list.hpp"
#include "kernels/conv_config.hpp"
#include "kernels/matmul_config.hpp"
#include "primcache/base/result.hpp"
#include "primcache/runtime/backend/kernel_config.hpp"

namespace primcache::ocl_internal {

std::vector<matmul_config> matmul_config_candidates(const device_entry& dev,
                                                    const matmul_problem& p);
std::vector<conv_config> conv_config_candidates(const device_entry& dev, const conv_problem& p);

// Fields in struct order: wg_m, wg_n, tile_m, tile_n, vec_width, tile_k,
// local_tiling (0/1).
backend::kernel_config to_fields(const matmul_config& c);
// Exactly those names in that order, each an int in [1, 1024] (local_tiling
// 0/1); whether the device runs it is check_matmul_config's question.
result<matmul_config> matmul_config_from_fields(const backend::kernel_config& f);

// Fields: wg_oc, wg_ow, tile_oc, tile_ow, vec_width, tile_ic, local_tiling,
// ic_unroll (0..16; 0 is conv_ic_unroll's rule).
backend::kernel_config to_fields(const conv_config& c);
result<conv_config> conv_config_from_fields(const backend::kernel_config& f);

}  // namespace primcache::ocl_internal
