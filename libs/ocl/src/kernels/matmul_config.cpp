#include "kernels/matmul_config.hpp"

#include <algorithm>

namespace primcache::ocl_internal {

void matmul_config::write_key(key_writer& w) const {
  w.i32(wg_m).i32(wg_n).i32(tile_m).i32(tile_n).i32(vec_width).i32(tile_k).boolean(local_tiling);
}

matmul_config default_matmul_config(const device_entry& dev, const matmul_problem& p) {
  matmul_config c;
  const bool gpu = (dev.type & CL_DEVICE_TYPE_GPU) != 0;
  if (gpu) {
    c = {16, 16, 4, 4, 4, 16, true};
  } else {
    // CPU devices (PoCL): local memory is ordinary memory behind the same
    // caches, so staging through it only adds copies and barriers. The
    // register-tiled kernel with 8 rows by 16 columns per work-item in one
    // float16 (8 zmm accumulators, 8 FMAs per K step, the K loop unrolled
    // 8 times) and 16 work-items along N did best in the sweep recorded in
    // docs/ocl.md ("The matmul configuration").
    c = {1, 16, 8, 16, 16, 16, false};
  }
  // Small shapes: shrink the block toward the matrix so work-items do not
  // compute mostly padding. CPU devices narrow the group before the tile
  // (a work-item's register tile is what makes it fast there; the group is
  // only a loop); GPUs the tile first.
  auto shrink = [](int& first, int& second, std::int64_t extent) {
    while (first > 1 && static_cast<std::int64_t>(first) * second / 2 >= extent) first /= 2;
    while (second > 1 && static_cast<std::int64_t>(first) * second / 2 >= extent) second /= 2;
  };
  if (gpu) {
    shrink(c.tile_m, c.wg_m, p.m());
    shrink(c.tile_n, c.wg_n, p.n());
  } else {
    shrink(c.wg_m, c.tile_m, p.m());
    shrink(c.wg_n, c.tile_n, p.n());
  }
  c.vec_width = std::min(c.vec_width, c.tile_n);
  while (static_cast<std::size_t>(c.wg_m) * c.wg_n > dev.max_work_group_size && c.wg_m > 1) {
    c.wg_m /= 2;
  }
  const std::size_t local_bytes = sizeof(float) * static_cast<std::size_t>(c.tile_k) *
                                  static_cast<std::size_t>(c.wg_m * c.tile_m + c.wg_n * c.tile_n);
  if (local_bytes > dev.local_mem_size) c.local_tiling = false;
  return c;
}

int matmul_k_unroll(const matmul_config& c, std::int64_t k) {
  const std::int64_t fmas = std::int64_t{c.tile_m} * (c.tile_n / std::max(c.vec_width, 1));
  int u = 8;
  while (u > 1 && (u * fmas > 128 || u > k)) u /= 2;
  return u;
}

result<bool> check_matmul_config(const matmul_config& c, const device_entry& dev) {
  auto bad = [](std::string why) {
    return failure{status::invalid_arguments, "matmul config: " + std::move(why)};
  };
  if (c.wg_m < 1 || c.wg_n < 1 || c.tile_m < 1 || c.tile_n < 1 || c.tile_k < 1) {
    return bad("sizes must be positive");
  }
  if (c.tile_m > 16 || c.tile_n > 16) return bad("tiles above 16 outputs per dimension");
  const int v = c.vec_width;
  if (v != 1 && v != 2 && v != 4 && v != 8 && v != 16) return bad("vec_width not 1/2/4/8/16");
  if (c.tile_n % v != 0) return bad("vec_width does not divide tile_n");
  if (static_cast<std::size_t>(c.wg_m) * c.wg_n > dev.max_work_group_size) {
    return bad("work-group of " + std::to_string(c.wg_m * c.wg_n) + " exceeds the device's " +
               std::to_string(dev.max_work_group_size));
  }
  const std::size_t local_bytes = sizeof(float) * static_cast<std::size_t>(c.tile_k) *
                                  static_cast<std::size_t>(c.wg_m * c.tile_m + c.wg_n * c.tile_n);
  if (c.local_tiling && local_bytes > dev.local_mem_size) {
    return bad(std::to_string(local_bytes) + " bytes of local memory exceed the device's " +
               std::to_string(dev.local_mem_size));
  }
  return true;
}

}  // namespace primcache::ocl_internal
