// kernels/weights_packing_source.hpp — the packing kernel of constant
// weights: OpenCL C that copies weights from the user's layout into the
// layout a kernel reads (padding zeroed), appended to that kernel's program.
//
//   plan.source += ...;
//   plan.packing = weights_packing_for(user_md, packed_md, "primcache_conv_pack", source);
//
// Its offset functions are named after the kernel, so they never collide
// with the main kernel's (src_off, wei_off, ...).
#pragma once

#include <string>

#include "primcache/tensor/memory_desc.hpp"
#include "program_binary.hpp"

namespace primcache::ocl_internal {

// Appends the kernel `name`(__global const float* from, __global float* to)
// to `source` and returns its packing description (layout key: `what`, both
// descriptors).
weights_packing weights_packing_for(const memory_desc& user, const memory_desc& packed,
                                    const std::string& name, const std::string& what,
                                    std::string& source);

}  // namespace primcache::ocl_internal
