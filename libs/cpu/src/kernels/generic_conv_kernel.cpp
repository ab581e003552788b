#include "kernels/generic_conv_kernel.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "jit/process_jit.hpp"
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

// The output pixels [begin, end) whose taps all fall inside the image:
// ow * sw - pl >= 0 and ow * sw - pl + (kw - 1) * (dw + 1) <= iw - 1.
range pixels_inside(const conv_geometry& f) {
  const std::int64_t room = f.iw - 1 + f.pl - (f.kw - 1) * (f.dw + 1);
  return {(f.pl + f.sw - 1) / f.sw, room < 0 ? 0 : std::min(room / f.sw + 1, f.ow)};
}

// The tile functions looked up so far, for the life of the process (the
// built-in code is never unloaded): a creation looks up at most 4 x its
// ow_block symbols once per process instead of on every creation. Its lock
// is held across the first lookup's link, and so across fork()
// (process_jit.hpp): a child forked during that link would otherwise wait
// for it forever.
struct tile_cache {
  mutex mu;
  std::map<std::pair<int, std::string>, generic_conv_function*> fns PRIMCACHE_GUARDED_BY(mu);
};

// Made when the library loads (k_tiles_made), before any thread of the
// process can fork: a function-local static's initialization guard, held
// while it allocates, would be held across a fork that caught it waiting
// for the allocator, and the child's first convolution would wait for it
// for ever.
tile_cache& tiles() {
  static tile_cache* cache = [] {
    auto* made = new tile_cache;
    hold_across_fork(jit_fork_lock::generic_conv_tiles, made->mu);
    return made;
  }();
  return *cache;
}

[[maybe_unused]] const bool k_tiles_made = (tiles(), true);

// The tile function `symbol` (generic_conv_symbol or generic_dw_symbol).
result<generic_conv_function*> tile_function(cpu_isa isa, const std::string& symbol) {
  tile_cache* cache = &tiles();
  lock_guard guard(cache->mu);
  auto key = std::make_pair(static_cast<int>(isa), symbol);
  if (auto it = cache->fns.find(key); it != cache->fns.end()) return it->second;
  auto fn = generic_function<generic_conv_function>(generic_kernel::conv, isa, symbol.c_str());
  if (!fn) return fn.why();
  cache->fns.emplace(std::move(key), fn.value());
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
  v[gc_kh] = f.kh;
  v[gc_kw] = f.kw;
  v[gc_icg] = f.icg;
  v[gc_sh] = f.sh;
  v[gc_sw] = f.sw;
  v[gc_pt] = f.pt;
  v[gc_dh1] = f.dh + 1;
  v[gc_dw1] = f.dw + 1;
  v[gc_src_c_stride] = f.src.c_stride;
  v[gc_src_h_stride] = f.src.h_stride;
  v[gc_src_w_stride] = f.src.w_stride;
  v[gc_src_blocked] = f.src.blocked ? 1 : 0;
  v[gc_wei_block_stride] = f.kh * f.kw * f.icg * lanes;
  v[gc_wei_kh_stride] = f.kw * f.icg * lanes;
  v[gc_dst_c_stride] = f.dst.c_stride;
  v[gc_dst_h_stride] = f.dst.h_stride;
  v[gc_dst_w_stride] = f.dst.w_stride;
  v[gc_dst_blocked] = f.dst.blocked ? 1 : 0;
  // The specialized kernel's rule (conv_generator.cpp): a grouped output
  // whose groups split a 16-channel block is stored lane by lane (a
  // depthwise output's blocks are 16 channels of the tensor).
  v[gc_dst_contiguous] = f.dst.vector_contiguous(f.depthwise || f.g == 1 ? lanes : f.ocg) ? 1 : 0;
  v[gc_with_bias] = f.has_bias ? 1 : 0;
  write_generic_post_ops(p.post_ops, v[gc_post_op_count], &v[gc_post_ops]);
  auto pref = preferred_weights_desc(p);
  // conv_kernel's rule: Ohwi16o and Goihw16g are the packed layout itself.
  const bool in_place = pref && (f.depthwise || (f.g == 1 && p.weights.ndims() == 4)) &&
                        pref.value() == p.weights && p.weights.offset0() == 0;
  packs_weights_ = !in_place;
  packed_bytes_ = static_cast<std::size_t>(conv_packed_weight_floats(f)) * sizeof(float);
  chunks_ = div_up(f.nb, tile_.oc_blocks);
  const range inside = pixels_inside(f);
  inside_lo_ = inside.begin;
  inside_hi_ = inside.end;
  // A depthwise item's chunk is of the tensor's channels (one "group").
  work_items_ = f.n * (f.depthwise ? 1 : f.g) * chunks_ * f.oh;
  zeroes_dst_padding_ =
      f.dst.blocked && f.g > 1 && !f.depthwise && f.ocg % lanes != 0 && f.oc % lanes != 0;
}

