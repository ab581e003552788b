// kernels/padded_index_walk.hpp — the plain loop the walk kernels'
// references (reorder_reference, eltwise_reference) run: every logical index
// of a tensor's padded dims, last dimension fastest, with whether it is a
// real element or padding.
//
//   for_each_padded_index(dst_md, [&](dims_view index, bool real) {
//     const std::int64_t off = dst_md.offset_of(index);
//     out[off] = real ? f(in[src_md.offset_of(index)]) : 0.f;
//   });
//
// Thread-safety: runs f on the calling thread; the index viewed is valid for
// one call. Exceptions: what f throws.
#pragma once

#include <cstdint>
#include <span>

#include "primcache/tensor/memory_desc.hpp"

namespace primcache::cpu_internal {

template <class F>
void for_each_padded_index(const memory_desc& md, F&& f) {
  const int nd = md.ndims();
  const auto bound = md.padded_dims();
  dims_array i{};
  for (;;) {
    bool real = true;
    for (int k = 0; k < nd; ++k) real = real && i[k] < md.dims()[k];
    f(dims_view(std::span(i.data(), static_cast<std::size_t>(nd))), real);
    int k = nd - 1;
    for (; k >= 0; --k) {
      if (++i[k] < bound[k]) break;
      i[k] = 0;
    }
    if (k < 0) break;
  }
}

}  // namespace primcache::cpu_internal
