// kernels/matmul_config.hpp — the OpenCL matmul's kernel configuration:
// an explicit struct (what a tuner will search), the heuristic default per
// device and shape, and its validation against the device's limits.
//
// A work-group of wg_n x wg_m work-items computes a block of
// (wg_m * tile_m) x (wg_n * tile_n) outputs; each work-item keeps
// tile_m x tile_n accumulators (rows interleaved across the group, columns
// contiguous, loaded as vectors of vec_width). With local_tiling, the group
// stages tile_k-deep slices of src and weights in local memory; without it,
// each work-item keeps its tile in named registers and reads src and
// weights directly, its K loop unrolled matmul_k_unroll() times in the
// source (tile_k is then unused).
#pragma once

#include "device_list.hpp"
#include "kernels/matmul_problem.hpp"
#include "primcache/base/result.hpp"
#include "primcache/keyhash/key.hpp"

namespace primcache::ocl_internal {

struct matmul_config {
  int wg_m = 8, wg_n = 8;      // work-group size (work-items)
  int tile_m = 4, tile_n = 4;  // outputs per work-item
  int vec_width = 4;           // 1, 2, 4, 8 or 16; divides tile_n
  int tile_k = 16;             // depth of a local-memory slice
  bool local_tiling = true;
  void write_key(key_writer& w) const;
  friend bool operator==(const matmul_config&, const matmul_config&) = default;
};

matmul_config default_matmul_config(const device_entry& dev, const matmul_problem& p);
// Whether `c` is well formed and fits `dev` (work-group size, local memory).
result<bool> check_matmul_config(const matmul_config& c, const device_entry& dev);
// How many K steps one iteration of the register-tiled kernel's loop does
// (no local tiling): the largest of 8, 4, 2, 1 that keeps an iteration at
// most 128 vector FMAs (tile_m * tile_n / vec_width each) and at most K.
int matmul_k_unroll(const matmul_config& c, std::int64_t k);

}  // namespace primcache::ocl_internal
