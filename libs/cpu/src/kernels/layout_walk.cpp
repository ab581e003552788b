#include "kernels/layout_walk.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/integer_math.hpp"
#include "kernels/kernel_failure.hpp"

namespace primcache::cpu_internal {
namespace {

// The walk is the reorder kernel's: plan_walk's failures name it, for the
// eltwise kernel too.
constexpr std::string_view walk_owner = "reorder";

// One level of a layout's addressing of a dimension: index i contributes
// ((i / lo) % (next level's lo / lo)) * stride, the top level (i / lo) * stride.
struct level {
  std::int64_t lo;
  std::int64_t stride;
};

std::vector<level> levels_of(const memory_desc& md, int d) {
  std::vector<level> out;
  std::int64_t inner = 1;  // product of the inner blocks inside block k
  std::int64_t cum = 1;    // product of dim d's blocks inside block k
  const auto blks = md.inner_blks();
  const auto idxs = md.inner_idxs();
  for (int k = md.inner_nblks() - 1; k >= 0; --k) {
    if (idxs[k] == d) {
      out.push_back({cum, inner});
      cum *= blks[k];
    }
    inner *= blks[k];
  }
  out.push_back({cum, md.strides()[d]});
  return out;
}

std::int64_t stride_at(const std::vector<level>& levels, std::int64_t lo) {
  const level* found = &levels.front();
  for (const level& l : levels) {
    if (l.lo <= lo) found = &l;
  }
  return found->stride * (lo / found->lo);
}

// Non-overlap of dst: sorted by stride, each outer dimension must start past
// the extent of those inside it.
bool dst_overlaps(const memory_desc& md) {
  std::int64_t inner = 1;
  std::vector<std::pair<std::int64_t, std::int64_t>> outer;  // stride, extent
  for (std::int64_t b : md.inner_blks()) inner *= b;
  for (int d = 0; d < md.ndims(); ++d) {
    std::int64_t blk = 1;
    for (int k = 0; k < md.inner_nblks(); ++k) {
      if (md.inner_idxs()[k] == d) blk *= md.inner_blks()[k];
    }
    const std::int64_t ext = md.padded_dims()[d] / blk;
    if (ext > 1) outer.emplace_back(md.strides()[d], ext);
  }
  std::sort(outer.begin(), outer.end());
  std::int64_t covered = inner;
  for (auto [stride, ext] : outer) {
    if (stride < covered) return true;
    covered = stride * ext;
  }
  return false;
}

}  // namespace

walk_plan batch_padded_block(walk_plan plan, unsigned keep_dims) {
  if (plan.inner != walk_plan::inner_kind::stream || plan.loops.size() < 2) return plan;
  const walk_loop& in = plan.loops.back();
  const walk_loop& out = plan.loops[plan.loops.size() - 2];
  const int d = in.dim;
  const bool padded_block = d >= 0 && !plan.exact[d] && plan.known[d] && !(keep_dims & (1u << d)) &&
                            in.period == 0 && is_pow2(in.extent) && in.src_stride == 1 &&
                            in.dst_stride == 1;
  // The outer loop's index is tracked nowhere: merged dims, or an exact one
  // no operand or scale needs.
  const bool untracked =
      out.dim < 0 || (out.dim != d && plan.exact[out.dim] && !(keep_dims & (1u << out.dim)));
  if (!padded_block || !untracked || out.src_stride != in.extent || out.dst_stride != in.extent) {
    return plan;
  }
  walk_loop batched = in;
  batched.extent = in.extent * out.extent;
  batched.period = in.extent;
  if (out.dim >= 0) plan.known[out.dim] = false;
  plan.loops.pop_back();
  plan.loops.back() = batched;
  return plan;
}

namespace {

// A stream's innermost loop that a join may take: a short power-of-two
// block of one dimension with unit strides in both layouts, not yet batched
// or joined.
bool joinable_block(const walk_plan& plan) {
  if (plan.inner != walk_plan::inner_kind::stream || plan.loops.size() < 2) return false;
  const walk_loop& in = plan.loops.back();
  return in.dim >= 0 && in.period == 0 && in.src_run == 0 && in.dst_run == 0 &&
         in.src_stride == 1 && in.dst_stride == 1 && is_pow2(in.extent) && in.extent < 64;
}

}  // namespace

walk_plan join_dst_runs(walk_plan plan) {
  if (!joinable_block(plan)) return plan;
  const walk_loop& in = plan.loops.back();
  const walk_loop& out = plan.loops[plan.loops.size() - 2];
  // dst continues the block along the same dimension; src does not (where
  // it does, plan_walk has merged the two already).
  const bool continued = out.dim == in.dim && out.period == 0 && out.src_run == 0 &&
                         out.dst_stride == in.extent && out.mult == in.extent * in.mult &&
                         out.src_stride != in.extent && out.extent * in.extent <= 64;
  if (!continued) return plan;
  walk_loop joined = in;
  joined.extent = in.extent * out.extent;
  joined.src_run = in.extent;
  joined.src_run_stride = out.src_stride;
  plan.loops.pop_back();
  plan.loops.back() = joined;
  return plan;
}

walk_plan join_src_runs(walk_plan plan) {
  if (!joinable_block(plan)) return plan;
  const walk_loop& in = plan.loops.back();
  for (std::size_t k = 0; k + 1 < plan.loops.size(); ++k) {
    const walk_loop& out = plan.loops[k];
    // src continues the block along the same dimension; dst does not.
    const bool continued = out.dim == in.dim && out.period == 0 && out.src_run == 0 &&
                           out.dst_run == 0 && out.src_stride == in.extent &&
                           out.mult == in.extent * in.mult && out.dst_stride != in.extent &&
                           out.extent * in.extent <= 64;
    if (!continued) continue;
    walk_loop joined = in;
    joined.extent = in.extent * out.extent;
    joined.dst_run = in.extent;
    joined.dst_run_stride = out.dst_stride;
    plan.loops.back() = joined;
    plan.loops.erase(plan.loops.begin() + static_cast<std::ptrdiff_t>(k));
    return plan;
  }
  return plan;
}

walk_plan join_runs(walk_plan plan) {
  return join_src_runs(join_dst_runs(std::move(plan)));
}

std::int64_t walk_plan::work_items(std::int64_t chunk) const {
  std::int64_t n = 1;
  const std::size_t split = split_loop();
  for (std::size_t k = 0; k < split; ++k) n *= loops[k].extent;
  return n * div_up(loops[split].extent, chunk);
}

std::int64_t walk_chunk(const walk_plan& plan, std::int64_t chunk, int unit) {
  const std::int64_t extent = plan.loops[plan.split_loop()].extent;
  if (chunk <= 0 || chunk >= extent) return extent;
  return std::min(extent, round_up(chunk, unit));
}

result<walk_plan> plan_walk(const memory_desc& src, const memory_desc& dst, unsigned keep_dims) {
  walk_plan plan;
  plan.ndims = dst.ndims();
  plan.src_offset0 = src.offset0();
  plan.dst_offset0 = dst.offset0();
  if (dst_overlaps(dst)) {
    return kernel_invalid(walk_owner, "dst " + dst.to_string() + " has overlapping strides");
  }
  std::vector<walk_loop> loops;
  for (int d = 0; d < plan.ndims; ++d) {
    const auto sl = levels_of(src, d);
    const auto dl = levels_of(dst, d);
    std::vector<std::int64_t> cuts;
    for (const auto& l : sl) cuts.push_back(l.lo);
    for (const auto& l : dl) cuts.push_back(l.lo);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t k = 1; k < cuts.size(); ++k) {
      if (cuts[k] % cuts[k - 1] != 0) {
        return kernel_unimplemented(walk_owner, "the blocks of dimension " + std::to_string(d) +
                                                    " in " + src.to_string() + " and " +
                                                    dst.to_string() + " do not nest");
      }
    }
    plan.dims[d] = dst.dims()[d];
    plan.bound[d] = dst.padded_dims()[d];
    plan.exact[d] = plan.bound[d] == plan.dims[d] && plan.dims[d] % cuts.back() == 0;
    plan.known[d] = true;
    for (std::size_t k = 0; k < cuts.size(); ++k) {
      walk_loop l;
      l.extent = k + 1 < cuts.size() ? cuts[k + 1] / cuts[k] : div_up(plan.bound[d], cuts[k]);
      l.src_stride = stride_at(sl, cuts[k]);
      l.dst_stride = stride_at(dl, cuts[k]);
      l.dim = d;
      l.mult = cuts[k];
      if (l.extent > 1) loops.push_back(l);
    }
  }
  std::stable_sort(loops.begin(), loops.end(), [](const walk_loop& a, const walk_loop& b) {
    if (a.dst_stride != b.dst_stride) return a.dst_stride > b.dst_stride;
    return a.src_stride > b.src_stride;
  });
  auto mergeable = [&](const walk_loop& l) {
    return l.dim < 0 || (plan.exact[l.dim] && !(keep_dims & (1u << l.dim)));
  };
  for (const walk_loop& l : loops) {
    if (!plan.loops.empty()) {
      walk_loop& a = plan.loops.back();
      if (mergeable(a) && mergeable(l) && a.src_stride == l.extent * l.src_stride &&
          a.dst_stride == l.extent * l.dst_stride) {
        if (a.dim >= 0) plan.known[a.dim] = false;
        if (l.dim >= 0) plan.known[l.dim] = false;
        a.extent *= l.extent;
        a.src_stride = l.src_stride;
        a.dst_stride = l.dst_stride;
        a.dim = -1;
        a.mult = 0;
        continue;
      }
    }
    plan.loops.push_back(l);
  }
  if (plan.loops.empty()) plan.loops.push_back(walk_loop{1, 0, 0, -1, 0});
  const walk_loop& j = plan.loops.back();
  if (j.dst_stride == 1 && j.src_stride != 1) {
    for (std::size_t k = 0; k + 1 < plan.loops.size(); ++k) {
      if (plan.loops[k].src_stride == 1) {
        walk_loop i = plan.loops[k];
        plan.loops.erase(plan.loops.begin() + static_cast<std::ptrdiff_t>(k));
        plan.loops.insert(plan.loops.end() - 1, i);
        plan.inner = walk_plan::inner_kind::tile;
        break;
      }
    }
  }
  return plan;
}
void run_walk(walk_function* fn, const void* src, void* dst, const float* scales,
              const float* const* operands, std::int64_t work_items, int nthr, thread_pool& pool) {
  const std::int64_t n = work_items;
  const int threads = static_cast<int>(std::min<std::int64_t>(nthr, n));
  if (threads <= 1) {
    fn(src, dst, scales, operands, 0, n);
    return;
  }
  pool.parallel_for(threads, [&](int ithr, int nt) {
    const range r = balance(n, ithr, nt);
    if (r.begin < r.end) fn(src, dst, scales, operands, r.begin, r.end);
  });
}

