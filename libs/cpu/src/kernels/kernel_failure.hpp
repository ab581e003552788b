// kernels/kernel_failure.hpp — the failures kernels report, as values: the
// status says whether the input is malformed (invalid_arguments) or valid
// but not built by this kernel (unimplemented, so that a primitive
// descriptor passes it to the next implementation), and the message opens
// with the kernel's name.
//
//   return kernel_invalid("matmul", "m 0 is not positive");  // "matmul: m 0 is not positive"
//
// Thread-safety: pure functions. Exceptions: std::bad_alloc only.
#pragma once

#include <string>
#include <string_view>

#include "primcache/base/result.hpp"

namespace primcache::cpu_internal {

inline failure kernel_invalid(std::string_view kernel, const std::string& message) {
  return failure{status::invalid_arguments, std::string(kernel) + ": " + message};
}

inline failure kernel_unimplemented(std::string_view kernel, const std::string& message) {
  return failure{status::unimplemented, std::string(kernel) + ": " + message};
}

}  // namespace primcache::cpu_internal
