#include "kernels/matmul_config.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "jit/target.hpp"
#include "kernels/integer_math.hpp"
#include "kernels/matmul_validation.hpp"
#include "primcache/runtime/backend/kernel_config.hpp"

namespace primcache::cpu_internal {

int matmul_vector_lanes(cpu_isa isa) {
  return static_cast<int>(isa_vector_bits(isa) / 32);
}
int matmul_vector_registers(cpu_isa isa) {
  return isa >= cpu_isa::avx512_core ? 32 : 16;
}

// Scratch bytes of one thread: its packed kc x nc panel, in whole cache lines.
std::size_t matmul_pack_slot_bytes(const matmul_config& c) {
  if (!c.pack_b) return 0;
  return static_cast<std::size_t>(round_up(c.kc * c.nc * 4, 64));
}

namespace {

// Estimated time of one thread's share, in units of one vector FMA.
double estimate(const matmul_problem& p, const matmul_config& c, int lanes) {
  const std::int64_t mb = div_up(p.m, c.mr);
  const std::int64_t nb = div_up(p.n, c.nr);
  const double rows = static_cast<double>(div_up(p.batch * mb, c.thr_m) * c.mr);
  const double cols = static_cast<double>(div_up(nb, c.thr_n) * c.nr);
  const int nv = c.nr / lanes;
  // A micro-kernel step issues mr * nv FMAs and mr + nv loads; the loads
  // are hidden unless the tile is thin.
  const double per_fma = 1.0 + 0.5 * std::max(0.0, double(c.mr + nv) / (c.mr * nv) - 0.35);
  double t = rows * (cols / lanes) * static_cast<double>(p.k) * per_fma;
  if (c.pack_b) {
    // Each thread packs its columns once per batch it covers.
    const double batches = static_cast<double>(div_up(p.batch, c.thr_m));
    t += 6.0 * cols / lanes * static_cast<double>(p.k) * batches;
  }
  // Waking a pool thread and joining it costs microseconds: small problems
  // run on fewer threads.
  t += 20000.0 * (c.thr_m * c.thr_n - 1);
  return t;
}

struct tile {
  int mr, nv;
};

matmul_config with_blocking(const matmul_problem& p, matmul_config c, int lanes) {
  (void)lanes;
  const std::int64_t unroll = c.k_unroll;
  if (p.prepacked_weights && p.m > c.mr) {
    // The weights arrive packed, so a K block costs no packing and may be
    // deeper: up to 512 halves the micro-kernel calls (and the loads and
    // stores of dst between blocks) against 256. The innermost loop still
    // runs over the nr blocks of the kc x nc panel with the mr x kc block
    // of src in L1; the panel is sized so that it, the thread's rows of
    // src for the K block and the dst stripe they update all stay in L2
    // (three quarters of 1 MiB): at 128x768x3072 a 768-column panel with
    // kc 256 (768 KiB, plus 384 KiB of dst) spilled to L3 on every K block.
    // A single row block (M <= mr: a matrix-vector product) reuses no panel
    // and streams the weights once: it keeps the blocking below.
    c.n_inner = true;
    const std::int64_t kc_max = 512;
    c.kc = round_up(div_up(p.k, div_up(p.k, kc_max)), unroll);
    const std::int64_t mc_rows = std::max<std::int64_t>(c.mr, (512 * 1024) / (c.kc * 4));
    c.mc = std::max<std::int64_t>(c.mr, mc_rows / c.mr * c.mr);
    const std::int64_t mb = div_up(p.m, c.mr);
    const std::int64_t rows = std::min(c.mc, div_up(mb, c.thr_m) * c.mr);
    const std::int64_t nb = div_up(p.n, c.nr);
    const std::int64_t share = div_up(nb, c.thr_n) * c.nr;
    const std::int64_t l2_budget = 768 * 1024;
    const std::int64_t src_bytes = rows * c.kc * 4;
    const std::int64_t nc_cols =
        std::max<std::int64_t>(c.nr, (l2_budget - src_bytes) / ((c.kc + rows) * 4));
    c.nc = std::min(share, std::max<std::int64_t>(c.nr, nc_cols / c.nr * c.nr));
  } else if (c.pack_b || p.prepacked_weights) {
    // The innermost loop runs over the nr blocks of the packed kc x nc
    // panel (about 1 MiB: L2) with the mr x kc block of src in L1; depth
    // 256 makes each micro-kernel call long enough to hide its edges.
    c.n_inner = true;
    const std::int64_t kc_max = 256;
    const std::int64_t kblocks = div_up(p.k, kc_max);
    c.kc = round_up(div_up(p.k, kblocks), unroll);
    const std::int64_t mc_rows = std::max<std::int64_t>(c.mr, (512 * 1024) / (c.kc * 4));
    c.mc = std::max<std::int64_t>(c.mr, mc_rows / c.mr * c.mr);
    const std::int64_t nb = div_up(p.n, c.nr);
    const std::int64_t share = div_up(nb, c.thr_n) * c.nr;
    const std::int64_t nc_cols = std::max<std::int64_t>(c.nr, (1024 * 1024) / (c.kc * 4));
    c.nc = std::min(share, std::max<std::int64_t>(c.nr, nc_cols / c.nr * c.nr));
  } else {
    // Rows of the weights are read in place. When no row block reuses them
    // (M <= mr: a matrix-vector product) the weights stream from memory
    // once; short K blocks keep the pages of one block's rows few enough
    // for the TLB while the nr blocks walk along them.
    const std::int64_t kc_max = p.m <= c.mr ? 64 : 256;
    c.kc = round_up(div_up(p.k, div_up(p.k, kc_max)), unroll);
    c.mc = round_up(std::min<std::int64_t>(p.m, 4096), c.mr);
    const std::int64_t nb = div_up(p.n, c.nr);
    c.nc = div_up(nb, c.thr_n) * c.nr;
  }
  return c;
}

// The thread grid with the smallest estimated time.
matmul_config with_best_grid(const matmul_problem& p, matmul_config c, int lanes) {
  double best = std::numeric_limits<double>::infinity();
  matmul_config best_c = c;
  for (int cells : {p.nthr, 1}) {
    for (int tm = 1; tm <= cells; ++tm) {
      if (cells % tm != 0) continue;
      matmul_config t = c;
      t.thr_m = tm;
      t.thr_n = cells / tm;
      t = with_blocking(p, t, lanes);
      const double e = estimate(p, t, lanes);
      if (e < best) {
        best = e;
        best_c = t;
      }
    }
  }
  return best_c;
}

}  // namespace

matmul_problem matmul_problem::dense(std::int64_t batch, std::int64_t m, std::int64_t n,
                                     std::int64_t k) {
  matmul_problem p;
  p.batch = batch;
  p.m = m;
  p.n = n;
  p.k = k;
  p.src_strides = {m * k, k, 1};
  p.wei_strides = {k * n, n, 1};
  p.dst_strides = {m * n, n, 1};
  return p;
}

void matmul_problem::write_key(key_writer& w) const {
  w.i64(batch).i64(m).i64(n).i64(k);
  for (const auto* s : {&src_strides, &wei_strides, &dst_strides}) {
    for (std::int64_t v : *s) w.i64(v);
  }
  w.boolean(with_bias);
  cpu_internal::write_key(w, post_ops);
  w.i32(nthr);
  w.boolean(prepacked_weights);
}

void matmul_config::write_key(key_writer& w) const {
  w.i32(mr).i32(nr).i64(kc).i64(mc).i64(nc).i32(k_unroll).boolean(pack_b).boolean(n_inner);
  w.i32(thr_m).i32(thr_n);
}

matmul_config default_matmul_config(const matmul_problem& p, cpu_isa isa) {
  const int lanes = matmul_vector_lanes(isa);
  const int regs = matmul_vector_registers(isa);
  const std::int64_t m = std::max<std::int64_t>(p.m, 1);
  const std::int64_t n = std::max<std::int64_t>(p.n, 1);
  const int nthr = std::max(p.nthr, 1);

  std::vector<tile> tiles;
  if (lanes == 16) {
    tiles = {{8, 3}, {6, 4}, {7, 3}, {12, 2}, {14, 2}, {28, 1}, {4, 6}, {3, 7}, {2, 8}, {1, 8}};
  } else {
    tiles = {{6, 2}, {4, 3}, {5, 2}, {14, 1}, {3, 4}, {2, 5}, {1, 7}};
  }
  // Rows: a tile no taller than M. Columns: no wider than N needs.
  matmul_config best;
  double best_t = std::numeric_limits<double>::infinity();
  for (tile t : tiles) {
    if (t.mr * t.nv + t.nv + 1 > regs) continue;
    matmul_config c;
    c.mr = static_cast<int>(std::min<std::int64_t>(t.mr, m));
    c.nr = static_cast<int>(std::min<std::int64_t>(t.nv, div_up(n, lanes))) * lanes;
    // One K step per loop iteration when a step is at least 16 FMAs (the
    // loop's compare and pointer steps hide behind them); thinner tiles (a
    // matrix-vector product) keep 4 (issue 11, fourth pass).
    c.k_unroll = c.mr * (c.nr / lanes) >= 16 ? 1 : 4;
    const bool dense_n = p.wei_strides[2] == 1;
    // Packing pays when each weight panel serves several row blocks and the
    // rows of the weights are far apart (cache-set conflicts, TLB misses).
    const bool reused = p.m >= 3 * c.mr;
    const bool scattered = p.wei_strides[1] * 4 > 2048 || p.k * p.n * 4 > (256 << 10);
    c.pack_b = !p.prepacked_weights && (!dense_n || (reused && scattered));
    c.thr_m = nthr;
    c.thr_n = 1;
    c = with_best_grid(p, c, lanes);
    const double e = estimate(p, c, lanes);
    if (e < best_t * 0.999) {
      best_t = e;
      best = c;
    }
  }
  return best;
}

std::vector<matmul_config> matmul_config_variants(const matmul_problem& p, cpu_isa isa) {
  const int lanes = matmul_vector_lanes(isa);
  const int regs = matmul_vector_registers(isa);
  const matmul_config def = default_matmul_config(p, isa);
  std::vector<matmul_config> out;
  auto add = [&](matmul_config c) {
    if (validate_matmul_config(p, c, lanes, regs)) return;
    if (c == def) return;
    if (std::find(out.begin(), out.end(), c) != out.end()) return;
    out.push_back(c);
  };
  // Another register tile.
  {
    matmul_config c = def;
    c.mr = std::max(1, def.mr / 2);
    c.nr = lanes;
    c.mc = round_up(def.mc, c.mr);
    c.nc = round_up(def.nc, c.nr);
    add(c);
  }
  // Packing toggled (where the weights allow running without it).
  {
    matmul_config c = def;
    c.pack_b = !def.pack_b;
    c = with_blocking(p, c, lanes);
    add(c);
  }
  // A shallower K block with a different unroll and loop order.
  {
    matmul_config c = def;
    c.kc = std::max<std::int64_t>(1, std::min<std::int64_t>(def.kc, p.k) / 2 + 1);
    c.k_unroll = def.k_unroll == 1 ? 3 : 1;
    c.n_inner = !def.n_inner;
    add(c);
  }
  // The other thread grids.
  for (int tm = 1; tm <= p.nthr; ++tm) {
    if (p.nthr % tm != 0 || tm == def.thr_m) continue;
    matmul_config c = def;
    c.thr_m = tm;
    c.thr_n = p.nthr / tm;
    add(c);
  }
  // Small cache blocks: several mc, nc and kc blocks even for small shapes.
  {
    matmul_config c = def;
    c.pack_b = !p.prepacked_weights;
    c.mc = c.mr;
    c.nc = c.nr;
    c.kc = std::max<std::int64_t>(1, std::min<std::int64_t>(p.k, 64) / 3 + 1);
    c.k_unroll = 2;
    add(c);
  }
  return out;
}

backend::kernel_config to_fields(const matmul_config& c) {
  backend::kernel_config f;
  f.add("mr", c.mr).add("nr", c.nr).add("kc", c.kc).add("mc", c.mc).add("nc", c.nc);
  f.add("k_unroll", c.k_unroll).add("pack_b", c.pack_b).add("n_inner", c.n_inner);
  f.add("thr_m", c.thr_m).add("thr_n", c.thr_n);
  return f;
}

result<matmul_config> matmul_config_from_fields(const backend::kernel_config& f) {
  auto r = field_reader::open(
      f, "matmul",
      {"mr", "nr", "kc", "mc", "nc", "k_unroll", "pack_b", "n_inner", "thr_m", "thr_n"});
  if (!r) return r.why();
  const field_reader& in = r.value();
  matmul_config c;
  constexpr std::int64_t big = std::int64_t{1} << 40;
  for (auto ok : {in.get("mr", 1, 1024, c.mr), in.get("nr", 1, 1 << 16, c.nr),
                  in.get("kc", 1, big, c.kc), in.get("mc", 1, big, c.mc),
                  in.get("nc", 1, big, c.nc), in.get("k_unroll", 1, 16, c.k_unroll),
                  in.get("pack_b", c.pack_b), in.get("n_inner", c.n_inner),
                  in.get("thr_m", 1, 1 << 16, c.thr_m), in.get("thr_n", 1, 1 << 16, c.thr_n)}) {
    if (!ok) return ok.why();
  }
  return c;
}

result<bool> validate_matmul_config_for(const matmul_problem& p, const matmul_config& c,
                                        cpu_isa isa) {
  if (auto f = validate_matmul_isa(isa)) return *f;
  if (auto f = validate_matmul_config(p, c, matmul_vector_lanes(isa), matmul_vector_registers(isa)))
    return *f;
  return true;
}

namespace {

// Sorted, without repeats.
std::vector<std::int64_t> unique_sorted(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// The per-tile part of the matmul space: a register tile and the cache
// blocks that are whole multiples of it.
struct matmul_tile_choice {
  int mr, nr;
  std::vector<std::int64_t> mc, nc;
  std::uint64_t first;  // index of its first candidate in the space
};

}  // namespace

enumerated_configs<matmul_config> matmul_config_candidates(const matmul_problem& p, cpu_isa isa) {
  if (validate_matmul_problem(p) || validate_matmul_isa(isa)) return {};
  const int lanes = matmul_vector_lanes(isa);
  const int regs = matmul_vector_registers(isa);
  // Pack panels stay below the validation's limit: kc <= 1024, nc a little above 2^17.
  constexpr std::int64_t max_nc = std::int64_t{1} << 17;
  std::vector<std::int64_t> kcs;
  for (std::int64_t k : {16, 32, 64, 128, 256, 512}) {
    if (k < p.k) kcs.push_back(k);
  }
  if (p.k <= 1024) kcs.push_back(p.k);
  kcs = unique_sorted(kcs);
  const std::vector<int> unrolls = {1, 2, 4, 8};
  std::vector<bool> packs = {true};
  if (p.prepacked_weights) {
    packs = {false};  // the weights come packed
  } else if (p.wei_strides[2] == 1) {
    packs.insert(packs.begin(), false);
  }
  struct grid {
    int m, n;
  };
  std::vector<grid> grids;
  for (int cells : {p.nthr, 1}) {
    for (int tm = 1; tm <= cells; ++tm) {
      if (cells % tm == 0) grids.push_back({tm, cells / tm});
    }
    if (p.nthr == 1) break;
  }
  // kc x unroll x pack x n_inner x grid, the same for every tile.
  const std::uint64_t common = kcs.size() * unrolls.size() * packs.size() * 2 * grids.size();

  auto tiles = std::make_shared<std::vector<matmul_tile_choice>>();
  std::uint64_t total = 0;
  const std::int64_t max_nv = std::min<std::int64_t>(div_up(p.n, lanes), 8);
  for (int nv = 1; nv <= max_nv; ++nv) {
    for (int mr = 1; mr <= std::min<std::int64_t>(p.m, 32); ++mr) {
      if (mr * nv + nv + 1 > regs) break;
      matmul_tile_choice t{mr, nv * lanes, {}, {}, total};
      for (std::int64_t rows : {std::int64_t{1}, std::int64_t{64}, std::int64_t{256}, p.m}) {
        t.mc.push_back(round_up(std::clamp<std::int64_t>(rows, 1, p.m), mr));
      }
      for (std::int64_t cols : {std::int64_t{1}, std::int64_t{256}, std::int64_t{1024}, p.n}) {
        t.nc.push_back(round_up(std::clamp<std::int64_t>(cols, 1, std::min(p.n, max_nc)), t.nr));
      }
      t.mc = unique_sorted(t.mc);
      t.nc = unique_sorted(t.nc);
      total += t.mc.size() * t.nc.size() * common;
      tiles->push_back(std::move(t));
    }
  }
  return enumerated_configs<matmul_config>(
      total, [tiles, kcs, unrolls, packs, grids](std::uint64_t i) {
        auto it = std::upper_bound(
            tiles->begin(), tiles->end(), i,
            [](std::uint64_t v, const matmul_tile_choice& t) { return v < t.first; });
        const matmul_tile_choice& t = *(it - 1);
        std::uint64_t r = i - t.first;
        auto digit = [&](std::size_t radix) {
          const std::size_t d = static_cast<std::size_t>(r % radix);
          r /= radix;
          return d;
        };
        matmul_config c;
        c.mr = t.mr;
        c.nr = t.nr;
        const grid g = grids[digit(grids.size())];
        c.thr_m = g.m;
        c.thr_n = g.n;
        c.n_inner = digit(2) == 1;
        c.pack_b = packs[digit(packs.size())];
        c.k_unroll = unrolls[digit(unrolls.size())];
        c.kc = kcs[digit(kcs.size())];
        c.nc = t.nc[digit(t.nc.size())];
        c.mc = t.mc[digit(t.mc.size())];
        return c;
      });
}

}  // namespace primcache::cpu_internal
