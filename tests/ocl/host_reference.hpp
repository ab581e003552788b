// host_reference.hpp — what the OpenCL kernels must compute, written as
// plain host loops in double precision. Shares no code with the kernel
// generators (libs/ocl/src/kernels): layouts are addressed through
// memory_desc::offset_of of the tensor library.
#pragma once

#include <cstdint>
#include <vector>

#include "primcache/runtime/runtime.hpp"

namespace ocl_test {

double eltwise_reference(primcache::algorithm alg, double v, double alpha, double beta);

// Every logical index of `dims`, row-major.
std::vector<std::vector<std::int64_t>> all_indices(const std::vector<std::int64_t>& dims);

// Host copies of a device memory's bytes (the stream must be idle).
std::vector<float> read_all(const primcache::memory& m);
void write_all(const primcache::memory& m, const std::vector<float>& values);

// Deterministic values in [-2, 2) from a seed.
std::vector<float> pattern(std::size_t n, std::uint32_t seed);

// A host engine registered by the tests (the CPU backend is not linked):
// engine(engine_kind::cpu, 0) with plain host storages.
void register_host_engine();

}  // namespace ocl_test