result<std::unique_ptr<generic_conv_kernel>> generic_conv_kernel::create(
    const conv_problem& p, const conv_config& specialized, cpu_isa isa) {
  auto g = analyze_conv(p);
  if (!g) return g.why();
  if (isa < cpu_isa::avx2 || isa > detected_isa()) {
    return unimplemented("ISA " + std::string(to_string(isa)) +
                         " is below avx2 or beyond this host");
  }
  if (p.post_ops.size() > static_cast<std::size_t>(gc_max_post_ops)) {
    return unimplemented("the generic convolution takes at most " +
                         std::to_string(gc_max_post_ops) + " post-ops, not " +
                         std::to_string(p.post_ops.size()));
  }
  auto code_isa = generic_isa_for(generic_kernel::conv, isa);
  if (!code_isa) return code_isa.why();
  const conv_geometry flat = flatten_conv_pointwise(g.value());
  if (flat.depthwise) return create_depthwise(p, g.value(), flat, specialized, code_isa.value());
  // The masked edge form's table holds up to generic_conv_max_masked_kw
  // taps a pixel; a wider kernel with pixels at the image's edges (a tap
  // in the padding) is left to the specialized kernel.
  const range inside = pixels_inside(flat);
  const bool edges = inside.begin > 0 || inside.end < flat.ow;
  if (generic_conv_masked_edges(code_isa.value()) && flat.kw > generic_conv_max_masked_kw &&
      edges) {
    return unimplemented("a kernel " + std::to_string(flat.kw) +
                         " taps wide with padding: the generic edge tiles take at most " +
                         std::to_string(generic_conv_max_masked_kw));
  }
  const generic_conv_tiles built = generic_conv_tiles_for(code_isa.value());
  // The specialized kernel's tile when it is built in, else the heuristic's
  // for the built-in code's ISA (always built in).
  conv_config tile = effective_conv_config(flat, specialized);
  // K panels over a kernel of several rows sum each output block by block
  // of input channels, each block's kh rows in turn: another sequence than
  // this kernel's (kh, channels, kw), so other bits.
  if (!conv_config_sums_as_generic(flat, tile)) {
    return unimplemented("the specialized configuration's K panels (ic_block " +
                         std::to_string(tile.ic_block) + " of " + std::to_string(flat.icg) +
                         " input channels, a " + std::to_string(flat.kh) +
                         "-row kernel) sum each output in another order");
  }
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
        auto fn = tile_function(code_isa.value(), generic_conv_symbol(w, blocks[b], interior != 0));
        if (!fn) return fn.why();
        tiles[static_cast<std::size_t>(w - 1)][b][interior] = fn.value();
      }
    }
  }
  return std::unique_ptr<generic_conv_kernel>(
      new generic_conv_kernel(p, g.value(), flat, tile, code_isa.value(), std::move(tiles)));
}

