// primcache/base/result.hpp — a small result type for expected failures.
//
// C++20 has no std::expected. result<T> holds either a T or a failure (status
// + message). Use it where failure is an ordinary outcome the caller decides
// on — a malformed environment value, a missing blob, a corrupt entry — and
// throw primcache::error where it is a broken contract.
//
//   primcache::result<std::int64_t> r = primcache::parse_int("12x", 0, 100);
//   if (!r) std::cerr << r.why().message;    // "'12x' is not an integer"
//   std::int64_t v = r.value_or(42);
//   std::int64_t w = r.value();                  // throws primcache::error
//
// Thread-safety: a value type; no shared state.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "primcache/base/error.hpp"

namespace primcache {

struct failure {
  status code = status::runtime_error;
  std::string message;
};

template <typename T>
class result {
  static_assert(!std::is_same_v<T, failure>, "result<failure> is ambiguous");

 public:
  result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  result(failure f) : state_(std::in_place_index<1>, std::move(f)) {}

  bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  // Throws primcache::error carrying the failure when there is no value.
  T& value() & {
    throw_if_failed();
    return std::get<0>(state_);
  }
  const T& value() const& {
    throw_if_failed();
    return std::get<0>(state_);
  }
  T&& value() && {
    throw_if_failed();
    return std::get<0>(std::move(state_));
  }
  T value_or(T fallback) const& { return has_value() ? std::get<0>(state_) : std::move(fallback); }

  // Precondition: !has_value().
  const struct failure& why() const& { return std::get<1>(state_); }

 private:
  void throw_if_failed() const {
    if (!has_value()) {
      const auto& f = std::get<1>(state_);
      throw error(f.code, f.message);
    }
  }

  std::variant<T, struct failure> state_;
};

}  // namespace primcache
