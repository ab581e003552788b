// kernels/matmul_problem.hpp — a matmul as the OpenCL generator sees it:
// resolved plain descriptors (any strides: row-major, transposed, batched
// with batch 1 broadcast) and the post-op chain.
#pragma once

#include <vector>

#include "kernels/post_op_source.hpp"
#include "primcache/runtime/attr.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace primcache::ocl_internal {

struct matmul_problem {
  memory_desc src;      // (M, K) or (B | 1, M, K)
  memory_desc weights;  // (K, N) or (B | 1, K, N)
  memory_desc bias;     // empty, (1, N) or (1, 1, N)
  memory_desc dst;      // (M, N) or (B, M, N)
  std::vector<post_op_entry> post_ops;
  // Constant weights: the kernel reads them packed (matmul_source.hpp), and
  // the plan has the packing kernel.
  bool packed_weights = false;

  std::int64_t batch() const { return dst.ndims() == 3 ? dst.dims()[0] : 1; }
  std::int64_t m() const { return dst.dims()[dst.ndims() - 2]; }
  std::int64_t n() const { return dst.dims()[dst.ndims() - 1]; }
  std::int64_t k() const { return src.dims()[src.ndims() - 1]; }
  // Batches of the weights: 1 when 2-D or broadcast.
  std::int64_t weights_batch() const { return weights.ndims() == 3 ? weights.dims()[0] : 1; }
};

}  // namespace primcache::ocl_internal
