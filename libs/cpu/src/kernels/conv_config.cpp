#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/conv_config.hpp"
#include "kernels/conv_geometry.hpp"
#include "kernels/conv_validation.hpp"
#include "kernels/integer_math.hpp"

namespace primcache::cpu_internal {
namespace {

constexpr int lanes = conv_lanes;

void write_md(key_writer& w, const memory_desc& md) {
  md.write_key(w);
}

}  // namespace

// A 1x1, stride-1, unpadded convolution over rows stored back to back is the
// same computation over longer rows: the kernel then runs rows of `row`
// pixels (a divisor of H * W), which fills register tiles better than short
// image rows.
conv_geometry flatten_conv_pointwise(conv_geometry g) {
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 &&
                         g.pl == 0 && g.oh == g.ih && g.ow == g.iw;
  if (!pointwise) return g;
  if (g.src.h_stride != g.iw * g.src.w_stride || g.dst.h_stride != g.ow * g.dst.w_stride) return g;
  const std::int64_t hw = g.oh * g.ow;
  std::int64_t row = g.ow;
  for (std::int64_t d = std::min<std::int64_t>(hw, 256); d > g.ow; --d) {
    if (hw % d == 0) {
      row = d;
      break;
    }
  }
  if (row == g.ow) return g;
  g.ih = g.oh = hw / row;
  g.iw = g.ow = row;
  g.src.h_stride = row * g.src.w_stride;
  g.dst.h_stride = row * g.dst.w_stride;
  return g;
}

// The config the generator really uses: blocks no larger than the problem.
conv_config effective_conv_config(const conv_geometry& g, conv_config c) {
  c.ow_block = static_cast<int>(std::min<std::int64_t>(c.ow_block, g.ow));
  c.oc_blocks = static_cast<int>(std::min<std::int64_t>(c.oc_blocks, g.nb));
  if (g.depthwise) c.ic_unroll = 1;
  // With one row, or one channel chunk per image, both orders enumerate the
  // same items.
  if (g.oh == 1 || (g.depthwise ? 1 : g.g) * div_up(g.nb, c.oc_blocks) == 1) {
    c.order = conv_loop_order::oc_outer;
  }
  c.ic_unroll =
      static_cast<int>(std::min<std::int64_t>(c.ic_unroll, std::max<std::int64_t>(g.icg, 1)));
  // One pass over every input channel: no K panel.
  if (g.depthwise || c.ic_block >= g.icg) c.ic_block = 0;
  // One thread: one part.
  if (g.nthr <= 1) c.thr_oc = 0;
  // Panels of a spatial_outer walk, at most as many chunks as a part has;
  // panels of one chunk walk as oc_outer does.
  const std::int64_t chunks = (g.depthwise ? 1 : g.g) * div_up(g.nb, c.oc_blocks);
  const std::int64_t part = c.thr_oc > 0 ? div_up(chunks, std::int64_t{c.thr_oc}) : chunks;
  if (c.order == conv_loop_order::oc_outer || c.oc_panel >= part) {
    c.oc_panel = 0;
  } else if (c.oc_panel == 1) {
    c.order = conv_loop_order::oc_outer;
    c.oc_panel = 0;
  }
  return c;
}

bool conv_config_walks(const conv_config& ec) noexcept {
  return ec.oc_panel != 0 || ec.thr_oc != 0;
}

bool conv_config_sums_as_generic(const conv_geometry& g, const conv_config& ec) noexcept {
  return ec.ic_block == 0 || g.kh == 1;
}

void conv_problem::write_key(key_writer& w) const {
  w.str("conv_fwd");
  write_md(w, src);
  write_md(w, weights);
  write_md(w, bias);
  write_md(w, dst);
  w.i64(stride_h).i64(stride_w).i64(dilation_h).i64(dilation_w);
  w.i64(pad_t).i64(pad_l).i64(pad_b).i64(pad_r).i64(groups);
  cpu_internal::write_key(w, post_ops);
  w.i32(nthr);
}

void conv_config::write_key(key_writer& w) const {
  w.i32(ow_block).i32(oc_blocks).i32(ic_unroll).enumeration(order);
  w.i32(ic_block).i32(oc_panel).i32(thr_oc);
}

result<memory_desc> preferred_weights_desc(const conv_problem& p) {
  auto g = analyze_conv(p);
  if (!g) return g.why();
  const conv_geometry& ge = g.value();
  if (ge.depthwise) {
    return memory_desc::make({ge.g, 1, 1, ge.kh, ge.kw}, data_type::f32, format_tag::Goihw16g);
  }
  if (ge.g == 1 && p.weights.ndims() == 4) {
    return memory_desc::make({ge.oc, ge.ic, ge.kh, ge.kw}, data_type::f32, format_tag::Ohwi16o);
  }
  return memory_desc::make(p.weights.dims(), data_type::f32,
                           p.weights.ndims() == 5 ? format_tag::goihw : format_tag::oihw);
}

conv_config default_conv_config(const conv_problem& p, cpu_isa isa) {
  conv_config c;
  auto ga = analyze_conv(p);
  if (!ga) return c;
  const conv_geometry g = flatten_conv_pointwise(ga.value());
  const bool wide = isa >= cpu_isa::avx512_core;
  // Accumulator budget in 16-float vectors: 24 of 32 zmm (measured: 28
  // makes the code generator spill in the 3x3 bodies), or 6 (12 of 16 ymm)
  // at avx2, leaving registers for weights and broadcasts.
  const int budget = wide ? 24 : 6;
  // A depthwise tile's blocks share no load (each block has its own source
  // and weights), so a second block adds only independent sums: where the
  // rows are long (28 pixels or more) one block with a longer row tile is
  // as fast or faster, at avx512_core and avx2 (and its code is half as
  // long to compile); on rows of 7 pixels the second block was 5% faster at
  // 2 threads (dw_3x3_512_7), and on rows of 14 one block gained nothing
  // (dw_object_ab, docs/PERFORMANCE.md, "one block per tile").
  const int max_blocks = g.depthwise ? (g.ow >= 28 ? 1 : 2) : (wide ? 4 : 2);
  double best = -1;
  for (int ocb = 1; ocb <= std::min<std::int64_t>(max_blocks, g.nb); ++ocb) {
    const int owb_max = static_cast<int>(std::min<std::int64_t>(budget / ocb, g.ow));
    for (int owb = 1; owb <= owb_max; ++owb) {
      // Useful work over work done (tiles past the row end or the channel
      // count compute nothing), times loads amortized per FMA.
      const double row_use =
          static_cast<double>(g.ow) / static_cast<double>(div_up(g.ow, owb) * owb);
      const double oc_use =
          static_cast<double>(g.nb) / static_cast<double>(div_up(g.nb, ocb) * ocb);
      const double intensity = static_cast<double>(owb * ocb) / static_cast<double>(owb + ocb);
      // Two FMAs per load run at full speed (a 4x4 tile as fast as 6x4 on
      // bench_conv's 3x3 and 1x1 layers; issue 11, fifth pass,
      // docs/PERFORMANCE.md), and a tile that divides the row needs one
      // tile body, not two (half the code to compile).
      const double score = row_use * oc_use * std::min(1.0, intensity / 2.0) + 1e-3 * owb * ocb;
      if (score > best) {
        best = score;
        c.ow_block = owb;
        c.oc_blocks = ocb;
      }
    }
  }
  // One input channel per reduction-loop iteration (a 3x3 body of
  // 3 taps x ow_block x oc_blocks FMAs, a quarter of the code to compile)
  // where that runs as fast as 4: at stride 1. A strided layer keeps 4
  // (bench_conv's 3x3 stride-2 layer ran at 0.75x with 1 in three processes
  // of four; 2 was slower than both on the 3x3 stride-1 layers: issue 11,
  // fourth pass, docs/PERFORMANCE.md).
  const bool strided = g.sh != 1 || g.sw != 1;
  c.ic_unroll = g.depthwise || !strided ? 1 : (g.icg >= 4 ? 4 : 1);
  // Weights of all chunks larger than an input row set: keep weights hot.
  const std::int64_t weight_bytes = g.g * g.nb * lanes * g.icg * g.kh * g.kw * 4;
  const std::int64_t row_bytes = g.ic * g.iw * g.kh * 4;
  c.order =
      weight_bytes > 2 * row_bytes ? conv_loop_order::oc_outer : conv_loop_order::spatial_outer;
  if (g.n * g.g * div_up(g.nb, c.oc_blocks) < p.nthr) c.order = conv_loop_order::oc_outer;
  // Depthwise: a chunk's items walk one channel block's planes, which
  // spatial_outer would leave for every other chunk's at each row; its
  // weights are a few KiB and stay hot either way. oc_outer ran 1-21%
  // faster than spatial_outer on the layers the weight rule above sent
  // there (dw_3x3_32_112, dw_3x3s2_64_112 at one block per tile; 1 and 2
  // threads, docs/PERFORMANCE.md, "one block per tile").
  if (g.depthwise) c.order = conv_loop_order::oc_outer;
  return effective_conv_config(g, c);
}

std::vector<conv_config> conv_config_variants(const conv_problem& p, cpu_isa isa) {
  const conv_config def = default_conv_config(p, isa);
  std::vector<conv_config> out;
  auto ga = analyze_conv(p);
  if (!ga) return out;
  const conv_geometry g = flatten_conv_pointwise(ga.value());
  auto add = [&](conv_config c) {
    if (check_conv_config(c) && c == effective_conv_config(g, c) && !(c == def) &&
        std::find(out.begin(), out.end(), c) == out.end()) {
      out.push_back(c);
    }
  };
  const conv_loop_order other = def.order == conv_loop_order::oc_outer
                                    ? conv_loop_order::spatial_outer
                                    : conv_loop_order::oc_outer;
  conv_config c = def;
  c.order = other;
  add(c);
  for (int owb : {1, 2, 3, 4, 6, 7, 8, 14}) {
    c = def;
    c.ow_block = owb;
    add(c);
  }
  for (int ocb : {1, 2, 3, 4}) {
    c = def;
    c.oc_blocks = ocb;
    c.ow_block = std::max(1, std::min(def.ow_block, 28 / ocb));
    add(c);
  }
  for (int u : {1, 2, 4, 8, 16}) {
    c = def;
    c.ic_unroll = u;
    add(c);
  }
  // K panels: two passes, and three or more (a last pass with fewer
  // channels where the unroll allows it).
  if (!g.depthwise) {
    for (std::int64_t passes : {2, 3}) {
      c = def;
      c.ic_block = static_cast<int>(round_up(div_up(g.icg, passes), std::int64_t{def.ic_unroll}));
      add(c);
    }
  }
  // An N panel of two chunks.
  c = def;
  c.order = conv_loop_order::spatial_outer;
  c.oc_panel = 2;
  add(c);
  // The thread partitions: over rows, over output-channel chunks.
  const std::int64_t chunks = (g.depthwise ? 1 : g.g) * div_up(g.nb, def.oc_blocks);
  for (int t : {1, p.nthr}) {
    if (p.nthr > 1 && t <= chunks) {
      c = def;
      c.thr_oc = t;
      add(c);
    }
  }
  return out;
}

int conv_accumulator_budget(cpu_isa isa) {
  return isa >= cpu_isa::avx512_core ? 28 : 6;
}

backend::kernel_config to_fields(const conv_config& c) {
  backend::kernel_config f;
  f.add("ow_block", c.ow_block).add("oc_blocks", c.oc_blocks).add("ic_unroll", c.ic_unroll);
  f.add("order", static_cast<std::int64_t>(c.order));
  f.add("ic_block", c.ic_block).add("oc_panel", c.oc_panel).add("thr_oc", c.thr_oc);
  return f;
}

result<conv_config> conv_config_from_fields(const backend::kernel_config& f) {
  auto r = field_reader::open(
      f, "convolution",
      {"ow_block", "oc_blocks", "ic_unroll", "order", "ic_block", "oc_panel", "thr_oc"});
  if (!r) return r.why();
  const field_reader& in = r.value();
  conv_config c;
  int order = 0;
  for (auto ok :
       {in.get("ow_block", 1, 64, c.ow_block), in.get("oc_blocks", 1, 16, c.oc_blocks),
        in.get("ic_unroll", 1, 16, c.ic_unroll), in.get("order", 0, 1, order),
        in.get("ic_block", 0, 1 << 24, c.ic_block), in.get("oc_panel", 0, 1 << 24, c.oc_panel),
        in.get("thr_oc", 0, 1 << 16, c.thr_oc)}) {
    if (!ok) return ok.why();
  }
  c.order = static_cast<conv_loop_order>(order);
  if (auto ok = check_conv_config(c); !ok) return ok.why();
  return c;
}

result<bool> validate_conv_config_for(const conv_problem& p, const conv_config& c, cpu_isa isa) {
  auto g = analyze_conv(p);
  if (!g) return g.why();
  if (auto ok = check_conv_config(c); !ok) return ok;
  if (isa < cpu_isa::avx2 || isa > detected_isa()) {
    return failure{status::unimplemented, "convolution: ISA " + std::string(to_string(isa)) +
                                              " is below avx2 or beyond this host"};
  }
  const conv_geometry flat = flatten_conv_pointwise(g.value());
  const conv_config ec = effective_conv_config(flat, c);
  if (ec.ow_block * ec.oc_blocks > conv_accumulator_budget(isa)) {
    return failure{status::invalid_arguments,
                   "convolution: register tile " + std::to_string(ec.ow_block) + "x" +
                       std::to_string(ec.oc_blocks) + " needs more than the " +
                       std::to_string(conv_accumulator_budget(isa)) + " accumulators of " +
                       std::string(to_string(isa))};
  }
  if (ec.thr_oc > 0) {
    const std::int64_t chunks = (flat.depthwise ? 1 : flat.g) * div_up(flat.nb, ec.oc_blocks);
    if (p.nthr % ec.thr_oc != 0) {
      return failure{status::invalid_arguments, "convolution: thr_oc " + std::to_string(ec.thr_oc) +
                                                    " does not divide the " +
                                                    std::to_string(p.nthr) + " threads"};
    }
    if (ec.thr_oc > chunks) {
      return failure{status::invalid_arguments, "convolution: thr_oc " + std::to_string(ec.thr_oc) +
                                                    " exceeds the " + std::to_string(chunks) +
                                                    " output-channel chunks of " +
                                                    std::to_string(ec.oc_blocks) + " blocks"};
    }
  }
  return true;
}

namespace {

// The cache blockings and thread partitions a candidate space pairs with
// the register tile, unroll and loop order of `base` (effective, new
// fields 0), each in the form the generator uses: K panels of 16, 64 and
// 256 input channels below the group's (multiples of the unroll); with
// spatial_outer, N panels of 2, 4 and 8 chunks; the thread partitions
// thr_oc = 0 and every T dividing the threads, up to the chunks. `base`
// itself first.
std::vector<conv_config> conv_blocking_choices(const conv_geometry& g, const conv_config& base) {
  std::vector<conv_config> out;
  std::vector<int> ic_blocks = {0};
  for (int b : {16, 64, 256}) {
    if (!g.depthwise && b < g.icg && b % base.ic_unroll == 0) ic_blocks.push_back(b);
  }
  std::vector<int> panels = {0};
  if (base.order == conv_loop_order::spatial_outer) panels.insert(panels.end(), {2, 4, 8});
  const std::int64_t chunks = (g.depthwise ? 1 : g.g) * div_up(g.nb, base.oc_blocks);
  std::vector<int> parts = {0};
  for (int t = 1; g.nthr > 1 && t <= g.nthr && t <= chunks; ++t) {
    if (g.nthr % t == 0) parts.push_back(t);
  }
  for (int b : ic_blocks) {
    for (int panel : panels) {
      for (int t : parts) {
        conv_config c = base;
        c.ic_block = b;
        c.oc_panel = panel;
        c.thr_oc = t;
        if (c == effective_conv_config(g, c) && std::find(out.begin(), out.end(), c) == out.end()) {
          out.push_back(c);
        }
      }
    }
  }
  return out;
}

// A register tile, unroll and loop order of the space, and the index of
// its first candidate.
struct conv_base_choice {
  conv_config base;
  std::uint64_t first;
};

}  // namespace

enumerated_configs<conv_config> conv_config_candidates(const conv_problem& p, cpu_isa isa) {
  auto ga = analyze_conv(p);
  if (!ga || isa < cpu_isa::avx2) return {};
  const conv_geometry g = flatten_conv_pointwise(ga.value());
  const int budget = conv_accumulator_budget(isa);
  auto bases = std::make_shared<std::vector<conv_base_choice>>();
  std::uint64_t total = 0;
  for (int ocb = 1; ocb <= std::min<std::int64_t>(16, g.nb); ++ocb) {
    for (int owb = 1; owb <= std::min<std::int64_t>(64, g.ow) && owb * ocb <= budget; ++owb) {
      for (int u : {1, 2, 4, 8, 16}) {
        for (conv_loop_order order : {conv_loop_order::oc_outer, conv_loop_order::spatial_outer}) {
          const conv_config c{owb, ocb, u, order};
          // Only the form the generator uses: others repeat its code.
          if (!(c == effective_conv_config(g, c))) continue;
          bases->push_back({c, total});
          total += conv_blocking_choices(g, c).size();
        }
      }
    }
  }
  // The blockings and partitions innermost: neighbours share a register
  // tile, and a spread of the space samples tiles as evenly as before.
  return enumerated_configs<conv_config>(total, [g, bases](std::uint64_t i) {
    auto it =
        std::upper_bound(bases->begin(), bases->end(), i,
                         [](std::uint64_t v, const conv_base_choice& b) { return v < b.first; });
    const conv_base_choice& b = *(it - 1);
    return conv_blocking_choices(g, b.base)[i - b.first];
  });
}

}  // namespace primcache::cpu_internal
