// The matmul kernel's prepacked weights: the layout (matmul_packing) and the
// pack function that produces it (matmul_kernel.hpp).
#include <algorithm>
#include <cstring>

#include "kernels/integer_math.hpp"
#include "kernels/matmul_kernel.hpp"

namespace primcache::cpu_internal {

matmul_packing matmul_packing::of(const matmul_problem& p, const matmul_config& c) {
  matmul_packing pk;
  pk.k = p.k;
  pk.n = p.n;
  pk.wei_strides = p.wei_strides;
  pk.batches = p.wei_strides[0] == 0 ? 1 : p.batch;
  if (pk.batches == 1) pk.wei_strides[0] = 0;  // one copy: its batch stride is unused
  pk.nr = c.nr;
  return pk;
}

std::size_t matmul_packing::bytes() const noexcept {
  return static_cast<std::size_t>(batches * column_blocks() * k * nr) * sizeof(float);
}

void matmul_packing::write_key(key_writer& w) const {
  w.str("matmul_packing").i64(k).i64(n);
  for (std::int64_t s : wei_strides) w.i64(s);
  w.i64(batches).i32(nr);
}

void matmul_pack_weights(const matmul_packing& pk, const float* weights, float* packed,
                         thread_pool& pool) {
  const std::int64_t blocks = pk.column_blocks();
  const std::int64_t nr = pk.nr;
  const std::int64_t sk = pk.wei_strides[1], sn = pk.wei_strides[2];
  // Each thread takes a range of column blocks of every batch.
  pool.parallel_for(pool.size(), [&](int ithr, int nthr) {
    const range r = balance(blocks, ithr, nthr);
    if (r.begin >= r.end) return;
    for (std::int64_t b = 0; b < pk.batches; ++b) {
      const float* in = weights + b * pk.wei_strides[0];
      float* out = packed + b * pk.batch_stride();
      if (sn == 1) {
        // Rows are contiguous: walk them in order (one read stream, a
        // stream per column block written), a copy of nr floats per block.
        const std::int64_t last = std::min(r.end, blocks - 1);  // full blocks: [begin, last)
        const std::int64_t tail = pk.n - (blocks - 1) * nr;     // columns of the last block
        for (std::int64_t k = 0; k < pk.k; ++k) {
          const float* row = in + k * sk;
          for (std::int64_t j = r.begin; j < last; ++j) {
            std::memcpy(out + j * pk.k * nr + k * nr, row + j * nr,
                        static_cast<std::size_t>(nr) * sizeof(float));
          }
          if (r.end == blocks) {
            float* dst = out + (blocks - 1) * pk.k * nr + k * nr;
            std::memcpy(dst, row + (blocks - 1) * nr,
                        static_cast<std::size_t>(tail) * sizeof(float));
            std::fill(dst + tail, dst + nr, 0.f);
          }
        }
        continue;
      }
      // Columns are contiguous (transposed weights: sk == 1) or nothing is:
      // walk each column down K, writing with stride nr.
      for (std::int64_t j = r.begin; j < r.end; ++j) {
        const std::int64_t cols = std::min(nr, pk.n - j * nr);
        float* blk = out + j * pk.k * nr;
        for (std::int64_t c = 0; c < nr; ++c) {
          if (c < cols) {
            const float* col = in + (j * nr + c) * sn;
            for (std::int64_t k = 0; k < pk.k; ++k) blk[k * nr + c] = col[k * sk];
          } else {
            for (std::int64_t k = 0; k < pk.k; ++k) blk[k * nr + c] = 0.f;
          }
        }
      }
    }
  });
}

}  // namespace primcache::cpu_internal
