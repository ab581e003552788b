#include "kernels/generic_reorder_kernel.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <string>

#include "kernels/integer_math.hpp"
#include "kernels/kernel_failure.hpp"
#include "kernels/reorder_config.hpp"
#include "kernels/reorder_validation.hpp"
#include "tiered/generic_code.hpp"

namespace primcache::cpu_internal {

result<generic_walk_params> make_generic_walk_params(const char* kernel, const walk_plan& plan,
                                                     std::int64_t chunk, int tracked_dim,
                                                     int run_lanes) {
  // The dimensions with padding, checked per element as the specialized
  // walk checks them (their loops are never merged: each has its dim).
  std::array<int, gw_max_checks> checked{};
  int nchecks = 0;
  for (int d = 0; d < plan.ndims; ++d) {
    if (plan.exact[d]) continue;
    if (nchecks == gw_max_checks) {
      return kernel_unimplemented(kernel, "the walk pads more than " +
                                              std::to_string(gw_max_checks) +
                                              " dimensions; the generic kernel checks at most " +
                                              std::to_string(gw_max_checks));
    }
    checked[nchecks++] = d;
  }
  if (tracked_dim >= 0 && !plan.known[tracked_dim]) {
    return kernel_unimplemented(
        kernel, "dimension " + std::to_string(tracked_dim) + " is merged away in the walk");
  }
  const std::size_t split = plan.split_loop();
  const std::int64_t levels = static_cast<std::int64_t>(split) + 1;
  if (levels > gw_max_levels) {
    return kernel_unimplemented(kernel, "the walk has " + std::to_string(levels) +
                                            " outer loops; the generic kernel takes at most " +
                                            std::to_string(gw_max_levels));
  }
  auto track = [&](const walk_loop& l) {
    return tracked_dim >= 0 && l.dim == tracked_dim ? l.mult : 0;
  };
  // Checked dimension c's index step in loop l.
  auto check_step = [&](const walk_loop& l, int c) {
    return c < nchecks && l.dim == checked[c] ? l.mult : 0;
  };
  generic_walk_params v{};
  const walk_loop& sl = plan.loops[split];
  if (chunk <= 0 || chunk > sl.extent) chunk = sl.extent;
  v[gw_levels] = levels;
  v[gw_split_extent] = sl.extent;
  v[gw_split_src_stride] = sl.src_stride;
  v[gw_split_dst_stride] = sl.dst_stride;
  v[gw_split_track] = track(sl);
  v[gw_chunk] = chunk;
  if (plan.inner == walk_plan::inner_kind::tile) {
    const walk_loop& j = plan.loops.back();
    if (sl.src_stride != 1 || j.dst_stride != 1) {
      return kernel_invalid(kernel, "a transposing walk whose I and J loops are not unit-stride");
    }
    v[gw_j_extent] = j.extent;
    v[gw_j_src_stride] = j.src_stride;
    v[gw_j_track] = track(j);
    // A tile straddling the padding is clipped to a rectangle of real rows
    // and columns: no checked dimension may step along both I and J.
    for (int c = 0; c < nchecks; ++c) {
      if (check_step(sl, c) != 0 && check_step(j, c) != 0) {
        return kernel_unimplemented(kernel, "padded dimension " + std::to_string(checked[c]) +
                                                " steps along both loops of the transposing walk");
      }
    }
  }
  v[gw_checks] = nchecks;
  for (int c = 0; c < gw_max_checks; ++c) {
    // Unused slots: nothing is past an extent of the largest index.
    v[gw_check_dims + c] = c < nchecks ? plan.dims[checked[c]] : INT64_MAX;
    v[gw_check_bound + c] = c < nchecks ? plan.bound[checked[c]] : INT64_MAX;
    v[gw_split_check + c] = check_step(sl, c);
    if (plan.inner == walk_plan::inner_kind::tile) {
      v[gw_j_check + c] = check_step(plan.loops.back(), c);
    }
  }
  if (plan.inner == walk_plan::inner_kind::stream && nchecks > 0 && split >= 1 &&
      chunk == sl.extent && sl.src_stride == 1 && sl.dst_stride == 1 && is_pow2(sl.extent) &&
      sl.extent <= 64) {
    const walk_loop& k = plan.loops[split - 1];
    bool batch =
        k.src_stride == sl.extent && k.dst_stride == sl.extent && track(sl) == 0 && track(k) == 0;
    for (int c = 0; c < nchecks; ++c) batch = batch && check_step(k, c) == 0;
    v[gw_batch] = batch ? 1 : 0;
  }
  // A joined split loop: whole vectors of run_lanes, each in one run or
  // two half-vector runs, in runs of items along the next level out.
  v[gw_runs] = static_cast<std::int64_t>(gw_run_form::none);
  v[gw_src_run_shift] = v[gw_dst_run_shift] = 63;
  v[gw_src_run_mask] = v[gw_dst_run_mask] = INT64_MAX;
  if (sl.src_run > 0 || sl.dst_run > 0) {
    const std::int64_t run = sl.src_run > 0 ? sl.src_run : sl.dst_run;
    const std::int64_t run_stride = sl.src_run > 0 ? sl.src_run_stride : sl.dst_run_stride;
    bool fits = run_lanes > 0 && plan.inner == walk_plan::inner_kind::stream && split >= 1 &&
                chunk == sl.extent && sl.extent % run_lanes == 0 && is_pow2(run) &&
                (run % run_lanes == 0 || 2 * run == run_lanes);
    if (fits) {
      const walk_loop& k = plan.loops[split - 1];
      fits = track(k) == 0;
      for (int c = 0; c < nchecks; ++c) fits = fits && check_step(k, c) == 0;
    }
    if (!fits) {
      return kernel_unimplemented(kernel, "the walk's joined loop of " + std::to_string(sl.extent) +
                                              " in runs of " + std::to_string(run) +
                                              " does not fit the generic kernel's vectors");
    }
    const bool halves = 2 * run == run_lanes;
    v[gw_runs] = static_cast<std::int64_t>(
        !halves ? gw_run_form::whole
                : (sl.src_run > 0 ? gw_run_form::src_halves : gw_run_form::dst_halves));
    const int side = sl.src_run > 0 ? gw_src_run_shift : gw_dst_run_shift;
    v[side] = std::countr_zero(static_cast<std::uint64_t>(run));
    v[side + 1] = run - 1;
    v[side + 2] = run_stride;
  }
  v[gw_src_offset0] = plan.src_offset0;
  v[gw_dst_offset0] = plan.dst_offset0;
  for (std::size_t k = 0; k < split; ++k) {
    std::int64_t* level = &v[gw_level0 + gw_level_slots * k];
    const walk_loop& l = plan.loops[k];
    level[0] = l.extent;
    level[1] = l.src_stride;
    level[2] = l.dst_stride;
    level[3] = track(l);
    for (int c = 0; c < gw_max_checks; ++c) level[4 + c] = check_step(l, c);
  }
  std::int64_t* chunks = &v[gw_level0 + gw_level_slots * split];
  chunks[0] = div_up(sl.extent, chunk);
  return v;
}

void run_generic_walk(generic_walk_function* fn, const generic_walk_params& params, const void* src,
                      void* dst, const float* scales, const float* const* operands,
                      std::int64_t work_items, int nthr, thread_pool& pool) {
  // As run_walk: the same split of the same work items.
  const std::int64_t n = work_items;
  const int threads = static_cast<int>(std::min<std::int64_t>(nthr, n));
  if (threads <= 1) {
    fn(params.data(), src, dst, scales, operands, 0, n);
    return;
  }
  pool.parallel_for(threads, [&](int ithr, int nt) {
    const range r = balance(n, ithr, nt);
    if (r.begin < r.end) fn(params.data(), src, dst, scales, operands, r.begin, r.end);
  });
}

result<std::unique_ptr<generic_reorder_kernel>> generic_reorder_kernel::create(
    const reorder_problem& p, const reorder_config& specialized, cpu_isa isa) {
  if (isa < cpu_isa::avx2) {
    return kernel_unimplemented(
        "reorder", "the generic reorder needs avx2, not " + std::string(to_string(isa)));
  }
  if (auto ok = validate_reorder_problem(p); !ok) return ok.why();
  if (auto ok = validate_reorder_config(specialized); !ok) return ok.why();
  auto plan = plan_walk(p.src, p.dst, reorder_keep_mask(p));
  if (!plan) return plan.why();
  auto code_isa = generic_isa_for(generic_kernel::reorder, isa);
  if (!code_isa) return code_isa.why();
  const int tracked = p.scales == reorder_scales::per_dim ? p.scale_dim : -1;
  // The specialized kernel's chunk (reorder_kernel.cpp) on the walk.
  auto chunk_of = [&](const walk_plan& w) {
    return walk_chunk(w, specialized.chunk, reorder_chunk_unit(w, specialized));
  };
  // The specialized walk's joins (a vector across the short blocks of
  // nChw8c <-> nChw16c) where the generic code's vectors take them; else
  // plan_walk's plan, an item per block.
  walk_plan w = join_runs(plan.value());
  std::int64_t chunk = chunk_of(w);
  auto params = make_generic_walk_params("reorder", w, chunk, tracked,
                                         generic_walk_shape_for(code_isa.value()).lanes);
  if (!params) {
    w = std::move(plan).value();
    chunk = chunk_of(w);
    params = make_generic_walk_params("reorder", w, chunk, tracked);
  }
  if (!params) return params.why();
  const generic_walk_form form =
      w.inner == walk_plan::inner_kind::tile ? generic_walk_form::tile
      : params.value()[gw_runs] != static_cast<std::int64_t>(gw_run_form::none)
          ? generic_walk_form::runs
          : generic_walk_form::stream;
  const std::string symbol =
      reorder_is_raw(p) ? generic_reorder_raw_symbol(size_of(p.src.data_type()), form)
                        : generic_reorder_symbol(p.src.data_type(), p.dst.data_type(), form);
  auto fn = generic_function<generic_walk_function>(generic_kernel::reorder, code_isa.value(),
                                                    symbol.c_str());
  if (!fn) return fn.why();
  std::unique_ptr<generic_reorder_kernel> k(new generic_reorder_kernel());
  k->problem_ = p;
  k->isa_ = code_isa.value();
  k->fn_ = fn.value();
  k->work_items_ = w.work_items(chunk);
  k->params_ = std::move(params).value();
  k->params_[gw_scales] = static_cast<std::int64_t>(p.scales);
  return k;
}

void generic_reorder_kernel::execute(const reorder_args& args, void* /*scratchpad*/,
                                     thread_pool& pool) const {
  run_generic_walk(fn_, params_, args.src, args.dst, args.scales, nullptr, work_items_,
                   problem_.nthr, pool);
}

}  // namespace primcache::cpu_internal
