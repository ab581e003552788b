#include "kernels/reorder_config.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "jit/target.hpp"
#include "kernels/integer_math.hpp"
#include "kernels/layout_walk.hpp"
#include "kernels/reorder_validation.hpp"

namespace primcache::cpu_internal {

bool reorder_is_raw(const reorder_problem& p) {
  return p.src.data_type() == p.dst.data_type() && p.scales == reorder_scales::none;
}

unsigned reorder_keep_mask(const reorder_problem& p) {
  return p.scales == reorder_scales::per_dim ? (1u << p.scale_dim) : 0u;
}

result<walk_plan> reorder_walk_plan(const reorder_problem& p) {
  const unsigned keep = reorder_keep_mask(p);
  auto plan = plan_walk(p.src, p.dst, keep);
  if (!plan) return plan.why();
  return join_runs(batch_padded_block(std::move(plan).value(), keep));
}

reorder_tile_blocks tile_blocks_for(const reorder_problem& p, const walk_plan& w,
                                    const reorder_config& c) {
  if (w.inner != walk_plan::inner_kind::tile) return {};
  const walk_loop& li = w.loops[w.split_loop()];
  const walk_loop& lj = w.loops.back();
  const auto src_es = static_cast<std::int64_t>(size_of(p.src.data_type()));
  const auto dst_es = static_cast<std::int64_t>(size_of(p.dst.data_type()));
  auto tiles = [&](std::int64_t elems) {
    return std::max<std::int64_t>(c.tile, elems / c.tile * c.tile);
  };
  // The side read or written across rows is the one with the shorter row:
  // walking I tiles innermost writes dst rows li.dst_stride apart (src rows
  // are read in runs of a block); walking J tiles innermost reads src rows
  // lj.src_stride apart (dst rows are written in runs of a block).
  if (li.dst_stride * dst_es <= lj.src_stride * src_es) {
    // 4 KiB of each src row per block: a page, long enough for the
    // hardware prefetchers to stream every row of a tile.
    return {tiles(4096 / src_es), 0};
  }
  // The src rows of a block within 256 KiB (they stay in L2 while the I
  // tiles pass over them), dst runs of up to 4 KiB.
  const std::int64_t fit = (std::int64_t{256} << 10) / (lj.src_stride * src_es);
  return {0, tiles(std::min(fit, 4096 / dst_es))};
}

void canonicalize_tile_blocks(reorder_config& c, const walk_plan& w) {
  if (w.inner != walk_plan::inner_kind::tile) {
    c.block_i = c.block_j = 0;
    return;
  }
  const walk_loop& li = w.loops[w.split_loop()];
  const walk_loop& lj = w.loops.back();
  const std::int64_t t = c.tile;
  // A block of one tile or less is none; one past the loop it blocks walks
  // as the whole loop.
  auto fit = [t](std::int64_t b, std::int64_t cap) -> std::int64_t {
    b = std::min(b, cap);
    return b > t ? b : 0;
  };
  // J blocks cover the full J tiles; I blocks a work item's range of I.
  c.block_j = fit(c.block_j, lj.extent / t * t);
  const std::int64_t i_range = c.chunk > 0 ? c.chunk : div_up(li.extent, t) * t;
  c.block_i = c.block_j > 0 ? 0 : fit(c.block_i, i_range);
}

bool reorder_streams_past_cache(const reorder_problem& p) {
  const auto bytes = static_cast<std::int64_t>(p.src.size_bytes() + p.dst.size_bytes());
  return bytes > reorder_streaming_bytes;
}

namespace {

// Vectors wider than the streamed loop, or unrolling past it, give the same
// code as narrower ones: such configs take the narrower form, so different
// configs mean different code.
void canonicalize(reorder_config& c, std::int64_t extent) {
  while (c.vector_lanes > 4 && c.vector_lanes > extent) c.vector_lanes /= 2;
  while (c.unroll > 1 && static_cast<std::int64_t>(c.vector_lanes) * c.unroll > extent) --c.unroll;
}

std::int64_t default_chunk(const walk_plan& w, const reorder_config& c, int nthr) {
  // Enough work items for the threads to balance (4 per thread), each at
  // least a few thousand elements. A transposing walk takes one per thread:
  // the threads get contiguous ranges of items anyway (run_walk), and one
  // long range of I reads every src row in longer runs.
  const std::int64_t outer = w.work_items(w.loops[w.split_loop()].extent);
  const std::int64_t per_thread = w.inner == walk_plan::inner_kind::tile ? 1 : 4;
  const std::int64_t want = per_thread * static_cast<std::int64_t>(nthr);
  if (outer < want) {
    const std::int64_t extent = w.loops[w.split_loop()].extent;
    std::int64_t inner_elems = 1;
    for (std::size_t k = w.split_loop() + 1; k < w.loops.size(); ++k) {
      inner_elems *= w.loops[k].extent;
    }
    const std::int64_t min_chunk = std::max<std::int64_t>(1, 4096 / inner_elems);
    const std::int64_t chunk = std::max(min_chunk, div_up(extent, div_up(want, outer)));
    const std::int64_t rounded = walk_chunk(w, chunk, reorder_chunk_unit(w, c));
    return rounded >= extent ? 0 : rounded;
  }
  return c.chunk;
}

// `c` with tile edge t and that edge's default blocks.
reorder_config with_tile(const reorder_problem& p, const walk_plan& w, reorder_config c, int t) {
  c.tile = t;
  const reorder_tile_blocks blocks = tile_blocks_for(p, w, c);
  c.block_i = blocks.i;
  c.block_j = blocks.j;
  return c;
}

// Blocks other than the default's, for a transposing walk: none, the same
// length on the other side, half and twice the default's (multiples of the
// tile).
std::vector<reorder_config> block_choices(const reorder_config& def) {
  const std::int64_t t = def.tile;
  const std::int64_t b = std::max(def.block_i, def.block_j);
  auto with = [&](std::int64_t bi, std::int64_t bj) {
    reorder_config c = def;
    c.block_i = bi / t * t;
    c.block_j = bj / t * t;
    return c;
  };
  std::vector<reorder_config> out = {with(0, 0)};
  if (b == 0) return out;
  const bool on_j = def.block_j > 0;
  out.push_back(on_j ? with(b, 0) : with(0, b));
  out.push_back(on_j ? with(0, b / 2) : with(b / 2, 0));
  out.push_back(on_j ? with(0, b * 2) : with(b * 2, 0));
  return out;
}

}  // namespace

int reorder_chunk_unit(const walk_plan& plan, const reorder_config& c) {
  return plan.inner == walk_plan::inner_kind::tile ? c.tile : c.vector_lanes * c.unroll;
}

void reorder_problem::write_key(key_writer& w) const {
  w.str("reorder");
  src.write_key(w);
  dst.write_key(w);
  w.enumeration(scales).i32(scales == reorder_scales::per_dim ? scale_dim : 0).i32(nthr);
}

void reorder_config::write_key(key_writer& w) const {
  w.i32(tile).i32(vector_lanes).i32(unroll).i64(chunk).boolean(use_memcpy);
  w.i64(block_i).i64(block_j);
}

reorder_config default_reorder_config(const reorder_problem& p, cpu_isa isa) {
  reorder_config c;
  const unsigned bits = isa_vector_bits(isa);
  c.tile = bits >= 512 ? 16 : 8;
  const bool raw = reorder_is_raw(p);
  std::size_t widest = 4;
  if (raw && p.src.is_blocked()) widest = size_of(p.src.data_type());
  c.vector_lanes = static_cast<int>(std::clamp<std::size_t>(bits / (8 * widest), 4, 64));
  c.unroll = raw ? 4 : 2;
  if (!validate_reorder_problem(p)) return c;
  auto plan = reorder_walk_plan(p);
  if (!plan) return c;
  const walk_plan& w = plan.value();
  if (w.inner == walk_plan::inner_kind::stream) {
    canonicalize(c, w.loops.back().extent);
  } else {
    const reorder_tile_blocks blocks = tile_blocks_for(p, w, c);
    c.block_i = blocks.i;
    c.block_j = blocks.j;
  }
  if (p.nthr > 1) c.chunk = default_chunk(w, c, p.nthr);
  canonicalize_tile_blocks(c, w);
  return c;
}

std::vector<reorder_config> reorder_config_variants(const reorder_problem& p, cpu_isa isa) {
  const reorder_config def = default_reorder_config(p, isa);
  std::vector<reorder_config> out;
  auto plan = validate_reorder_problem(p) ? reorder_walk_plan(p) : result<walk_plan>(failure{});
  if (!plan) return out;
  const walk_plan& w = plan.value();
  bool copies = reorder_is_raw(p) && w.inner == walk_plan::inner_kind::stream &&
                w.loops.back().src_stride == 1 && w.loops.back().dst_stride == 1;
  for (int d = 0; d < w.ndims; ++d) copies = copies && w.exact[d];
  auto add = [&](reorder_config c) {
    if (!validate_reorder_config(c)) return;
    if (!copies) c.use_memcpy = def.use_memcpy;  // no effect on the code
    if (w.inner == walk_plan::inner_kind::stream) canonicalize(c, w.loops.back().extent);
    // Normalize the chunk as create() will, so equal code means equal config.
    const std::int64_t extent = w.loops[w.split_loop()].extent;
    c.chunk = walk_chunk(w, c.chunk, reorder_chunk_unit(w, c));
    if (c.chunk >= extent) c.chunk = 0;
    canonicalize_tile_blocks(c, w);
    if (c == def || std::find(out.begin(), out.end(), c) != out.end()) return;
    out.push_back(c);
  };
  const std::int64_t extent = w.loops[w.split_loop()].extent;
  if (w.inner == walk_plan::inner_kind::tile) {
    for (int t : {16, 8, 4}) add(with_tile(p, w, def, t));
    for (const reorder_config& c : block_choices(def)) add(c);
    reorder_config c = def;
    c.chunk = std::max<std::int64_t>(1, extent / 3);
    add(c);
  } else {
    // Vector code instead of memcpy, where memcpy applies; elsewhere the
    // flag changes nothing and these differ from the default by lanes.
    for (int lanes : {def.vector_lanes / 2, def.vector_lanes * 2, 4}) {
      reorder_config c = def;
      c.vector_lanes = lanes;
      c.use_memcpy = false;
      add(c);
    }
    for (int u : {1, 2, 8}) {
      reorder_config c = def;
      c.unroll = u;
      c.use_memcpy = false;
      add(c);
    }
    reorder_config c = def;
    c.chunk = std::max<std::int64_t>(1, extent / 3);
    add(c);
  }
  return out;
}

backend::kernel_config to_fields(const reorder_config& c) {
  backend::kernel_config f;
  f.add("tile", c.tile).add("vector_lanes", c.vector_lanes).add("unroll", c.unroll);
  f.add("chunk", c.chunk).add("use_memcpy", c.use_memcpy);
  f.add("block_i", c.block_i).add("block_j", c.block_j);
  return f;
}

result<reorder_config> reorder_config_from_fields(const backend::kernel_config& f) {
  auto r = field_reader::open(
      f, "reorder",
      {"tile", "vector_lanes", "unroll", "chunk", "use_memcpy", "block_i", "block_j"});
  if (!r) return r.why();
  const field_reader& in = r.value();
  reorder_config c;
  for (auto ok :
       {in.get("tile", 1, 64, c.tile), in.get("vector_lanes", 1, 64, c.vector_lanes),
        in.get("unroll", 1, 64, c.unroll), in.get("chunk", 0, std::int64_t{1} << 62, c.chunk),
        in.get("use_memcpy", c.use_memcpy), in.get("block_i", 0, std::int64_t{1} << 40, c.block_i),
        in.get("block_j", 0, std::int64_t{1} << 40, c.block_j)}) {
    if (!ok) return ok.why();
  }
  if (auto ok = validate_reorder_config(c); !ok) return ok.why();
  return c;
}

result<bool> validate_reorder_config_for(const reorder_problem& p, const reorder_config& c,
                                         cpu_isa isa) {
  if (auto ok = check_reorder_problem(p); !ok) return ok;
  if (auto ok = validate_reorder_config(c); !ok) return ok;
  if (isa > detected_isa()) {
    return failure{status::unimplemented,
                   "reorder: ISA " + std::string(to_string(isa)) + " is beyond this host"};
  }
  return true;
}

enumerated_configs<reorder_config> reorder_config_candidates(const reorder_problem& p,
                                                             cpu_isa isa) {
  if (!validate_reorder_problem(p)) return {};
  auto plan = reorder_walk_plan(p);
  if (!plan) return {};
  const walk_plan& w = plan.value();
  const reorder_config def = default_reorder_config(p, isa);
  bool copies = reorder_is_raw(p) && w.inner == walk_plan::inner_kind::stream &&
                w.loops.back().src_stride == 1 && w.loops.back().dst_stride == 1;
  for (int d = 0; d < w.ndims; ++d) copies = copies && w.exact[d];
  const std::int64_t extent = w.loops[w.split_loop()].extent;
  std::vector<reorder_config> out;
  // Parameters the walk does not use keep the default's value, so that
  // distinct candidates are distinct code.
  auto add = [&](reorder_config c) {
    if (!validate_reorder_config(c)) return;
    if (w.inner == walk_plan::inner_kind::stream) canonicalize(c, w.loops.back().extent);
    c.chunk = walk_chunk(w, c.chunk, reorder_chunk_unit(w, c));
    if (c.chunk >= extent) c.chunk = 0;
    canonicalize_tile_blocks(c, w);
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  for (int parts : {1, 2, 4, 8, 16}) {
    const std::int64_t chunk = parts == 1 ? 0 : std::max<std::int64_t>(1, extent / parts);
    if (w.inner == walk_plan::inner_kind::tile) {
      for (int t : {4, 8, 16}) {
        reorder_config c = with_tile(p, w, def, t);
        c.chunk = chunk;
        add(c);
      }
      for (reorder_config c : block_choices(def)) {
        c.chunk = chunk;
        add(c);
      }
      continue;
    }
    for (int lanes : {4, 8, 16, 32, 64}) {
      for (int u = 1; u <= 8; ++u) {
        for (bool memcpy : {false, true}) {
          if (memcpy && !copies) continue;
          reorder_config c = def;
          c.vector_lanes = lanes;
          c.unroll = u;
          c.chunk = chunk;
          c.use_memcpy = copies ? memcpy : def.use_memcpy;
          add(c);
        }
      }
    }
  }
  return enumerated_configs<reorder_config>::of(std::move(out));
}

}  // namespace primcache::cpu_internal
