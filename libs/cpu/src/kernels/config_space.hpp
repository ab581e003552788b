// kernels/config_space.hpp — an enumerated space of one kernel's typed
// configurations, and the conversions the kernels' configurations share
// with the backend-level form (primcache::backend::kernel_config).
//
// A space is size() configurations made on demand by at(i), so that a
// cartesian product of every real parameter (register blocks, cache blocks,
// unroll, thread grid, loop order, packing) costs nothing until it is
// walked. Spaces small enough to list are lists (of()).
//
//   enumerated_configs<matmul_config> s = matmul_config_candidates(p, isa);
//   for (const matmul_config& c : s.sample(4)) ...   // first, ..., last
//
//   auto c = read_fields(cfg, {"tile", "vector_lanes"});   // checked names
//   int tile = 0;
//   if (auto ok = c.get_int("tile", 4, 16, tile); !ok) return ok.why();
//
// Thread-safety: a space is immutable; at() may run on any thread.
// Exceptions: none but std::bad_alloc; at() requires i < size().
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "primcache/base/result.hpp"
#include "primcache/runtime/backend/kernel_config.hpp"

namespace primcache::cpu_internal {

template <class Config>
class enumerated_configs {
 public:
  using generator = std::function<Config(std::uint64_t)>;

  enumerated_configs() = default;
  enumerated_configs(std::uint64_t size, generator at) : size_(size), at_(std::move(at)) {}
  static enumerated_configs of(std::vector<Config> list) {
    const auto n = static_cast<std::uint64_t>(list.size());
    auto shared = std::make_shared<const std::vector<Config>>(std::move(list));
    return enumerated_configs(n, [shared](std::uint64_t i) { return (*shared)[i]; });
  }

  std::uint64_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  Config at(std::uint64_t i) const { return at_(i); }
  // Up to n configurations spread evenly over the space, the first and the
  // last included.
  std::vector<Config> sample(std::uint64_t n) const {
    std::vector<Config> out;
    if (size_ == 0 || n == 0) return out;
    if (n >= size_) n = size_;
    for (std::uint64_t k = 0; k < n; ++k) {
      out.push_back(at_(n == 1 ? 0 : k * (size_ - 1) / (n - 1)));
    }
    return out;
  }

 private:
  std::uint64_t size_ = 0;
  generator at_;
};

// The fields of a backend configuration, checked against a kernel's names.
class field_reader {
 public:
  // Fails (invalid_arguments) unless the fields are exactly `names`, in order.
  static result<field_reader> open(const backend::kernel_config& cfg, const char* kernel,
                                   std::initializer_list<std::string_view> names);
  // The value of `name` in [lo, hi], else invalid_arguments naming it.
  result<bool> get(std::string_view name, std::int64_t lo, std::int64_t hi,
                   std::int64_t& out) const;
  result<bool> get(std::string_view name, int lo, int hi, int& out) const;
  result<bool> get(std::string_view name, bool& out) const;

 private:
  field_reader(const backend::kernel_config& cfg, const char* kernel)
      : cfg_(&cfg), kernel_(kernel) {}
  const backend::kernel_config* cfg_;
  const char* kernel_;
};

}  // namespace primcache::cpu_internal
