// kernels/addressing.hpp — OpenCL C for the physical offset of a logical
// index in a memory descriptor (plain strides, nhwc, inner blocks), with
// every stride, block and offset baked in as a constant, and for splitting a
// linear work-item id into a logical index.
//
//   offset_function(md, "src_off")   // long src_off(long i0, long i1, ...)
//   index_split(dims, "gid", "i")    // long i1 = gid % 7; ... (innermost last)
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "primcache/tensor/memory_desc.hpp"

namespace primcache::ocl_internal {

std::string offset_function(const memory_desc& md, const std::string& name);
// Declares i0..i{n-1} from the linear `linear` over `dims` (row-major).
std::string index_split(std::span<const std::int64_t> dims, const std::string& linear,
                        const std::string& prefix);
// "i0, i1, i2" for n dims.
std::string index_list(int n, const std::string& prefix);
// A float literal that OpenCL C reads back bit-exactly (hexadecimal).
std::string float_literal(float v);

}  // namespace primcache::ocl_internal
