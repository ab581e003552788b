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
  const std::int64_t items = pk.batches * blocks;
  const std::int64_t nr = pk.nr;
  const std::int64_t sk = pk.wei_strides[1], sn = pk.wei_strides[2];
  pool.parallel_for(pool.size(), [&](int ithr, int nthr) {
    const range r = balance(items, ithr, nthr);
    for (std::int64_t item = r.begin; item < r.end; ++item) {
      const std::int64_t b = item / blocks, j = item % blocks;
      const float* in = weights + b * pk.wei_strides[0] + j * nr * sn;
      float* out = packed + b * pk.batch_stride() + j * pk.k * nr;
      const std::int64_t cols = std::min(nr, pk.n - j * nr);
      if (sn == 1) {
        // Rows of the block are contiguous: one copy per row, zeros past N.
        for (std::int64_t k = 0; k < pk.k; ++k) {
          std::memcpy(out + k * nr, in + k * sk, static_cast<std::size_t>(cols) * sizeof(float));
          std::fill(out + k * nr + cols, out + (k + 1) * nr, 0.f);
        }
      } else {
        // Columns are contiguous (transposed weights: sk == 1) or nothing is:
        // walk each column down K, writing with stride nr.
        for (std::int64_t c = 0; c < nr; ++c) {
          if (c < cols) {
            for (std::int64_t k = 0; k < pk.k; ++k) out[k * nr + c] = in[c * sn + k * sk];
          } else {
            for (std::int64_t k = 0; k < pk.k; ++k) out[k * nr + c] = 0.f;
          }
        }
      }
    }
  });
}

}  // namespace primcache::cpu_internal