result<std::unique_ptr<generic_conv_kernel>> generic_conv_kernel::create_depthwise(
    const conv_problem& p, const conv_geometry& g, const conv_geometry& flat,
    const conv_config& specialized, cpu_isa code_isa) {
  // Every output accumulates in the same order whatever the tile, so the
  // tile is free: the specialized one's blocks (as many as are built in),
  // as wide as the built-in tiles go (the driver runs a row's pixels whose
  // taps are all inside in tiles of that width, the others one by one). The
  // loop order is the specialized one's.
  const generic_dw_tiles built = generic_dw_tiles_for(code_isa);
  conv_config tile = effective_conv_config(flat, specialized);
  tile.oc_blocks = std::min(tile.oc_blocks, built.max_blocks);
  tile.ow_block = static_cast<int>(
      std::min<std::int64_t>({built.max_width, built.budget / tile.oc_blocks, flat.ow}));
  // The source's 16-channel vectors: whole (blocked, whose channel padding
  // may be read as the specialized kernel reads it, or every block full),
  // the last block masked (consecutive plain channels), or lane by lane.
  const std::int64_t chunks = div_up(flat.nb, tile.oc_blocks);
  const bool contiguous = flat.src.vector_contiguous(lanes);
  const bool partial = flat.g % lanes != 0;
  auto load_for = [&](bool last_chunk) {
    if (!contiguous) return generic_dw_load::lanes;
    if (flat.src.blocked && flat.src.w_stride == lanes && flat.sw <= 2) {
      return flat.sw == 1 ? generic_dw_load::blocked_s1 : generic_dw_load::blocked_s2;
    }
    if (flat.src.blocked || !last_chunk || !partial) return generic_dw_load::vector;
    return generic_dw_load::masked;
  };
  const int blocks[2] = {tile.oc_blocks, static_cast<int>(flat.nb - (chunks - 1) * tile.oc_blocks)};
  if (flat.kw == 3 && flat.dw == 0 && (flat.sw == 1 || flat.sw == 2) && flat.src.blocked &&
      flat.src.w_stride == lanes) {
    // A whole row per call: the pixels whose taps are all inside, [a, b),
    // and the edge pixel at either end whose one tap outside is its first
    // (kw 0, padding 1) or its last (kw 2), in n tiles as even as can be
    // (widths w and w - 1, w <= ow_block); the other edge pixels alone.
    std::unique_ptr<generic_conv_kernel> k(
        new generic_conv_kernel(p, g, flat, tile, code_isa, tile_table{}));
    const std::int64_t ow = flat.ow;
    const std::int64_t a = std::clamp<std::int64_t>(k->inside_lo_, 0, ow);
    const std::int64_t b = std::clamp<std::int64_t>(k->inside_hi_, a, ow);
    // Whether pixel o's taps inside the image are exactly [lo, hi).
    auto taps_are = [&](std::int64_t o, std::int64_t lo, std::int64_t hi) {
      const std::int64_t iw0 = o * flat.sw - flat.pl;
      return std::max<std::int64_t>(0, -iw0) == lo &&
             std::min<std::int64_t>(3, flat.iw - iw0) == hi;
    };
    const bool with_lo = a == 1 && taps_are(0, 1, 3);
    const bool with_hi = ow - b == 1 && taps_are(ow - 1, 0, 2);
    const std::int64_t from = with_lo ? 0 : a;
    const std::int64_t count = (with_hi ? ow : b) - from;
    const std::int64_t n = div_up(count, std::int64_t{tile.ow_block});
    const std::int64_t w = n == 0 ? 1 : div_up(count, n);
    std::int64_t wide = count - n * (w - 1), narrow = n - wide, last = 0;
    if (n >= 2) {
      last = narrow > 0 ? w - 1 : w;
      (narrow > 0 ? narrow : wide) -= 1;
    }
    k->tile_.ow_block = static_cast<int>(w);
    k->dw_uniform_chunks_ = blocks[1] == blocks[0] && flat.g % lanes == 0;
    for (int c = 0; c < 2; ++c) {
      auto fn = tile_function(code_isa, generic_dw_row_symbol(static_cast<int>(w), blocks[c],
                                                              static_cast<int>(flat.sw)));
      if (!fn) return fn.why();
      k->dw_rows_[static_cast<std::size_t>(c)] = fn.value();
    }
    const bool first = n >= 1;
    k->dw_split_ = {from,
                    first ? 1 : 0,
                    with_lo ? 1 : 0,
                    with_hi && n == 1 ? 1 : 0,
                    first ? wide - 1 : 0,
                    narrow,
                    last,
                    with_hi && n >= 2 ? 1 : 0,
                    ow};
    return k;
  }
  tile_table tiles(static_cast<std::size_t>(tile.ow_block));
  for (int w = 1; w <= tile.ow_block; ++w) {
    for (int b = 0; b < 2; ++b) {
      // The full-chunk entry of a problem with one chunk is never called.
      const bool last = b == 1 || chunks == 1;
      auto fn = tile_function(code_isa, generic_dw_symbol(w, blocks[b], load_for(last)));
      if (!fn) return fn.why();
      // One form (no edge tiles): both entries.
      tiles[static_cast<std::size_t>(w - 1)][b] = {fn.value(), fn.value()};
    }
  }
  return std::unique_ptr<generic_conv_kernel>(
      new generic_conv_kernel(p, g, flat, tile, code_isa, std::move(tiles)));
}

void generic_conv_kernel::write_packing_key(key_writer& w) const {
  // conv_kernel's: the packed layout is the same.
  w.str("conv_packing").i64(problem_.groups);
  problem_.weights.write_key(w);
}

