// Helpers shared by the graph tests: tensors read back in logical order,
// filled data, references that share no code with the kernels.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "primcache/graph/executor.hpp"
#include "primcache/graph/graph.hpp"
#include "primcache/tensor/numeric.hpp"
#include "primcache/transform/transform_registry.hpp"

namespace graph_test {

using namespace primcache;

// The elements of `m` in row-major logical order, as floats: brought to the
// CPU in f32 and the plain layout first (through the transform library).
inline std::vector<float> logical(const memory& m) {
  const auto& md = m.get_desc();
  const kernel_type from = kernel_type::of(m, library::jit());
  const kernel_type host{place::cpu(), data_type::f32, plain_layout(md.ndims()), library::jit()};
  const memory h = from == host ? m : transform(m, from, host);
  const auto* p = static_cast<const float*>(h.get_data_handle());
  return std::vector<float>(p, p + h.get_desc().nelems());
}

inline tensor_spec tensor(std::string name, std::vector<std::int64_t> dims, tensor_role role,
                          std::string layout_name = "", data_type dt = data_type::f32) {
  tensor_spec t;
  t.name = std::move(name);
  t.dims = std::move(dims);
  t.type = dt;
  t.role = role;
  if (!layout_name.empty()) t.layout = layout::parse(layout_name);
  return t;
}

inline tensor_spec produced(std::string name, tensor_role role = tensor_role::output) {
  tensor_spec t;
  t.name = std::move(name);
  t.role = role;
  return t;
}

// x (M,K) times w (K,N), from their logical elements.
inline std::vector<double> matmul_reference(const memory& x, const memory& w) {
  const auto X = logical(x), W = logical(w);
  const std::int64_t M = x.get_desc().dims()[0], K = x.get_desc().dims()[1];
  const std::int64_t N = w.get_desc().dims()[1];
  std::vector<double> want(static_cast<std::size_t>(M * N));
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (std::int64_t k = 0; k < K; ++k) acc += double(X[m * K + k]) * W[k * N + n];
      want[m * N + n] = acc;
    }
  }
  return want;
}

// Adds tensor `t` and, for a constant, its data (uniform in [-1, 1)).
inline memory add_with_data(graph& g, tensor_spec t, std::uint64_t seed) {
  tensor_init init;
  init.seed = seed;
  memory m = make_tensor_data(t, init);
  const std::string name = t.name;
  const bool constant = t.role == tensor_role::constant;
  g.add_tensor(std::move(t));
  if (constant) g.set_data(name, m);
  return m;
}

inline void check_close(const std::vector<float>& got, const std::vector<double>& want,
                        double tolerance = 1e-4) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::abs(got[i] - want[i]) <= tolerance * (1 + std::abs(want[i])));
  }
}

// The message of the primcache::error `f` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return e.message();
  }
  return "";
}

// The status of the primcache::error `f` throws (success when it throws none).
template <typename F>
status status_of(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return e.code();
  }
  return status::success;
}

}  // namespace graph_test
