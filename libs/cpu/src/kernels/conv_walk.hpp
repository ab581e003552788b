// kernels/conv_walk.hpp — the order in which a convolution's work items run
// when its configuration partitions them among threads (thr_oc) or walks
// output channels in panels (oc_panel), and how that order maps onto the
// generated function's items.
//
// The generated function runs a range of items [begin, end) in its loop
// order: oc_outer numbers them ((n * Q + q) * OH + oh), spatial_outer
// ((n * OH + oh) * Q + q), with q = group * chunks + chunk (Q chunks in all;
// a depthwise convolution's chunks are over the tensor's channels) and OH
// output rows per image. A walk numbers the same items anew, in *units*:
//
// - cells: with thr_oc = T >= 1, cell t * S + s (S = max(1, nthr / T)) is
//   the chunks balance(Q, t, T) by the rows balance(N * OH, s, S) (rows
//   counted over the images); with thr_oc = 0 one cell holds everything;
// - within a cell, image by image: oc_outer runs each chunk's rows; a
//   spatial_outer one runs, panel by panel (oc_panel chunks; one panel when
//   0), each row's chunks of the panel.
//
// Cells are numbered one after another, so a cell is a range of units:
// conv_item_schedule (conv_schedule.hpp) takes them as the shares' homes.
// run(r, call) calls call(begin, end) for the items of units r, each call a
// range of consecutive items of the generated function. Every item is one
// unit, once: which thread runs it and when change no output (each item
// writes its own outputs, each summed in the kernel's fixed order).
//
//   const auto w = conv_walk::make(flat_geometry, effective_config);
//   w.run({0, w.units()}, [&](std::int64_t b, std::int64_t e) { fn(..., b, e); });
//
// Thread-safety: immutable after make(); run() may be called from any
// number of threads at once. Exceptions: make() may throw std::bad_alloc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/conv_geometry.hpp"
#include "kernels/conv_kernel.hpp"
#include "kernels/integer_math.hpp"
#include "primcache/runtime/thread_pool.hpp"

namespace primcache::cpu_internal {

class conv_walk {
 public:
  // The walk of the effective configuration `c` over the flattened
  // geometry `g` (g.nthr threads).
  static conv_walk make(const conv_geometry& g, const conv_config& c) {
    conv_walk w;
    w.images_ = g.n;
    w.rows_ = g.oh;
    w.chunks_ = (g.depthwise ? 1 : g.g) * div_up(g.nb, c.oc_blocks);
    w.spatial_ = c.order == conv_loop_order::spatial_outer;
    w.panel_ = c.oc_panel;
    w.thr_oc_ = std::max(c.thr_oc, 1);
    w.thr_rows_ = c.thr_oc > 0 ? std::max(g.nthr / c.thr_oc, 1) : 1;
    const int cells = w.thr_oc_ * w.thr_rows_;
    w.starts_.assign(static_cast<std::size_t>(cells) + 1, 0);
    for (int i = 0; i < cells; ++i) {
      const box b = w.cell_box(i);
      w.starts_[static_cast<std::size_t>(i) + 1] =
          w.starts_[static_cast<std::size_t>(i)] + (b.q1 - b.q0) * (b.r1 - b.r0);
    }
    return w;
  }

  // Every unit (= every item of the generated function).
  std::int64_t units() const noexcept { return starts_.back(); }
  int cells() const noexcept { return static_cast<int>(starts_.size()) - 1; }
  // Cell boundaries in units: cells() + 1 values, from 0 to units().
  const std::vector<std::int64_t>& cell_starts() const noexcept { return starts_; }

  // call(begin, end) for the items of units [r.begin, r.end), in the
  // walk's order.
  template <class Call>
  void run(range r, Call&& call) const {
    std::int64_t u = std::max<std::int64_t>(r.begin, 0);
    const std::int64_t end = std::min(r.end, units());
    while (u < end) {
      const auto it = std::upper_bound(starts_.begin(), starts_.end(), u);
      const int cell = static_cast<int>(it - starts_.begin()) - 1;
      const std::int64_t first = starts_[static_cast<std::size_t>(cell)];
      const std::int64_t last = std::min(end, starts_[static_cast<std::size_t>(cell) + 1]);
      run_cell(cell_box(cell), u - first, last - first, call);
      u = last;
    }
  }

 private:
  // Chunks [q0, q1) by rows [r0, r1) (rows counted over the images).
  struct box {
    std::int64_t q0, q1, r0, r1;
  };
  box cell_box(int cell) const {
    const range q = balance(chunks_, cell / thr_rows_, thr_oc_);
    const range r = balance(images_ * rows_, cell % thr_rows_, thr_rows_);
    return {q.begin, q.end, r.begin, r.end};
  }

  // Units [l0, l1) of cell b, counted from the cell's first.
  template <class Call>
  void run_cell(const box& b, std::int64_t l0, std::int64_t l1, Call& call) const {
    const std::int64_t nq = b.q1 - b.q0;
    if (nq <= 0 || b.r1 <= b.r0) return;
    // Image by image: image n's rows of the cell, [a, e).
    std::int64_t n = b.r0 / rows_;
    std::int64_t seg_first = 0;  // units before image n's in the cell
    for (; l0 < l1 && n * rows_ < b.r1; ++n) {
      const std::int64_t a = std::max(b.r0, n * rows_) - n * rows_;
      const std::int64_t e = std::min(b.r1, (n + 1) * rows_) - n * rows_;
      const std::int64_t seg = (e - a) * nq;
      if (l0 < seg_first + seg) {
        const std::int64_t to = std::min(l1, seg_first + seg) - seg_first;
        run_image(n, a, e - a, b.q0, nq, l0 - seg_first, to, call);
        l0 = seg_first + to;
      }
      seg_first += seg;
    }
  }

  // Units [u, to) of image n's part of a cell: rows [a, a + rows) by
  // chunks [q0, q0 + nq).
  template <class Call>
  void run_image(std::int64_t n, std::int64_t a, std::int64_t rows, std::int64_t q0,
                 std::int64_t nq, std::int64_t u, std::int64_t to, Call& call) const {
    while (u < to) {
      std::int64_t item = 0, len = 0;
      if (!spatial_) {
        // Each chunk's rows: consecutive items of the oc_outer function.
        const std::int64_t q = u / rows, oh = u % rows;
        len = std::min(rows - oh, to - u);
        item = (n * chunks_ + q0 + q) * rows_ + a + oh;
      } else {
        // Panel by panel, each row's chunks of the panel: consecutive
        // items of the spatial_outer function.
        const std::int64_t width = panel_ > 0 ? std::min<std::int64_t>(panel_, nq) : nq;
        const std::int64_t p = u / (rows * width);
        const std::int64_t in_panel = u - p * rows * width;
        const std::int64_t w = std::min(width, nq - p * width);
        const std::int64_t oh = in_panel / w, q = in_panel % w;
        len = std::min(w - q, to - u);
        item = (n * rows_ + a + oh) * chunks_ + q0 + p * width + q;
      }
      call(item, item + len);
      u += len;
    }
  }

  std::int64_t images_ = 0, rows_ = 0, chunks_ = 0;
  bool spatial_ = false;
  int panel_ = 0;
  int thr_oc_ = 1, thr_rows_ = 1;
  std::vector<std::int64_t> starts_;
};

}  // namespace primcache::cpu_internal
