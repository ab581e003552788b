#include "primcache/tensor/data_type.hpp"

#include "element_size.hpp"

namespace primcache {

std::size_t size_of(data_type dt) noexcept {
  return tensor_internal::element_size(dt);
}

std::string_view to_string(data_type dt) noexcept {
  switch (dt) {
    case data_type::undef: return "undef";
    case data_type::f32: return "f32";
    case data_type::f16: return "f16";
    case data_type::bf16: return "bf16";
    case data_type::s8: return "s8";
    case data_type::u8: return "u8";
    case data_type::s32: return "s32";
  }
  return "unknown";
}

bool is_integral(data_type dt) noexcept {
  return dt == data_type::s8 || dt == data_type::u8 || dt == data_type::s32;
}

bool is_known(data_type dt) noexcept {
  return size_of(dt) != 0;
}

std::optional<data_type> parse_data_type(std::string_view name) noexcept {
  for (data_type dt : {data_type::f32, data_type::f16, data_type::bf16, data_type::s8,
                       data_type::u8, data_type::s32}) {
    if (to_string(dt) == name) return dt;
  }
  return std::nullopt;
}

}  // namespace primcache