result<bool> validate_walk_tensors(std::string_view kernel, const memory_desc& src,
                                   const memory_desc& dst, int nthr) {
  if (!src.is_blocked()) {
    return kernel_invalid(kernel, "src " + src.to_string() + " has no resolved layout");
  }
  if (!dst.is_blocked()) {
    return kernel_invalid(kernel, "dst " + dst.to_string() + " has no resolved layout");
  }
  if (src.ndims() != dst.ndims() ||
      !std::equal(src.dims().begin(), src.dims().end(), dst.dims().begin())) {
    return kernel_invalid(
        kernel, "src " + src.to_string() + " and dst " + dst.to_string() + " have different dims");
  }
  if (nthr < 1) {
    return kernel_invalid(kernel, "nthr is " + std::to_string(nthr) + "; it must be >= 1");
  }
  return true;
}

result<bool> validate_walk_vectors(std::string_view kernel, int vector_lanes, int unroll,
                                   std::int64_t chunk) {
  if (!is_pow2(vector_lanes) || vector_lanes < 4 || vector_lanes > 64) {
    return kernel_invalid(kernel, "config vector_lanes " + std::to_string(vector_lanes) +
                                      " is not a power of two in [4, 64]");
  }
  if (unroll < 1 || unroll > 8) {
    return kernel_invalid(kernel, "config unroll " + std::to_string(unroll) + " is outside [1, 8]");
  }
  if (chunk < 0) {
    return kernel_invalid(kernel, "config chunk " + std::to_string(chunk) + " is negative");
  }
  return true;
}

}  // namespace primcache::cpu_internal
