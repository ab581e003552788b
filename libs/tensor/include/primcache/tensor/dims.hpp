// primcache/tensor/dims.hpp — fixed-capacity dimension arrays and the
// borrowed view that the descriptor API takes them through.
//
// A memory descriptor keeps its dims, padded dims and strides in fixed
// arrays of max_ndims entries, so building one on the primitive-creation hot
// path never allocates. Entries past a descriptor's ndims are zero.
//
// dims_view borrows a list of int64 values (dims, strides or an index) from
// whatever holds them — a braced list, a std::vector, a std::array, a
// dims_array prefix as a span — so every API that takes dims accepts all of
// them in any mix:
//
//   std::vector<std::int64_t> dims{2, 3};
//   primcache::memory_desc md(dims, primcache::data_type::f32, {3, 1});
//   md.offset_of({1, 2});
//   primcache::dims_to_string(dims);   // "2x3", as messages name a shape
//
// Thread-safety: plain values; a dims_view is valid while what it views is
// (a braced list lives to the end of the full expression, so keep views as
// parameters, never as members). Exceptions: none, besides std::bad_alloc
// from dims_to_string.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "primcache/base/export.hpp"

namespace primcache {

// The most dimensions a descriptor may have (goidhw weights use all six).
inline constexpr int max_ndims = 6;

using dims_array = std::array<std::int64_t, max_ndims>;

class dims_view {
 public:
  constexpr dims_view() noexcept = default;
  constexpr dims_view(std::initializer_list<std::int64_t> values) noexcept
      : values_(values.begin(), values.size()) {}
  template <typename Range>
    requires(!std::is_same_v<std::remove_cvref_t<Range>, dims_view> &&
             std::is_convertible_v<Range &&, std::span<const std::int64_t>>)
  constexpr dims_view(Range&& values) noexcept : values_(std::forward<Range>(values)) {}

  constexpr std::span<const std::int64_t> span() const noexcept { return values_; }
  constexpr operator std::span<const std::int64_t>() const noexcept { return values_; }
  constexpr std::size_t size() const noexcept { return values_.size(); }
  constexpr bool empty() const noexcept { return values_.empty(); }
  constexpr const std::int64_t* data() const noexcept { return values_.data(); }
  constexpr const std::int64_t* begin() const noexcept { return values_.data(); }
  constexpr const std::int64_t* end() const noexcept { return values_.data() + values_.size(); }
  constexpr std::int64_t operator[](std::size_t i) const noexcept { return values_[i]; }

 private:
  std::span<const std::int64_t> values_;
};

// "2x3x224x224"; "()" for no dims.
PRIMCACHE_API std::string dims_to_string(dims_view dims);

}  // namespace primcache
