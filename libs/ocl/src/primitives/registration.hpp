// primitives/registration.hpp — each primitive kind's registration, called
// once by the backend's static initializer (backend.cpp).
#pragma once

namespace primcache::ocl_internal {

void register_eltwise_impls();
void register_reorder_impls();
void register_matmul_impls();
void register_conv_impls();

}  // namespace primcache::ocl_internal
