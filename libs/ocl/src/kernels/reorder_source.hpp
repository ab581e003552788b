// kernels/reorder_source.hpp — the OpenCL C of a reorder on one device: one
// work-item per element of dst's padded dims; elements past the logical dims
// (block padding) are written as zero.
#pragma once

#include "primcache/tensor/memory_desc.hpp"
#include "program_binary.hpp"

namespace primcache::ocl_internal {

kernel_plan reorder_plan(const memory_desc& src, const memory_desc& dst);

}  // namespace primcache::ocl_internal
