#include "kernels/config_space.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

namespace primcache::ocl_internal {
namespace {

constexpr int kSizes[] = {1, 2, 4, 8, 16};

// Whether a block of `block` outputs along a dimension of `extent` is no
// larger than the heuristic's shrinking leaves it: it stops once half the
// block is below the extent, so a block of 1 or one under twice the extent.
bool fits(std::int64_t block, std::int64_t extent) {
  return block == 1 || block / 2 < extent;
}

struct field_reader {
  const backend::kernel_config& f;
  const char* kernel;
  result<int> get(std::string_view name, int lo, int hi) const {
    const auto v = f.get(name);
    if (!v || *v < lo || *v > hi) {
      return failure{status::invalid_arguments,
                     std::string(kernel) + " config: " + std::string(name) + " must be in " +
                         std::to_string(lo) + ".." + std::to_string(hi) +
                         (v ? ", not " + std::to_string(*v) : std::string(", it is missing"))};
    }
    return static_cast<int>(*v);
  }
};

}  // namespace

std::vector<matmul_config> matmul_config_candidates(const device_entry& dev,
                                                    const matmul_problem& p) {
  std::vector<matmul_config> out;
  for (bool local : {false, true}) {
    for (int wg_m : kSizes) {
      for (int wg_n : kSizes) {
        for (int tile_m : kSizes) {
          if (!fits(std::int64_t{wg_m} * tile_m, p.m())) continue;
          for (int tile_n : kSizes) {
            if (!fits(std::int64_t{wg_n} * tile_n, p.n())) continue;
            for (int vec : kSizes) {
              if (tile_n % vec != 0) continue;
              for (int tile_k : {8, 16, 32}) {
                if (!local && tile_k != 16) continue;
                const matmul_config c{wg_m, wg_n, tile_m, tile_n, vec, tile_k, local};
                if (check_matmul_config(c, dev)) out.push_back(c);
              }
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<conv_config> conv_config_candidates(const device_entry& dev, const conv_problem& p) {
  std::vector<conv_config> out;
  const std::int64_t ocg = p.oc_per_group(), ow = p.ow(), icg = p.ic_per_group();
  const int unused_tile_ic = static_cast<int>(std::min<std::int64_t>(4, icg));
  // Columns per work-item: the powers of two, and the counts the default
  // picks to fit the row (7 for 28, 14 and 7 columns).
  std::vector<int> tile_ows(std::begin(kSizes), std::end(kSizes));
  for (int t : {conv_best_columns(ow, 4, 8), conv_best_columns(ow, 4, 16)}) {
    if (std::find(tile_ows.begin(), tile_ows.end(), t) == tile_ows.end()) tile_ows.push_back(t);
  }
  std::sort(tile_ows.begin(), tile_ows.end());
  // CPU devices run the register-tiled kernel: local memory is ordinary
  // memory behind the same caches there (docs/ocl.md), so the space keeps
  // local tiling off and spends the budget on the register tile's knobs.
  const bool gpu = (dev.type & CL_DEVICE_TYPE_GPU) != 0;
  for (bool local : {false, true}) {
    if (local && !gpu) continue;
    for (int wg_oc : kSizes) {
      for (int wg_ow : kSizes) {
        for (int tile_oc : kSizes) {
          if (!fits(std::int64_t{wg_oc} * tile_oc, ocg)) continue;
          for (int tile_ow : tile_ows) {
            if (!fits(std::int64_t{wg_ow} * tile_ow, ow)) continue;
            for (int vec : kSizes) {
              if (tile_oc % vec != 0) continue;
              for (int tile_ic : kSizes) {
                if (local ? tile_ic > icg : tile_ic != 1) continue;
                // The channel loop's unroll (register tile only): 1, 2, 4,
                // 8, no more than the group's input channels.
                for (int unroll : {1, 2, 4, 8}) {
                  if (local ? unroll != 1 : unroll > icg) continue;
                  const conv_config c{wg_oc,   wg_ow,
                                      tile_oc, tile_ow,
                                      vec,     local ? tile_ic : unused_tile_ic,
                                      local,   local ? 0 : unroll};
                  if (check_conv_config(c, dev, p)) out.push_back(c);
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

backend::kernel_config to_fields(const matmul_config& c) {
  backend::kernel_config f;
  f.add("wg_m", c.wg_m)
      .add("wg_n", c.wg_n)
      .add("tile_m", c.tile_m)
      .add("tile_n", c.tile_n)
      .add("vec_width", c.vec_width)
      .add("tile_k", c.tile_k)
      .add("local_tiling", c.local_tiling ? 1 : 0);
  return f;
}

result<matmul_config> matmul_config_from_fields(const backend::kernel_config& f) {
  if (auto ok =
          f.expect({"wg_m", "wg_n", "tile_m", "tile_n", "vec_width", "tile_k", "local_tiling"});
      !ok) {
    return failure{status::invalid_arguments, "matmul config: " + ok.why().message};
  }
  const field_reader r{f, "matmul"};
  matmul_config c;
  int* ints[] = {&c.wg_m, &c.wg_n, &c.tile_m, &c.tile_n, &c.vec_width, &c.tile_k};
  const char* names[] = {"wg_m", "wg_n", "tile_m", "tile_n", "vec_width", "tile_k"};
  for (std::size_t i = 0; i < 6; ++i) {
    auto v = r.get(names[i], 1, 1024);
    if (!v) return v.why();
    *ints[i] = v.value();
  }
  auto local = r.get("local_tiling", 0, 1);
  if (!local) return local.why();
  c.local_tiling = local.value() == 1;
  return c;
}

backend::kernel_config to_fields(const conv_config& c) {
  backend::kernel_config f;
  f.add("wg_oc", c.wg_oc)
      .add("wg_ow", c.wg_ow)
      .add("tile_oc", c.tile_oc)
      .add("tile_ow", c.tile_ow)
      .add("vec_width", c.vec_width)
      .add("tile_ic", c.tile_ic)
      .add("local_tiling", c.local_tiling ? 1 : 0)
      .add("ic_unroll", c.ic_unroll);
  return f;
}

result<conv_config> conv_config_from_fields(const backend::kernel_config& f) {
  if (auto ok = f.expect({"wg_oc", "wg_ow", "tile_oc", "tile_ow", "vec_width", "tile_ic",
                          "local_tiling", "ic_unroll"});
      !ok) {
    return failure{status::invalid_arguments, "convolution config: " + ok.why().message};
  }
  const field_reader r{f, "convolution"};
  conv_config c;
  int* ints[] = {&c.wg_oc, &c.wg_ow, &c.tile_oc, &c.tile_ow, &c.vec_width, &c.tile_ic};
  const char* names[] = {"wg_oc", "wg_ow", "tile_oc", "tile_ow", "vec_width", "tile_ic"};
  for (std::size_t i = 0; i < 6; ++i) {
    auto v = r.get(names[i], 1, 1024);
    if (!v) return v.why();
    *ints[i] = v.value();
  }
  auto local = r.get("local_tiling", 0, 1);
  if (!local) return local.why();
  c.local_tiling = local.value() == 1;
  auto unroll = r.get("ic_unroll", 0, 16);
  if (!unroll) return unroll.why();
  c.ic_unroll = unroll.value();
  return c;
}

}  // namespace primcache::ocl_internal
