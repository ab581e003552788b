// element_size.hpp (private) — bytes per element, as a constant expression.
//
// The one table behind size_of() and the descriptor's hot path, which
// inlines it rather than calling an exported function.
#pragma once

#include <cstddef>

#include "primcache/tensor/data_type.hpp"

namespace primcache::tensor_internal {

// Bytes per element; 0 for undef and for values outside the enum.
constexpr std::size_t element_size(data_type dt) noexcept {
  switch (dt) {
    case data_type::f32: return 4;
    case data_type::f16: return 2;
    case data_type::bf16: return 2;
    case data_type::s8: return 1;
    case data_type::u8: return 1;
    case data_type::s32: return 4;
    case data_type::undef: return 0;
  }
  return 0;
}

}  // namespace primcache::tensor_internal