void generic_conv_kernel::pack_weights(const float* user, float* packed, thread_pool& pool) const {
  conv_pack_weights(geometry_, problem_.weights, problem_.nthr, user, packed, pool);
}

void generic_conv_kernel::run_items(const float* src, const float* wei, const float* bias,
                                    float* dst, const float* const* binary, std::int64_t begin,
                                    std::int64_t end) const {
  const conv_geometry& f = flat_;
  const int owb = tile_.ow_block;
  const std::int64_t dk = f.dh + 1;
  // The masked edge form runs a whole row tile that holds edge pixels.
  const bool masked_edges = generic_conv_masked_edges(isa_);
  std::int64_t t[gt_count] = {};
  // Depthwise: one "group", the chunks over the tensor's channels.
  const std::int64_t groups = f.depthwise ? 1 : f.g;
  // The item's indices, innermost first (the loop order's), found by
  // division for the first item and counted on from there: run-time
  // divisions per item cost as much as a small depthwise row.
  const bool oc_outer = tile_.order == conv_loop_order::oc_outer;
  const std::int64_t extent[3] = {oc_outer ? f.oh : chunks_, oc_outer ? chunks_ : groups,
                                  oc_outer ? groups : f.oh};
  std::int64_t idx[3];
  std::int64_t n = begin;
  for (int d = 0; d < 3; ++d) {
    idx[d] = n % extent[d];
    n /= extent[d];
  }
  for (std::int64_t item = begin; item < end; ++item) {
    if (item != begin) {
      for (int d = 0; d < 3 && ++idx[d] == extent[d]; ++d) {
        idx[d] = 0;
        if (d == 2) ++n;
      }
    }
    const std::int64_t oh = oc_outer ? idx[0] : idx[2];
    const std::int64_t occ = oc_outer ? idx[1] : idx[0];
    const std::int64_t grp = oc_outer ? idx[2] : idx[1];
    // Rows of kh inside the image, as the specialized code computes them.
    const std::int64_t ih0 = oh * f.sh - f.pt;
    const std::int64_t kh_lo = ih0 < 0 ? (-ih0 + dk - 1) / dk : 0;
    const std::int64_t room = f.ih - 1 - ih0;
    // (room / dk + 1 without the division where the rows fit.)
    const std::int64_t kh_hi = room < 0                  ? 0
                               : room >= (f.kh - 1) * dk ? f.kh
                                                         : std::min(room / dk + 1, f.kh);
    const std::int64_t first_block = occ * tile_.oc_blocks;
    const bool last_chunk = occ == chunks_ - 1;
    t[gt_ih0] = ih0;
    t[gt_kh_lo] = kh_lo;
    t[gt_kh_hi] = kh_hi;
    t[gt_c_in0] = grp * f.icg;
    t[gt_c_first] = grp * f.ocg + first_block * lanes;
    t[gt_last_lanes] = last_chunk ? (f.depthwise ? f.g : f.ocg) - (f.nb - 1) * lanes : lanes;
    t[gt_dst_row_off] = f.dst.off0 + n * f.dst.n_stride + oh * f.dst.h_stride;
    const float* src_img = src + f.src.off0 + n * f.src.n_stride;
    const float* wei_chunk = wei + (grp * f.nb + first_block) * f.kh * f.kw * f.icg * lanes;
    if (f.depthwise) {
      run_depthwise_row(t, src_img, wei_chunk, bias, dst, binary, last_chunk);
      continue;
    }
    // Each tile of the row as its pixels whose taps are all inside (one
    // interior call) and the pixels left and right of them (edge calls):
    // only the pixels at the image's edges pay the edge form's checks
    // (avx2); in the masked form (avx512_core) a tile with edge pixels
    // runs whole as one edge call.
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
      if (masked_edges && (a != ow0 || b != end)) {
        // The masked edge form runs the whole tile: split, its edge
        // pixels would run as 1-pixel tiles, each a chain of `blocks`
        // dependent multiply-adds (a third of the FMA throughput).
        call(ow0, end, false);
        continue;
      }
      call(ow0, a, false);
      call(a, b, true);
      call(b, end, false);
    }
  }
}

