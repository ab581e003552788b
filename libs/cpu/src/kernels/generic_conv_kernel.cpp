#include "kernels/generic_conv_kernel.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/conv_config.hpp"
#include "kernels/conv_validation.hpp"
#include "kernels/integer_math.hpp"
#include "kernels/kernel_failure.hpp"
#include "primcache/base/thread_annotations.hpp"
#include "tiered/generic_code.hpp"

namespace primcache::cpu_internal {
namespace {

constexpr int lanes = conv_lanes;

failure unimplemented(const std::string& message) {
  return kernel_unimplemented("generic convolution", message);
}

// The tile functions looked up so far, for the life of the process (the
// built-in code is never unloaded): a creation looks up at most 4 x its
// ow_block symbols once per process instead of on every creation.
struct tile_cache {
  mutex mu;
  std::map<std::tuple<int, int, int, bool>, generic_conv_function*> fns PRIMCACHE_GUARDED_BY(mu);
};

result<generic_conv_function*> tile_function(cpu_isa isa, int width, int blocks, bool interior) {
  static tile_cache* cache = new tile_cache;
  lock_guard guard(cache->mu);
  const auto key = std::make_tuple(static_cast<int>(isa), width, blocks, interior);
  if (auto it = cache->fns.find(key); it != cache->fns.end()) return it->second;
  const std::string symbol = generic_conv_symbol(width, blocks, interior);
  auto fn = generic_function<generic_conv_function>(generic_kernel::conv, isa, symbol.c_str());
  if (!fn) return fn.why();
  cache->fns.emplace(key, fn.value());
  return fn.value();
}

}  // namespace

generic_conv_kernel::generic_conv_kernel(const conv_problem& p, const conv_geometry& g,
                                         const conv_geometry& flat, const conv_config& tile,
                                         cpu_isa isa, tile_table tiles)
    : problem_(p), geometry_(g), flat_(flat), tile_(tile), isa_(isa), tiles_(std::move(tiles)) {
  const conv_geometry& f = flat_;
  auto& v = params_;
  v[gc_ih] = f.ih;
  v[gc_iw] = f.iw;
  v[gc_kw] = f.kw;
  v[gc_icg] = f.icg;
  v[gc_sw] = f.sw;
  v[gc_dh1] = f.dh + 1;
  v[gc_dw1] = f.dw + 1;
  v[gc_src_c_stride] = f.src.c_stride;
  v[gc_src_h_stride] = f.src.h_stride;
  v[gc_src_w_stride] = f.src.w_stride;
  v[gc_src_blocked] = f.src.blocked ? 1 : 0;
  v[gc_wei_block_stride] = f.kh * f.kw * f.icg * lanes;
  v[gc_wei_kh_stride] = f.kw * f.icg * lanes;
  v[gc_dst_c_stride] = f.dst.c_stride;
  v[gc_dst_w_stride] = f.dst.w_stride;
  v[gc_dst_blocked] = f.dst.blocked ? 1 : 0;
  // The specialized kernel's rule (conv_generator.cpp): a grouped output
  // whose groups split a 16-channel block is stored lane by lane.
  v[gc_dst_contiguous] = f.dst.vector_contiguous(f.g == 1 ? lanes : f.ocg) ? 1 : 0;
  v[gc_with_bias] = f.has_bias ? 1 : 0;
  write_generic_post_ops(p.post_ops, v[gc_post_op_count], &v[gc_post_ops]);
  auto pref = preferred_weights_desc(p);
  const bool in_place = pref && f.g == 1 && p.weights.ndims() == 4 && pref.value() == p.weights &&
                        p.weights.offset0() == 0;
  packs_weights_ = !in_place;
  packed_bytes_ = static_cast<std::size_t>(conv_packed_weight_floats(f)) * sizeof(float);
  chunks_ = div_up(f.nb, tile_.oc_blocks);
  // Output pixels whose taps all fall inside the image: ow * sw - pl >= 0
  // and ow * sw - pl + (kw - 1) * (dw + 1) <= iw - 1.
  inside_lo_ = (f.pl + f.sw - 1) / f.sw;
  const std::int64_t room = f.iw - 1 + f.pl - (f.kw - 1) * (f.dw + 1);
  inside_hi_ = room < 0 ? 0 : std::min(room / f.sw + 1, f.ow);
  work_items_ = f.n * f.g * chunks_ * f.oh;
  zeroes_dst_padding_ = f.dst.blocked && f.g > 1 && f.ocg % lanes != 0 && f.oc % lanes != 0;
}

result<std::unique_ptr<generic_conv_kernel>> generic_conv_kernel::create(
    const conv_problem& p, const conv_config& specialized, cpu_isa isa) {
  auto g = analyze_conv(p);
  if (!g) return g.why();
  if (isa < cpu_isa::avx2 || isa > detected_isa()) {
    return unimplemented("ISA " + std::string(to_string(isa)) +
                         " is below avx2 or beyond this host");
  }
  if (g.value().depthwise) {
    return unimplemented("a depthwise convolution has no generic kernel");
  }
  if (p.post_ops.size() > static_cast<std::size_t>(gc_max_post_ops)) {
    return unimplemented("the generic convolution takes at most " +
                         std::to_string(gc_max_post_ops) + " post-ops, not " +
                         std::to_string(p.post_ops.size()));
  }
  auto code_isa = generic_isa_for(generic_kernel::conv, isa);
  if (!code_isa) return code_isa.why();
  const generic_conv_tiles built = generic_conv_tiles_for(code_isa.value());
  const conv_geometry flat = flatten_conv_pointwise(g.value());
  // The specialized kernel's tile when it is built in, else the heuristic's
  // for the built-in code's ISA (always built in).
  conv_config tile = effective_conv_config(flat, specialized);
  if (!built.has(tile.ow_block, tile.oc_blocks)) {
    const conv_loop_order order = tile.order;
    tile = default_conv_config(p, code_isa.value());
    tile.order = order;
    if (!built.has(tile.ow_block, tile.oc_blocks)) {
      return unimplemented("no built-in tile for " + std::to_string(tile.ow_block) + "x" +
                           std::to_string(tile.oc_blocks));
    }
  }
  const std::int64_t chunks = div_up(flat.nb, tile.oc_blocks);
  const int blocks[2] = {tile.oc_blocks, static_cast<int>(flat.nb - (chunks - 1) * tile.oc_blocks)};
  tile_table tiles(static_cast<std::size_t>(tile.ow_block));
  for (int w = 1; w <= tile.ow_block; ++w) {
    for (int b = 0; b < 2; ++b) {
      for (int interior = 0; interior < 2; ++interior) {
        auto fn = tile_function(code_isa.value(), w, blocks[b], interior != 0);
        if (!fn) return fn.why();
        tiles[static_cast<std::size_t>(w - 1)][b][interior] = fn.value();
      }
    }
  }
  return std::unique_ptr<generic_conv_kernel>(
      new generic_conv_kernel(p, g.value(), flat, tile, code_isa.value(), std::move(tiles)));
}

void generic_conv_kernel::write_packing_key(key_writer& w) const {
  // conv_kernel's: the packed layout is the same.
  w.str("conv_packing").i64(problem_.groups);
  problem_.weights.write_key(w);
}

void generic_conv_kernel::pack_weights(const float* user, float* packed, thread_pool& pool) const {
  // conv_kernel::pack_weights for groups of any size but depthwise (which
  // has no generic kernel): Ohwi16o per group, output channels past the
  // group's as zeros.
  const conv_geometry& g = geometry_;
  const memory_desc& md = problem_.weights;
  const bool five = md.ndims() == 5;
  auto user_at = [&](std::int64_t grp, std::int64_t o, std::int64_t i, std::int64_t h,
                     std::int64_t w) {
    const std::int64_t idx5[5] = {grp, o, i, h, w};
    return user[conv_md_offset(md, five ? idx5 : idx5 + 1)];
  };
  const std::int64_t outer = g.g * g.nb;
  pool.parallel_for(problem_.nthr, [&](int ithr, int nthr) {
    const range r = balance(outer, ithr, nthr);
    for (std::int64_t blk = r.begin; blk < r.end; ++blk) {
      const std::int64_t grp = blk / g.nb;
      const std::int64_t ob = blk % g.nb;
      float* out = packed + blk * g.kh * g.kw * g.icg * lanes;
      for (std::int64_t h = 0; h < g.kh; ++h)
        for (std::int64_t w = 0; w < g.kw; ++w)
          for (std::int64_t i = 0; i < g.icg; ++i)
            for (int l = 0; l < lanes; ++l) {
              const std::int64_t o = ob * lanes + l;
              *out++ = o < g.ocg ? user_at(grp, o, i, h, w) : 0.f;
            }
    }
  });
}

void generic_conv_kernel::run_items(const float* src, const float* wei, const float* bias,
                                    float* dst, const float* const* binary, std::int64_t begin,
                                    std::int64_t end) const {
  const conv_geometry& f = flat_;
  const int owb = tile_.ow_block;
  const std::int64_t dk = f.dh + 1;
  std::int64_t t[gt_count];
  for (std::int64_t item = begin; item < end; ++item) {
    std::int64_t rest = item;
    auto take = [&](std::int64_t extent) {
      const std::int64_t x = rest % extent;
      rest /= extent;
      return x;
    };
    std::int64_t oh, occ, grp;
    if (tile_.order == conv_loop_order::oc_outer) {
      oh = take(f.oh);
      occ = take(chunks_);
      grp = take(f.g);
    } else {
      occ = take(chunks_);
      grp = take(f.g);
      oh = take(f.oh);
    }
    const std::int64_t n = rest;
    // Rows of kh inside the image, as the specialized code computes them.
    const std::int64_t ih0 = oh * f.sh - f.pt;
    const std::int64_t kh_lo = ih0 < 0 ? (-ih0 + dk - 1) / dk : 0;
    const std::int64_t room = f.ih - 1 - ih0;
    const std::int64_t kh_hi = room < 0 ? 0 : std::min(room / dk + 1, f.kh);
    const std::int64_t first_block = occ * tile_.oc_blocks;
    const bool last_chunk = occ == chunks_ - 1;
    t[gt_ih0] = ih0;
    t[gt_kh_lo] = kh_lo;
    t[gt_kh_hi] = kh_hi;
    t[gt_c_in0] = grp * f.icg;
    t[gt_c_first] = grp * f.ocg + first_block * lanes;
    t[gt_last_lanes] = last_chunk ? f.ocg - (f.nb - 1) * lanes : lanes;
    t[gt_dst_row_off] = f.dst.off0 + n * f.dst.n_stride + oh * f.dst.h_stride;
    const float* src_img = src + f.src.off0 + n * f.src.n_stride;
    const float* wei_chunk = wei + (grp * f.nb + first_block) * f.kh * f.kw * f.icg * lanes;
    // Each tile of the row as its pixels whose taps are all inside (one
    // interior call) and the pixels left and right of them (edge calls):
    // only the pixels at the image's edges pay the edge form's selects.
    auto call = [&](std::int64_t from, std::int64_t to, bool interior) {
      if (to <= from) return;
      t[gt_iw0] = from * f.sw - f.pl;
      t[gt_ow0] = from;
      tiles_[static_cast<std::size_t>(to - from - 1)][last_chunk ? 1 : 0][interior ? 1 : 0](
          params_.data(), src_img, wei_chunk, bias, dst, binary, t);
    };
    for (std::int64_t ow0 = 0; ow0 < f.ow; ow0 += owb) {
      const std::int64_t end = std::min<std::int64_t>(ow0 + owb, f.ow);
      const std::int64_t a = std::clamp(inside_lo_, ow0, end);
      const std::int64_t b = std::clamp(inside_hi_, a, end);
      call(ow0, a, false);
      call(a, b, true);
      call(b, end, false);
    }
  }
}

void generic_conv_kernel::execute(const conv_args& args, void* scratchpad,
                                  thread_pool& pool) const {
  const auto* wei = static_cast<const float*>(args.weights);
  if (args.packed_weights != nullptr) {
    wei = args.packed_weights;
  } else if (packs_weights_) {
    auto* packed = static_cast<float*>(scratchpad);
    pack_weights(wei, packed, pool);
    wei = packed;
  }
  const auto* src = static_cast<const float*>(args.src);
  const auto* bias = static_cast<const float*>(args.bias);
  auto* dst = static_cast<float*>(args.dst);
  pool.parallel_for(problem_.nthr, [&](int ithr, int nthr) {
    const range r = balance(work_items_, ithr, nthr);
    if (r.begin < r.end) run_items(src, wei, bias, dst, args.binary_operands, r.begin, r.end);
  });
  if (zeroes_dst_padding_) zero_dst_padding(dst);
}

void generic_conv_kernel::zero_dst_padding(float* dst) const {
  // conv_kernel's: nChw16c, the lanes past OC in the last block.
  const memory_desc& d = problem_.dst;
  const auto dims = d.dims();
  const auto s = d.strides();
  const std::int64_t valid = dims[1] % lanes;
  float* last_block = dst + d.offset0() + (dims[1] / lanes) * s[1] + valid;
  for (std::int64_t n = 0; n < dims[0]; ++n)
    for (std::int64_t h = 0; h < dims[2]; ++h)
      for (std::int64_t w = 0; w < dims[3]; ++w)
        std::fill_n(last_block + n * s[0] + h * s[2] + w * s[3], lanes - valid, 0.f);
}

}  // namespace primcache::cpu_internal
