// naive_reference.hpp — the kernel tests' expected values: plain loops over
// logical indices, written here from the kernels' documented semantics and
// sharing no code with the kernels (nor with their references in
// libs/cpu/src): no problem analysis, no offset helper, no walk plan. Element
// addresses come from naive_offset(), this file's own reading of a memory
// descriptor's blocked layout. Post-ops use the scalar semantics of
// kernels/post_ops.hpp (apply_post_ops_reference: double-precision math, no
// IR), which post_ops_test checks on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/conv_kernel.hpp"
#include "kernels/eltwise_kernel.hpp"
#include "kernels/matmul_kernel.hpp"
#include "kernels/reorder_kernel.hpp"
#include "primcache/tensor/memory_desc.hpp"

namespace cpu_test {

// The element offset of a logical index: each dimension's index written in
// the mixed radix of its inner blocks (innermost block fastest), the blocks'
// digits placed by the product of the blocks inside them, the remaining
// outer index times the dimension's stride, plus offset0.
std::int64_t naive_offset(const primcache::memory_desc& md, std::span<const std::int64_t> index);

// The bytes of md's padding (elements whose logical index is in [dims,
// padded dims) along some dimension) in `buf`, md's whole buffer, that are
// not zero: what a kernel writing dst must leave at 0.
std::size_t naive_nonzero_padding_bytes(const primcache::memory_desc& md,
                                        std::span<const std::byte> buf);

// dst = post_ops(src x weights + bias) in double, over the problem's strides.
void naive_matmul(const primcache::cpu_internal::matmul_problem& p,
                  const primcache::cpu_internal::matmul_args& args);

// Direct convolution in double over every output element; a blocked dst's
// channel padding is set to zero.
void naive_conv(const primcache::cpu_internal::conv_problem& p,
                const primcache::cpu_internal::conv_args& args);

// Element by element over dst's padded index space: padding zero, same-type
// unscaled elements copied bit for bit, others converted through f32 with
// the scale applied (round to nearest even, saturating, NaN to 0).
void naive_reorder(const primcache::cpu_internal::reorder_problem& p,
                   const primcache::cpu_internal::reorder_args& args);

// Element by element over dst's padded index space: padding zero, each
// element the eltwise op (scalar semantics of post_ops.hpp) of the source
// element, then the post-ops; f32 or bf16 (round to nearest even) in memory.
void naive_eltwise(const primcache::cpu_internal::eltwise_problem& p,
                   const primcache::cpu_internal::eltwise_args& args);

}  // namespace cpu_test