void generic_conv_kernel::run_depthwise_rows(const float* src, const float* wei, const float* bias,
                                             float* dst, const float* const* binary,
                                             std::int64_t begin, std::int64_t end) const {
  const conv_geometry& f = flat_;
  std::int64_t t[gt_count] = {};
  t[gt_iw0] = -f.pl;
  std::copy(dw_split_.begin(), dw_split_.end(), t + gt_dw_left);
  // Items ((n * chunks) + chunk) * oh + row, rows innermost: the first
  // item's indices by division, the others counted.
  std::int64_t row = begin % f.oh;
  std::int64_t occ = (begin / f.oh) % chunks_;
  std::int64_t n = begin / f.oh / chunks_;
  const std::int64_t chunk_floats = std::int64_t{tile_.oc_blocks} * f.kh * f.kw * lanes;
  // Chunks that run the full chunk's function with 16 valid lanes: every
  // chunk when the last is like the others, else all but the last.
  const std::int64_t plain_chunks = dw_uniform_chunks_ ? chunks_ : chunks_ - 1;
  for (std::int64_t item = begin; item < end;) {
    std::int64_t rows = std::min(f.oh - row, end - item);
    std::int64_t chunks = 1;
    if (row == 0 && rows == f.oh && occ < plain_chunks) {
      // Whole chunks of this image, as many as the range holds.
      chunks = std::min(plain_chunks - occ, (end - item) / f.oh);
    }
    const bool last_chunk = occ + chunks == chunks_ && !dw_uniform_chunks_;
    t[gt_c_first] = occ * tile_.oc_blocks * lanes;
    t[gt_last_lanes] = last_chunk ? f.g - (f.nb - 1) * lanes : lanes;
    t[gt_dst_row_off] = f.dst.off0 + n * f.dst.n_stride;
    t[gt_dw_chunks] = chunks;
    t[gt_dw_oh0] = row;
    t[gt_dw_rows] = rows;
    dw_rows_[last_chunk ? 1 : 0](params_.data(), src + f.src.off0 + n * f.src.n_stride,
                                 wei + occ * chunk_floats, bias, dst, binary, t);
    item += rows * chunks;
    row += rows;
    if (row == f.oh) {
      row = 0;
      occ += chunks;
      if (occ == chunks_) {
        occ = 0;
        ++n;
      }
    }
  }
}

void generic_conv_kernel::run_depthwise_row(std::int64_t* t, const float* src_img,
                                            const float* wei_chunk, const float* bias, float* dst,
                                            const float* const* binary, bool last_chunk) const {
  const conv_geometry& f = flat_;
  auto call = [&](std::int64_t ow0, std::int64_t width) {
    t[gt_iw0] = ow0 * f.sw - f.pl;
    t[gt_ow0] = ow0;
    tiles_[static_cast<std::size_t>(width - 1)][last_chunk ? 1 : 0][1](
        params_.data(), src_img, wei_chunk, bias, dst, binary, t);
  };
  // A pixel with taps in the padding, alone, over the kw range inside the
  // image (the taps the specialized kernel keeps): empty when none is.
  const std::int64_t dk = f.dw + 1;
  auto edge = [&](std::int64_t ow) {
    const std::int64_t iw0 = ow * f.sw - f.pl;
    const std::int64_t room = f.iw - 1 - iw0;
    std::int64_t lo = 0, hi = 0;
    if (dk == 1) {  // (no division: the common case)
      lo = iw0 < 0 ? -iw0 : 0;
      hi = room < 0 ? 0 : std::min(room + 1, f.kw);
    } else {
      lo = iw0 < 0 ? (-iw0 + dk - 1) / dk : 0;
      hi = room < 0 ? 0 : std::min(room / dk + 1, f.kw);
    }
    t[gt_kw_lo] = lo;
    t[gt_kw_hi] = std::max(lo, hi);
    call(ow, 1);
  };
  const std::int64_t a = std::clamp<std::int64_t>(inside_lo_, 0, f.ow);
  const std::int64_t b = std::clamp<std::int64_t>(inside_hi_, a, f.ow);
  for (std::int64_t ow = 0; ow < a; ++ow) edge(ow);
  t[gt_kw_lo] = 0;
  t[gt_kw_hi] = f.kw;
  for (std::int64_t ow0 = a; ow0 < b; ow0 += tile_.ow_block) {
    call(ow0, std::min<std::int64_t>(tile_.ow_block, b - ow0));
  }
  for (std::int64_t ow = b; ow < f.ow; ++ow) edge(ow);
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
    if (r.begin >= r.end) return;
    if (dw_rows_[0] != nullptr) {
      run_depthwise_rows(src, wei, bias, dst, args.binary_operands, r.begin, r.end);
    } else {
      run_items(src, wei, bias, dst, args.binary_operands, r.begin, r.end);
    }
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
