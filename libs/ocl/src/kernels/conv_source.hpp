// kernels/conv_source.hpp — the OpenCL C of an f32 2-D forward convolution
// for one problem and one configuration (see conv_config.hpp): groups,
// strides, dilation, padding (negative end padding included: the output
// size says which input rows are read), bias and the post-op chain fused
// into the store; a blocked dst's channel padding is written as zero (by
// the work-item that stores the last channel, see conv_source.cpp). Every
// tensor is addressed through its own layout;
// shapes, strides and the configuration are constants, the kernel takes
// only buffers.
#pragma once

#include "kernels/conv_config.hpp"
#include "kernels/conv_problem.hpp"
#include "program_binary.hpp"

namespace primcache::ocl_internal {

kernel_plan conv_plan(const conv_problem& p, const conv_config& c);

}  // namespace primcache::ocl_internal
